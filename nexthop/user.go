package nexthop

// User nexthops: `ip nexthop add|replace|del id N ...` with the kernel's
// validation and its cascade rules: replacing a nexthop repoints every route
// and group that uses it (a new object, so readers never see a half-updated
// one); deleting a group member shrinks the groups that contain it and deletes
// the ones left empty.
//
// Locking: FIB writer lock, like the rest of the Registry.

import (
	"errors"
	"fmt"
)

// GroupMemberSpec names one member of a user group by id.
type GroupMemberSpec struct {
	ID     uint32
	Weight uint16 // 1..MaxWeight; 0 means 1
}

// UserSpec is the argument of `ip nexthop add|replace`: either a single
// nexthop (Single) or a group (Group non-empty).
type UserSpec struct {
	ID     uint32
	Single Spec
	Group  []GroupMemberSpec
}

// Repoint says that routes using Old must now use New.
type Repoint struct{ Old, New *Nexthop }

// Errors with the kernel's wording where it has one.
var (
	ErrExists   = errors.New("nexthop id already exists")
	ErrNotFound = errors.New("nexthop id does not exist")
)

// validate checks a spec against the current registry.
func (r *Registry) validate(u UserSpec) error {
	if u.ID == 0 {
		return errors.New("invalid nexthop id 0")
	}
	if len(u.Group) == 0 {
		s := u.Single
		switch s.Kind {
		case Blackhole:
			if s.Dev != "" || s.Gateway.IsValid() {
				return errors.New("blackhole nexthop can not have a device or gateway")
			}
		case Unicast:
			if s.Dev == "" {
				return errors.New("device attribute required for non-blackhole nexthops")
			}
			if s.Gateway.IsValid() && !s.Gateway.Is4() {
				return errors.New("gateway must be an IPv4 address")
			}
			if s.OnLink && !s.Gateway.IsValid() {
				return errors.New("onlink needs a gateway")
			}
		default:
			return fmt.Errorf("invalid nexthop kind %v", s.Kind)
		}
		return nil
	}
	seen := map[uint32]bool{}
	for _, m := range u.Group {
		nh := r.byID[m.ID]
		switch {
		case m.ID == u.ID:
			return errors.New("nexthop group can not contain itself")
		case nh == nil:
			return fmt.Errorf("invalid nexthop id %d in group", m.ID)
		case nh.Group != nil:
			return errors.New("nested groups are not allowed")
		case seen[m.ID]:
			return fmt.Errorf("duplicate nexthop id %d in group", m.ID)
		case m.Weight > MaxWeight:
			return fmt.Errorf("invalid weight %d (1-%d)", m.Weight, MaxWeight)
		case nh.Kind == Blackhole && len(u.Group) > 1:
			return errors.New("blackhole nexthop can not be used in a group with more than 1 path")
		}
		seen[m.ID] = true
	}
	return nil
}

// build makes the object for a validated spec, holding its members.
func (r *Registry) build(u UserSpec) (*Nexthop, error) {
	if len(u.Group) == 0 {
		s := u.Single
		return r.newNexthop(withDead(&Nexthop{ID: u.ID, Kind: s.Kind, Gateway: s.Gateway, Dev: s.Dev, OnLink: s.OnLink, LocalGateway: s.LocalGateway}, specDead(r, s)))
	}
	members := make([]Member, len(u.Group))
	for i, m := range u.Group {
		w := m.Weight
		if w == 0 {
			w = 1
		}
		members[i] = Member{NH: r.byID[m.ID], Weight: w}
	}
	return r.buildGroup(u.ID, members)
}

func (r *Registry) buildGroup(id uint32, members []Member) (*Nexthop, error) {
	g := newGroup(members)
	nh, err := r.newNexthop(withDead(&Nexthop{ID: id, Kind: Unicast, Group: g}, g.Live() == 0))
	if err != nil {
		return nil, err
	}
	for _, m := range members {
		r.Hold(m.NH)
	}
	return nh, nil
}

