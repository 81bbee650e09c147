package hostpath

// Addresses flow one way: netfwd -> kernel. netfwd's configured addresses
// of an interface are put on its twin, so a daemon can bind to them and
// `ip addr` in the namespace agrees with `netfwd ctl address show`; nothing
// the kernel has on a twin flows back. planAddrs computes the netlink
// changes that make a twin's IPv4 addresses exactly the wanted ones, with
// the same primary and secondary addresses: the first address of a subnet
// (same length, same masked prefix) in netfwd's order is its primary, the
// others are secondaries, as both the kernel and netfwd's FIB decide when
// addresses are added in that order. IPv6 addresses (the link-local one
// included) are never touched.
//
// Locking: none; a pure function.

import (
	"fmt"
	"net/netip"
)

// planAddrs returns what to delete (in order) and then add (in order) so
// that cur, a twin's IPv4 addresses as the kernel lists them, becomes want.
// A subnet whose current primary is not the wanted primary is deleted whole
// and added again: the kernel cannot change which address is primary in
// place. Secondaries are deleted before primaries, so the result does not
// depend on promote_secondaries.
func planAddrs(cur []kernelAddr, want []netip.Prefix) (del, add []netip.Prefix) {
	wantSet := map[netip.Prefix]bool{}
	wantPrimary := map[netip.Prefix]netip.Prefix{}
	for _, p := range want {
		wantSet[p] = true
		if _, ok := wantPrimary[p.Masked()]; !ok {
			wantPrimary[p.Masked()] = p
		}
	}
	flush := map[netip.Prefix]bool{}
	for _, a := range cur {
		if !a.secondary && wantPrimary[a.prefix.Masked()] != a.prefix {
			flush[a.prefix.Masked()] = true
		}
	}
	present := map[netip.Prefix]bool{}
	for _, a := range cur {
		present[a.prefix] = true
	}
	for _, secondaries := range []bool{true, false} {
		for _, a := range cur {
			if a.secondary != secondaries {
				continue
			}
			if flush[a.prefix.Masked()] || !wantSet[a.prefix] {
				del = append(del, a.prefix)
				delete(present, a.prefix)
			}
		}
	}
	for _, p := range want {
		if !present[p] {
			add = append(add, p)
			present[p] = true
		}
	}
	return del, add
}

// checkAddrs validates a Spec's addresses.
func checkAddrs(addrs []netip.Prefix) error {
	seen := map[netip.Prefix]bool{}
	for _, p := range addrs {
		if !p.IsValid() || !p.Addr().Is4() {
			return fmt.Errorf("address %v: not an IPv4 prefix", p)
		}
		if seen[p] {
			return fmt.Errorf("address %v listed twice", p)
		}
		seen[p] = true
	}
	return nil
}

// syncAddrsLocked applies planAddrs to the twin's interface.
func (m *Manager) syncAddrsLocked(index int, cur []kernelAddr, want []netip.Prefix) error {
	del, add := planAddrs(cur, want)
	for _, p := range del {
		if err := m.nl.delAddr(index, p); err != nil {
			return err
		}
	}
	for _, p := range add {
		if err := m.nl.addAddr(index, p); err != nil {
			return err
		}
	}
	return nil
}
