package nexthop

// Device liveness: a nexthop whose device is down is dead, and a group is dead
// when all its members are. The FIB skips routes whose nexthop is dead (falling
// back to the next metric or a shorter prefix); groups keep forwarding over
// their live members, rebalanced.
//
// Flow: SetDevUp flips the dead flags (journaled) and returns the nexthops
// whose liveness changed, for the FIB to recompute the routes using them.
// Group selection tables are rebuilt at Commit, so readers see new member sets
// only together with the FIB snapshot of the same transaction.
//
// Locking: FIB writer lock.

// SetDevUp records the link state of dev and returns the nexthops (singles
// and groups) whose liveness changed.
func (r *Registry) SetDevUp(dev string, up bool) []*Nexthop {
	if r.devDown[dev] == !up {
		return nil
	}
	r.setDevDown(dev, !up)
	var changed []*Nexthop
	single := func(nh *Nexthop) {
		if nh.Group == nil && nh.Kind == Unicast && nh.Dev == dev && nh.dead.Load() != !up {
			r.setDead(nh, !up)
			changed = append(changed, nh)
		}
	}
	for _, nh := range r.implicit {
		single(nh)
	}
	for _, nh := range r.byID {
		single(nh)
	}
	group := func(g *Nexthop) {
		if g.Group == nil {
			return
		}
		live, touched := 0, false
		for _, m := range g.Group.Members {
			if !m.NH.dead.Load() {
				live++
			}
			if m.NH.Dev == dev {
				touched = true
			}
		}
		if !touched {
			return
		}
		r.pendingRebalance(g)
		if g.dead.Load() != (live == 0) {
			r.setDead(g, live == 0)
			changed = append(changed, g)
		}
	}
	for _, nh := range r.implicit {
		group(nh)
	}
	for _, nh := range r.byID {
		group(nh)
	}
	return changed
}

func (r *Registry) setDevDown(dev string, down bool) { setUndoable(r, r.devDown, dev, true, down) }

// pendingRebalance schedules a group's selection table for rebuild at Commit
// (or rebuilds it now outside a transaction).
func (r *Registry) pendingRebalance(g *Nexthop) {
	if !r.inTxn {
		g.Group.rebalance()
		return
	}
	r.rebalance = append(r.rebalance, g)
}
