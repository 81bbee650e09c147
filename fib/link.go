package fib

// Link state. A device going down makes the forwarding nexthops through it
// dead: routes using them stay configured (and in dumps) but are skipped by
// lookups, which fall back to the next metric or a shorter prefix, and come
// back when the link does. Its derived broadcast and network routes are
// withdrawn while it is down; its local routes stay, as in Linux.
// (Linux flushes static routes through a device that goes administratively
// down; netfwd keeps them and restores them, as a routing daemon would.)
//
// Locking: inside a Txn.

import "github.com/netfwd/netfwd/nexthop"

// SetLinkUp records a device's link state.
func (tx *Txn) SetLinkUp(dev string, up bool) error {
	wasUp := tx.f.nhs.DevUp(dev)
	if wasUp == up {
		return nil
	}
	changed := tx.f.nhs.SetDevUp(dev, up)
	if len(changed) > 0 {
		set := map[*nexthop.Nexthop]bool{}
		for _, nh := range changed {
			set[nh] = true
		}
		for _, ref := range tx.prefixesWhere(func(r *Route) bool { return r.NH != nil && set[r.NH] }) {
			tx.updateMerged(ref.table, ref.prefix)
		}
	}
	addrs := tx.devAddrs(dev)
	return tx.syncDerived(dev, addrs, wasUp)
}

// LinkUp reports whether the FIB considers a device up.
func (f *FIB) LinkUp(dev string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nhs.DevUp(dev)
}
