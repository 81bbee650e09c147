package fib

// The router's own source addresses: the /32 routes of the local table that
// are local or broadcast (its addresses, the broadcast addresses of its
// connected subnets, `route add local|broadcast A/32 ... table local`). A
// received packet with such a source is a martian: Linux's
// fib_validate_source rejects a source whose route is not unicast. The
// datapath asks once per packet, so the set is a perfect-hash table (one
// probe, no loop: the check inlines into the caller), rebuilt at each commit
// that changed the local table.
//
// Locking: immutable, part of the published state.

import (
	"math/bits"

	"github.com/netfwd/netfwd/wire"
)

type ownAddrs struct {
	slots []wire.Addr4 // 0 marks an empty slot; no two addresses share one
	mult  uint32       // the hash multiplier that makes them distinct
	shift uint8        // 32 - log2(len(slots))
}

// slot is a's only possible slot.
func (s *ownAddrs) slot(a wire.Addr4) uint32 { return uint32(a) * s.mult >> (s.shift & 31) }

// newOwnAddrs collects the local and broadcast /32 routes of the local table.
func newOwnAddrs(local *routeTrie) *ownAddrs {
	var own []wire.Addr4
	if local != nil {
		for p, rl := range local.All4() {
			if p.Bits() == 32 && len(rl.routes) > 0 && (rl.routes[0].Type == Local || rl.routes[0].Type == Broadcast) {
				if a := wire.Addr4From(p.Addr()); a != 0 {
					own = append(own, a)
				}
			}
		}
	}
	// Multipliers from a fixed odd sequence until one spreads the addresses
	// over distinct slots; a table four times their number has a fair
	// chance each time, and it doubles after a few failures.
	mult := uint32(0x9e3779b1)
	for size := max(4, 1<<bits.Len(uint(4*len(own)))); ; size *= 2 {
		s := &ownAddrs{slots: make([]wire.Addr4, size), shift: uint8(32 - bits.TrailingZeros(uint(size)))}
		for range 16 {
			s.mult = mult
			mult += 0x3c6ef372 // stays odd
			if s.fill(own) {
				return s
			}
		}
	}
}

// fill places own in s's slots, reporting false at the first collision.
func (s *ownAddrs) fill(own []wire.Addr4) bool {
	clear(s.slots)
	for _, a := range own {
		i := s.slot(a)
		if s.slots[i] != 0 && s.slots[i] != a {
			return false
		}
		s.slots[i] = a
	}
	return true
}

// IsLocalOrBroadcast reports whether a is one of the router's addresses or
// a broadcast address of one of its subnets (a local or broadcast /32 route
// of the local table). A received packet with such a source is a martian.
// a must not be 0.0.0.0. Lock-free; inlines into the caller.
func (f *FIB) IsLocalOrBroadcast(a wire.Addr4) bool {
	s := f.cur.Load().own
	return s.slots[s.slot(a)] == a
}
