package fib

// User nexthop operations (`ip nexthop add|replace|del`) at the FIB level:
// the gateway is validated against the routes as the kernel does, and routes
// follow the registry's cascade (a replaced nexthop repoints its routes, a
// deleted one takes its routes with it, as in Linux).
//
// Locking: inside a Txn.

import (
	"errors"

	"github.com/netfwd/netfwd/nexthop"
)

func (tx *Txn) checkUserSpec(u nexthop.UserSpec) error {
	s := u.Single
	if len(u.Group) > 0 || s.Kind != nexthop.Unicast || s.Dev == "" {
		return nil // the registry validates the rest
	}
	if !tx.f.nhs.DevUp(s.Dev) {
		return errors.New("nexthop device is not up")
	}
	if !s.Gateway.IsValid() {
		return nil
	}
	_, err := tx.checkPath(s.Gateway, s.Dev, s.OnLink, &Route{Table: TableMain, Scope: ScopeUniverse})
	return err
}

// resolveUserSpec fills what validation learns (the gateway is local).
func (tx *Txn) resolveUserSpec(u nexthop.UserSpec) nexthop.UserSpec {
	s := u.Single
	if len(u.Group) == 0 && s.Kind == nexthop.Unicast && s.Gateway.IsValid() && !s.OnLink {
		if spec, err := tx.checkPath(s.Gateway, s.Dev, false, &Route{Table: TableMain, Scope: ScopeUniverse}); err == nil {
			u.Single.LocalGateway = spec.LocalGateway
		}
	}
	return u
}

// AddNexthop adds a user nexthop.
func (tx *Txn) AddNexthop(u nexthop.UserSpec) error {
	if err := tx.checkUserSpec(u); err != nil {
		return err
	}
	_, err := tx.f.nhs.Add(tx.resolveUserSpec(u))
	return err
}

// ReplaceNexthop replaces (or creates) a user nexthop; routes using it, or a
// group containing it, follow.
func (tx *Txn) ReplaceNexthop(u nexthop.UserSpec) error {
	if err := tx.checkUserSpec(u); err != nil {
		return err
	}
	reps, err := tx.f.nhs.Replace(tx.resolveUserSpec(u))
	if err != nil {
		return err
	}
	tx.repoint(reps)
	return nil
}

// DelNexthop deletes a user nexthop and the routes using it; groups that
// contain it shrink (and go, with their routes, when left empty).
func (tx *Txn) DelNexthop(id uint32) error {
	deleted, reps, err := tx.f.nhs.Delete(id)
	if err != nil {
		return err
	}
	gone := map[*nexthop.Nexthop]bool{}
	for _, nh := range deleted {
		gone[nh] = true
	}
	tx.removeRoutesWhere(func(r *Route) bool { return gone[r.NH] })
	tx.repoint(reps)
	return nil
}

// repoint moves routes from old nexthop objects to their replacements.
func (tx *Txn) repoint(reps []nexthop.Repoint) {
	if len(reps) == 0 {
		return
	}
	to := map[*nexthop.Nexthop]*nexthop.Nexthop{}
	for _, r := range reps {
		to[r.Old] = r.New
	}
	for _, ref := range tx.prefixesWhere(func(r *Route) bool { return to[r.NH] != nil }) {
		list := tx.getList(ref.table, ref.prefix)
		next := make([]*Route, len(list))
		for i, r := range list {
			next[i] = r
			if nh := to[r.NH]; nh != nil {
				c := *r
				c.NH = nh
				tx.f.nhs.Hold(nh)
				tx.f.nhs.Release(r.NH)
				next[i] = &c
			}
		}
		tx.setList(ref.table, ref.prefix, next)
		tx.updateMerged(ref.table, ref.prefix)
	}
}

// Nexthop returns the user nexthop with id from the published state, with
// the routes using it counted. For dumps; takes the writer lock.
func (f *FIB) Nexthop(id uint32) (*nexthop.Nexthop, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	nh := f.nhs.ByID(id)
	return nh, nh != nil
}

// NexthopIDs lists the user nexthop ids. Takes the writer lock.
func (f *FIB) NexthopIDs() []uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nhs.IDs()
}
