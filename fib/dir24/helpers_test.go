// Test helpers of the compiled FIB: the slow reference model, the full
// Internet table from the bart module's testdata, random probes, and an
// exhaustive comparison of two Table structures.

package dir24

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"

	"github.com/netfwd/netfwd/internal/fulltable"
	"github.com/netfwd/netfwd/wire"
)

// refModel is the reference: a plain map of prefixes, longest match by
// trying every length from /32 down. Slow, obviously right.
type refModel map[netip.Prefix]uint32

func (m refModel) lookup(addr wire.Addr4) uint32 {
	v, _, _ := m.match(addr, 32)
	return v
}

// match returns the longest prefix of length <= maxBits containing addr.
func (m refModel) match(addr wire.Addr4, maxBits int) (uint32, netip.Prefix, bool) {
	a := addrOf(wire.Addr4(addr))
	for bits := maxBits; bits >= 0; bits-- {
		p := netip.PrefixFrom(a, bits).Masked()
		if v, ok := m[p]; ok {
			return v, p, true
		}
	}
	return 0, netip.Prefix{}, false
}

// parent is what the FIB writer passes to Delete: the longest prefix in the
// model strictly containing p.
func (m refModel) parent(p netip.Prefix) (netip.Prefix, uint32, bool) {
	if p.Bits() == 0 {
		return netip.Prefix{}, 0, false
	}
	v, pp, ok := m.match(u32(p.Addr()), p.Bits()-1)
	return pp, v, ok
}

func addrOf(a wire.Addr4) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)})
}

func u32(a netip.Addr) wire.Addr4 {
	b := a.As4()
	return wire.Addr4(b[0])<<24 | wire.Addr4(b[1])<<16 | wire.Addr4(b[2])<<8 | wire.Addr4(b[3])
}

// prefixRange returns the first and last address of p.
func prefixRange(p netip.Prefix) (wire.Addr4, wire.Addr4) {
	first := u32(p.Masked().Addr())
	return first, first | wire.Addr4(uint64(1)<<(32-p.Bits())-1)
}

// testRoute is one (prefix, value) pair of a test table.
type testRoute struct {
	p netip.Prefix
	v uint32
}

func seq(routes []testRoute) func(func(netip.Prefix, uint32) bool) {
	return func(yield func(netip.Prefix, uint32) bool) {
		for _, r := range routes {
			if !yield(r.p, r.v) {
				return
			}
		}
	}
}

// nexthops is how many distinct nexthop values the full table uses.
const nexthops = 4000

// valueFor gives a prefix a pseudo-random nexthop index in 1..nexthops.
func valueFor(p netip.Prefix) uint32 {
	x := uint64(u32(p.Addr()))<<8 | uint64(p.Bits())
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	return uint32(x%nexthops) + 1
}

var (
	fullOnce   sync.Once
	fullRoutes []testRoute
	fullErr    error
)

// fullTable returns the 901,899 IPv4 prefixes of the bart module's
// testdata (the full Internet table), each with valueFor.
func fullTable(tb testing.TB) []testRoute {
	tb.Helper()
	fullOnce.Do(func() { fullRoutes, fullErr = loadFullTable() })
	if fullErr != nil {
		tb.Fatalf("full table: %v", fullErr)
	}
	return fullRoutes
}

func loadFullTable() ([]testRoute, error) {
	pfx, err := fulltable.Load()
	if err != nil {
		return nil, err
	}
	routes := make([]testRoute, len(pfx))
	for i, p := range pfx {
		routes[i] = testRoute{p, valueFor(p)}
	}
	return routes, nil
}

// probeAddrs returns n addresses (n a power of two): half a random address
// inside a random prefix of routes, half uniformly random, interleaved at
// random, so consecutive probes hit unrelated cache lines and pages.
func probeAddrs(routes []testRoute, n int, seed uint64) []wire.Addr4 {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	probes := make([]wire.Addr4, n)
	for i := range probes {
		if rng.IntN(2) == 0 && len(routes) > 0 {
			first, last := prefixRange(routes[rng.IntN(len(routes))].p)
			probes[i] = first + wire.Addr4(rng.Uint64N(uint64(last-first)+1))
		} else {
			probes[i] = wire.Addr4(rng.Uint32())
		}
	}
	return probes
}

// routedProbes returns n addresses, each random inside a random prefix of
// routes.
func routedProbes(routes []testRoute, n int, seed uint64) []wire.Addr4 {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	probes := make([]wire.Addr4, n)
	for i := range probes {
		first, last := prefixRange(routes[rng.IntN(len(routes))].p)
		probes[i] = first + wire.Addr4(rng.Uint64N(uint64(last-first)+1))
	}
	return probes
}

