package fpm

// Nexthop object messages (RTM_NEWNEXTHOP, RTM_DELNEXTHOP) of one source
// session, with the kernel's cascade rules: replacing an id moves the
// owner's routes that use it (and the groups containing it) to the new
// object; deleting an id deletes the owner's routes that use it and shrinks
// the groups containing it. Zebra sends members first, then groups, then
// routes, and deletes in the reverse order, so the cascades are rare; they
// walk the table.
//
// Locking: as Translator (one goroutine, inside FIB transactions).

import (
	"slices"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/rtnl"
	"github.com/netfwd/netfwd/nexthop"
)

// NewNexthop applies one RTM_NEWNEXTHOP (create or replace).
func (t *Translator) NewNexthop(tx *fib.Txn, n *rtnl.Nexthop) {
	if n.ID == 0 || n.Unsupported {
		t.C.skip(SkipNexthop)
		return
	}
	var members []rtnl.GroupMember
	if len(n.Group) > 0 {
		members = slices.Clone(n.Group)
	} else if !n.Blackhole && n.Family != rtnl.AF_INET {
		t.C.skip(SkipFamily)
		return
	}
	obj, reason := t.buildNexthop(tx, n, members)
	if reason != "" {
		t.C.skip(reason)
		return
	}
	t.C.NexthopsSet.Add(1)
	t.setEntry(tx, n.ID, &nhEntry{obj: obj, members: members, mark: t.Mark})
}

// buildNexthop returns a held reference to the object of a nexthop message
// (members: the group's, already cloned).
func (t *Translator) buildNexthop(tx *fib.Txn, n *rtnl.Nexthop, members []rtnl.GroupMember) (*nexthop.Nexthop, string) {
	reg := tx.Nexthops()
	switch {
	case len(members) > 0:
		return t.buildGroup(tx, members)
	case n.Blackhole:
		nh, err := reg.Implicit(nexthop.Spec{Kind: nexthop.Blackhole})
		if err != nil {
			return nil, SkipRegistry
		}
		return nh, ""
	}
	dev, ok := t.dev(n.OIF)
	if !ok {
		return nil, SkipIface
	}
	if n.Gateway.IsValid() && !n.Gateway.Is4() {
		return nil, SkipUnsupported
	}
	nh, err := reg.Implicit(nexthop.Spec{Kind: nexthop.Unicast, Gateway: n.Gateway, Dev: dev,
		OnLink: n.Flags&rtnl.RTNH_F_ONLINK != 0})
	if err != nil {
		return nil, SkipRegistry
	}
	return nh, ""
}

// buildGroup returns a held reference to the group object of members.
func (t *Translator) buildGroup(tx *fib.Txn, members []rtnl.GroupMember) (*nexthop.Nexthop, string) {
	paths := make([]nexthop.Spec, 0, len(members))
	weights := make([]uint16, 0, len(members))
	for _, m := range members {
		e := t.nhs[m.ID]
		if e == nil || e.members != nil {
			return nil, SkipNexthopID // unknown, or a nested group
		}
		o := e.obj
		if o.Kind != nexthop.Unicast {
			if len(members) == 1 { // a group of one blackhole forwards as that blackhole
				tx.Nexthops().Hold(o)
				return o, ""
			}
			return nil, SkipNexthop
		}
		paths = append(paths, nexthop.Spec{Kind: o.Kind, Gateway: o.Gateway, Dev: o.Dev, OnLink: o.OnLink,
			LocalGateway: o.LocalGateway})
		weights = append(weights, m.Weight)
	}
	nh, err := tx.Nexthops().ImplicitGroup(paths, weights)
	if err != nil {
		return nil, SkipRegistry
	}
	return nh, ""
}

// setEntry stores id's entry (whose reference it takes over) and cascades a
// change of object to routes and groups.
func (t *Translator) setEntry(tx *fib.Txn, id uint32, e *nhEntry) {
	reg := tx.Nexthops()
	old := t.nhs[id]
	t.nhs[id] = e
	if old == nil {
		return
	}
	defer reg.Release(old.obj)
	if old.obj == e.obj {
		return
	}
	t.cascade(tx, id, old.obj, e.obj)
}

// cascade moves what used id's old object to new (nil: id is gone).
func (t *Translator) cascade(tx *fib.Txn, id uint32, old, new *nexthop.Nexthop) {
	if !t.objInUse(old) {
		if new != nil {
			tx.RepointLearned(t.Owner, old, new)
		} else {
			tx.DelLearnedUsing(t.Owner, old)
		}
	}
	for gid, g := range t.nhs {
		if g.members == nil || !slices.ContainsFunc(g.members, func(m rtnl.GroupMember) bool { return m.ID == id }) {
			continue
		}
		members := g.members
		if new == nil {
			members = slices.DeleteFunc(slices.Clone(members), func(m rtnl.GroupMember) bool { return m.ID == id })
		}
		if len(members) == 0 {
			t.dropEntry(tx, gid)
			continue
		}
		obj, reason := t.buildGroup(tx, members)
		if reason != "" {
			t.C.skip(reason)
			t.dropEntry(tx, gid)
			continue
		}
		t.setEntry(tx, gid, &nhEntry{obj: obj, members: members, mark: g.mark})
	}
}

// objInUse reports whether another id of the session still maps to obj
// (the session's routes through it then stay).
func (t *Translator) objInUse(obj *nexthop.Nexthop) bool {
	for _, e := range t.nhs {
		if e.obj == obj {
			return true
		}
	}
	return false
}

// DelNexthop applies one RTM_DELNEXTHOP.
func (t *Translator) DelNexthop(tx *fib.Txn, n *rtnl.Nexthop) {
	if t.nhs[n.ID] == nil {
		t.C.skip(SkipNexthopID)
		return
	}
	t.C.NexthopsDeleted.Add(1)
	t.dropEntry(tx, n.ID)
}

// dropEntry removes id with the kernel's cascade.
func (t *Translator) dropEntry(tx *fib.Txn, id uint32) {
	e := t.nhs[id]
	if e == nil {
		return
	}
	delete(t.nhs, id)
	t.cascade(tx, id, e.obj, nil)
	tx.Nexthops().Release(e.obj)
}

// SweepNexthops drops the ids not stamped with keep (a resync that did not
// see them again).
func (t *Translator) SweepNexthops(tx *fib.Txn, keep uint8) int {
	var gone []uint32
	for id, e := range t.nhs {
		if e.mark != keep {
			gone = append(gone, id)
		}
	}
	slices.Sort(gone)
	// Groups first, so members are not cascaded into groups about to go.
	slices.SortStableFunc(gone, func(a, b uint32) int {
		ga, gb := t.nhs[a].members != nil, t.nhs[b].members != nil
		switch {
		case ga && !gb:
			return -1
		case gb && !ga:
			return 1
		}
		return 0
	})
	for _, id := range gone {
		t.dropEntry(tx, id)
	}
	return len(gone)
}

// Nexthops returns the number of source ids the session knows.
func (t *Translator) Nexthops() int { return len(t.nhs) }

// Close releases the session's nexthop references (its routes keep their
// own). Call it inside a transaction when the session ends.
func (t *Translator) Close(tx *fib.Txn) {
	for id, e := range t.nhs {
		tx.Nexthops().Release(e.obj)
		delete(t.nhs, id)
	}
	t.lastNH = nil
}
