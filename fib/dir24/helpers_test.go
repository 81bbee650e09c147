// Test helpers of the compiled FIB: the slow reference model, the full
// Internet table from the bart module's testdata, random probes, and an
// exhaustive comparison of two Compiled structures.

package fib

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"

	"github.com/netfwd/netfwd/internal/fulltable"
)

// cplModel is the reference: a plain map of prefixes, longest match by
// trying every length from /32 down. Slow, obviously right.
type cplModel map[netip.Prefix]uint32

func (m cplModel) lookup(addr uint32) uint32 {
	v, _, _ := m.match(addr, 32)
	return v
}

// match returns the longest prefix of length <= maxBits containing addr.
func (m cplModel) match(addr uint32, maxBits int) (uint32, netip.Prefix, bool) {
	a := cplAddr(addr)
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
func (m cplModel) parent(p netip.Prefix) (netip.Prefix, uint32, bool) {
	if p.Bits() == 0 {
		return netip.Prefix{}, 0, false
	}
	v, pp, ok := m.match(cplU32(p.Addr()), p.Bits()-1)
	return pp, v, ok
}

func cplAddr(a uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)})
}

func cplU32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// cplRange returns the first and last address of p.
func cplRange(p netip.Prefix) (uint32, uint32) {
	first := cplU32(p.Masked().Addr())
	return first, first | uint32(uint64(1)<<(32-p.Bits())-1)
}

// cplRoute is one (prefix, value) pair of a test table.
type cplRoute struct {
	p netip.Prefix
	v uint32
}

func cplSeq(routes []cplRoute) func(func(netip.Prefix, uint32) bool) {
	return func(yield func(netip.Prefix, uint32) bool) {
		for _, r := range routes {
			if !yield(r.p, r.v) {
				return
			}
		}
	}
}

// cplNexthops is how many distinct nexthop values the full table uses.
const cplNexthops = 4000

// cplValueFor gives a prefix a pseudo-random nexthop index in 1..cplNexthops.
func cplValueFor(p netip.Prefix) uint32 {
	x := uint64(cplU32(p.Addr()))<<8 | uint64(p.Bits())
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	return uint32(x%cplNexthops) + 1
}

var (
	cplFullOnce   sync.Once
	cplFullRoutes []cplRoute
	cplFullErr    error
)

// cplFullTable returns the 901,899 IPv4 prefixes of the bart module's
// testdata (the full Internet table), each with cplValueFor.
func cplFullTable(tb testing.TB) []cplRoute {
	tb.Helper()
	cplFullOnce.Do(func() { cplFullRoutes, cplFullErr = cplLoadFullTable() })
	if cplFullErr != nil {
		tb.Fatalf("full table: %v", cplFullErr)
	}
	return cplFullRoutes
}

func cplLoadFullTable() ([]cplRoute, error) {
	pfx, err := fulltable.Load()
	if err != nil {
		return nil, err
	}
	routes := make([]cplRoute, len(pfx))
	for i, p := range pfx {
		routes[i] = cplRoute{p, cplValueFor(p)}
	}
	return routes, nil
}

// cplProbes returns n addresses (n a power of two): half a random address
// inside a random prefix of routes, half uniformly random, interleaved at
// random, so consecutive probes hit unrelated cache lines and pages.
func cplProbes(routes []cplRoute, n int, seed uint64) []uint32 {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	probes := make([]uint32, n)
	for i := range probes {
		if rng.IntN(2) == 0 && len(routes) > 0 {
			first, last := cplRange(routes[rng.IntN(len(routes))].p)
			probes[i] = first + uint32(rng.Uint64N(uint64(last-first)+1))
		} else {
			probes[i] = rng.Uint32()
		}
	}
	return probes
}

// cplRoutedProbes returns n addresses, each random inside a random prefix of
// routes.
func cplRoutedProbes(routes []cplRoute, n int, seed uint64) []uint32 {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	probes := make([]uint32, n)
	for i := range probes {
		first, last := cplRange(routes[rng.IntN(len(routes))].p)
		probes[i] = first + uint32(rng.Uint64N(uint64(last-first)+1))
	}
	return probes
}