// resolved is the entry (plain, or 0 for default) a structure holds for
// addr, read directly from its arrays (not through Lookup), for exhaustive
// comparisons. The exhaustive helpers run only while no writer runs;
// go:norace keeps them from taking minutes under -race (they are not what
// -race is for).
//
//go:norace
func (c *Table) resolved(addr wire.Addr4) uint32 {
	e := c.tbl24[addr>>8]
	if isGroup(e) {
		e = c.groups.Load().entries[uint(e&valueMask)*groupLen+uint(addr&0xff)]
	}
	return e
}

// valueAt is the value the arrays give addr, default included.
//
//go:norace
func (c *Table) valueAt(addr wire.Addr4) uint32 {
	if e := c.resolved(wire.Addr4(addr)); e != 0 {
		return e & valueMask
	}
	return uint32(c.def.Load()) & valueMask
}

// diff compares two structures on every address: the default, the
// first-level entries 2^24 at a time, and all 256 addresses of every /24
// where either has a group. Values and prefix lengths must agree (group
// indices may differ). Returns the first difference.
//
//go:norace
func diff(a, b *Table) error {
	if da, db := uint32(a.def.Load()), uint32(b.def.Load()); da != db {
		return fmt.Errorf("default %d vs %d", da, db)
	}
	for i := uint32(0); i < tbl24Len; i++ {
		ea, eb := a.tbl24[i], b.tbl24[i]
		if !isGroup(ea) && !isGroup(eb) {
			if ea != eb {
				return fmt.Errorf("%v/24: (value %d, /%d) vs (value %d, /%d)",
					addrOf(wire.Addr4(i)<<8), ea&valueMask, depth(ea), eb&valueMask, depth(eb))
			}
			continue
		}
		for j := uint32(0); j < groupLen; j++ {
			addr := i<<8 | j
			if ra, rb := a.resolved(wire.Addr4(addr)), b.resolved(wire.Addr4(addr)); ra != rb {
				return fmt.Errorf("%v: (value %d, /%d) vs (value %d, /%d)",
					addrOf(wire.Addr4(addr)), ra&valueMask, depth(ra), rb&valueMask, depth(rb))
			}
		}
	}
	return nil
}

// checkInvariants checks the structure's own rules: plain first-level
// entries come from prefixes of /1../24; an extended entry names a live
// group (never index 0) tagged with its /24, which holds at least one entry
// longer than /24 (else it should have collapsed); group entries are plain
// or default; free groups are not live; the counts add up.
//
//go:norace
func checkInvariants(c *Table) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.groups.Load()
	owned := map[uint32]uint32{}
	for i := uint32(0); i < tbl24Len; i++ {
		e := c.tbl24[i]
		if e >= plainBit {
			if d := depth(e); d < 1 || d > 24 {
				return fmt.Errorf("tbl24[%v] plain with length /%d", addrOf(wire.Addr4(i)<<8), d)
			}
			continue
		}
		if e == 0 {
			continue
		}
		g := e & valueMask
		if g == 0 || g >= c.used || e > valueMask {
			return fmt.Errorf("tbl24[%v] = %#x: bad group (%d used)", addrOf(wire.Addr4(i)<<8), e, c.used)
		}
		if prev, dup := owned[g]; dup {
			return fmt.Errorf("group %d owned by %v and %v", g, addrOf(wire.Addr4(prev)<<8), addrOf(wire.Addr4(i)<<8))
		}
		owned[g] = i
		if tag := uint32(t.tags[g]); tag != tagLive|i {
			return fmt.Errorf("group %d of %v has tag %#x", g, addrOf(wire.Addr4(i)<<8), tag)
		}
		long := false
		for _, x := range t.entries[uint(g)*groupLen:][:groupLen] {
			if x != 0 && (x < plainBit || depth(x) < 1 || depth(x) > 32) {
				return fmt.Errorf("group %d holds bad entry %#x", g, x)
			}
			long = long || depth(x) > 24
		}
		if !long {
			return fmt.Errorf("group %d of %v has no prefix longer than /24", g, addrOf(wire.Addr4(i)<<8))
		}
	}
	for _, g := range c.free {
		if _, live := owned[g]; live || g == 0 {
			return fmt.Errorf("group %d is both free and live (or index 0)", g)
		}
		if uint32(t.tags[g]) != 0 {
			return fmt.Errorf("free group %d has tag %#x", g, t.tags[g])
		}
	}
	if 1+len(owned)+len(c.free) != int(c.used) {
		return fmt.Errorf("%d live + %d free groups, %d used", len(owned), len(c.free), c.used)
	}
	return nil
}
