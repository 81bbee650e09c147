package fib

// Addresses of another owner (the kernel mirror): the kernel's addresses in
// netfwd's namespace. They take part in source selection (the prefsrc
// `route get` reports, the source of ICMP errors) and IsLocalAddress, but
// derive no routes: the mirror copies the kernel's local, broadcast and
// connected routes as the kernel has them.
//
// Locking: inside a Txn.

import (
	"net/netip"
	"slices"
)

// SetOwnedAddress records an address of owner (not OwnerConfig) on dev,
// replacing its secondary flag if it is there. It reports whether anything
// changed.
func (tx *Txn) SetOwnedAddress(owner Owner, dev string, p netip.Prefix, secondary bool) bool {
	i := slices.IndexFunc(tx.next.addrs, func(a Address) bool { return a.Owner == owner && a.Dev == dev && a.Prefix == p })
	if i >= 0 && tx.next.addrs[i].Secondary == secondary {
		return false
	}
	addrs := slices.Clone(tx.next.addrs)
	if i >= 0 {
		addrs[i].Secondary = secondary
	} else {
		addrs = append(addrs, Address{Dev: dev, Prefix: p, Secondary: secondary, Owner: owner})
	}
	tx.next.addrs = addrs
	return true
}

// DelOwnedAddress removes an address of owner. It reports whether it was
// there.
func (tx *Txn) DelOwnedAddress(owner Owner, dev string, p netip.Prefix) bool {
	i := slices.IndexFunc(tx.next.addrs, func(a Address) bool { return a.Owner == owner && a.Dev == dev && a.Prefix == p })
	if i < 0 {
		return false
	}
	tx.next.addrs = slices.Delete(slices.Clone(tx.next.addrs), i, i+1)
	return true
}

// RoutesAt returns the routes of (table, prefix) in the transaction's state,
// best first. The slice and the routes are read-only.
func (tx *Txn) RoutesAt(table uint32, p netip.Prefix) []*Route {
	return tx.getList(table, p)
}