// cplResolved is the entry (plain, or 0 for default) a structure holds for
// addr, read directly from its arrays (not through Lookup), for exhaustive
// comparisons. The exhaustive helpers run only while no writer runs;
// go:norace keeps them from taking minutes under -race (they are not what
// -race is for).
//
//go:norace
func (c *Compiled) cplResolved(addr uint32) uint32 {
	e := c.tbl24[addr>>8]
	if cplIsGroup(e) {
		e = c.groups.Load().entries[uint(e&cplValueMask)*cplGroupLen+uint(addr&0xff)]
	}
	return e
}

// cplValueAt is the value the arrays give addr, default included.
//
//go:norace
func (c *Compiled) cplValueAt(addr uint32) uint32 {
	if e := c.cplResolved(addr); e != 0 {
		return e & cplValueMask
	}
	return uint32(c.def.Load()) & cplValueMask
}

// cplDiff compares two structures on every address: the default, the
// first-level entries 2^24 at a time, and all 256 addresses of every /24
// where either has a group. Values and prefix lengths must agree (group
// indices may differ). Returns the first difference.
//
//go:norace
func cplDiff(a, b *Compiled) error {
	if da, db := uint32(a.def.Load()), uint32(b.def.Load()); da != db {
		return fmt.Errorf("default %d vs %d", da, db)
	}
	for i := uint32(0); i < cplTbl24Len; i++ {
		ea, eb := a.tbl24[i], b.tbl24[i]
		if !cplIsGroup(ea) && !cplIsGroup(eb) {
			if ea != eb {
				return fmt.Errorf("%v/24: (value %d, /%d) vs (value %d, /%d)",
					cplAddr(i<<8), ea&cplValueMask, cplDepth(ea), eb&cplValueMask, cplDepth(eb))
			}
			continue
		}
		for j := uint32(0); j < cplGroupLen; j++ {
			addr := i<<8 | j
			if ra, rb := a.cplResolved(addr), b.cplResolved(addr); ra != rb {
				return fmt.Errorf("%v: (value %d, /%d) vs (value %d, /%d)",
					cplAddr(addr), ra&cplValueMask, cplDepth(ra), rb&cplValueMask, cplDepth(rb))
			}
		}
	}
	return nil
}

// cplCheckInvariants checks the structure's own rules: plain first-level
// entries come from prefixes of /1../24; an extended entry names a live
// group (never index 0) tagged with its /24, which holds at least one entry
// longer than /24 (else it should have collapsed); group entries are plain
// or default; free groups are not live; the counts add up.
//
//go:norace
func cplCheckInvariants(c *Compiled) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.groups.Load()
	owned := map[uint32]uint32{}
	for i := uint32(0); i < cplTbl24Len; i++ {
		e := c.tbl24[i]
		if e >= cplPlain {
			if d := cplDepth(e); d < 1 || d > 24 {
				return fmt.Errorf("tbl24[%v] plain with length /%d", cplAddr(i<<8), d)
			}
			continue
		}
		if e == 0 {
			continue
		}
		g := e & cplValueMask
		if g == 0 || g >= c.used || e > cplValueMask {
			return fmt.Errorf("tbl24[%v] = %#x: bad group (%d used)", cplAddr(i<<8), e, c.used)
		}
		if prev, dup := owned[g]; dup {
			return fmt.Errorf("group %d owned by %v and %v", g, cplAddr(prev<<8), cplAddr(i<<8))
		}
		owned[g] = i
		if tag := uint32(t.tags[g]); tag != cplTagLive|i {
			return fmt.Errorf("group %d of %v has tag %#x", g, cplAddr(i<<8), tag)
		}
		long := false
		for _, x := range t.entries[uint(g)*cplGroupLen:][:cplGroupLen] {
			if x != 0 && (x < cplPlain || cplDepth(x) < 1 || cplDepth(x) > 32) {
				return fmt.Errorf("group %d holds bad entry %#x", g, x)
			}
			long = long || cplDepth(x) > 24
		}
		if !long {
			return fmt.Errorf("group %d of %v has no prefix longer than /24", g, cplAddr(i<<8))
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