func (r *Registry) setID(id uint32, nh *Nexthop) { setUndoable(r, r.byID, id, nh, nh != nil) }

// retire drops a user nexthop object that is being replaced or deleted:
// its index is released and a group releases its members.
func (r *Registry) retire(nh *Nexthop) {
	r.freeIndex(nh)
	if nh.Group != nil {
		for _, m := range nh.Group.Members {
			r.Release(m.NH)
		}
	}
}

// Add creates user nexthop u.ID.
func (r *Registry) Add(u UserSpec) (*Nexthop, error) {
	if r.byID[u.ID] != nil {
		return nil, ErrExists
	}
	if err := r.validate(u); err != nil {
		return nil, err
	}
	nh, err := r.build(u)
	if err != nil {
		return nil, err
	}
	r.setID(u.ID, nh)
	return nh, nil
}

// Replace replaces user nexthop u.ID, or creates it (`ip nexthop replace`
// creates, as iproute2 asks the kernel to). It returns the repointing the FIB
// must apply to its routes: the nexthop itself and every group containing it.
func (r *Registry) Replace(u UserSpec) ([]Repoint, error) {
	old := r.byID[u.ID]
	if old == nil {
		_, err := r.Add(u)
		return nil, err
	}
	if err := r.validate(u); err != nil {
		return nil, err
	}
	if (old.Group != nil) != (len(u.Group) > 0) {
		if old.Group != nil {
			return nil, errors.New("can not replace a nexthop group with a nexthop")
		}
		return nil, errors.New("can not replace a nexthop with a nexthop group")
	}
	if len(u.Group) == 0 && u.Single.Kind == Blackhole {
		for _, g := range r.groupsContaining(old) {
			if len(g.Group.Members) > 1 {
				return nil, errors.New("blackhole nexthop can not be used in a group with more than 1 path")
			}
		}
	}
	nh, err := r.build(u)
	if err != nil {
		return nil, err
	}
	reps := []Repoint{{Old: old, New: nh}}
	r.setID(u.ID, nh)
	for _, g := range r.groupsContaining(old) {
		members := append([]Member(nil), g.Group.Members...)
		for i := range members {
			if members[i].NH == old {
				members[i].NH = nh
			}
		}
		ng, err := r.buildGroup(g.ID, members)
		if err != nil {
			return nil, err
		}
		r.setID(g.ID, ng)
		r.retire(g)
		reps = append(reps, Repoint{Old: g, New: ng})
	}
	r.retire(old)
	return reps, nil
}

// Delete removes user nexthop id. It returns the nexthops whose routes must
// be deleted (it, and groups left without members) and the groups that
// shrank, whose routes must be repointed.
func (r *Registry) Delete(id uint32) (deleted []*Nexthop, reps []Repoint, err error) {
	nh := r.byID[id]
	if nh == nil {
		return nil, nil, ErrNotFound
	}
	deleted = append(deleted, nh)
	for _, g := range r.groupsContaining(nh) {
		var members []Member
		for _, m := range g.Group.Members {
			if m.NH != nh {
				members = append(members, m)
			}
		}
		if len(members) == 0 {
			r.setID(g.ID, nil)
			r.retire(g)
			deleted = append(deleted, g)
			continue
		}
		ng, err := r.buildGroup(g.ID, members)
		if err != nil {
			return nil, nil, err
		}
		r.setID(g.ID, ng)
		r.retire(g)
		reps = append(reps, Repoint{Old: g, New: ng})
	}
	r.setID(id, nil)
	r.retire(nh)
	return deleted, reps, nil
}

func (r *Registry) groupsContaining(nh *Nexthop) []*Nexthop {
	var gs []*Nexthop
	for _, id := range r.IDs() { // sorted: deterministic results
		g := r.byID[id]
		if g.Group == nil {
			continue
		}
		for _, m := range g.Group.Members {
			if m.NH == nh {
				gs = append(gs, g)
				break
			}
		}
	}
	return gs
}
