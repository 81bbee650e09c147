// Tests of the compiled FIB against the reference model (refModel), against
// its own bulk build, and against bart as an independent oracle on the full
// Internet table.

package dir24

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/gaissmai/bart"
	"github.com/netfwd/netfwd/internal/race"
	"github.com/netfwd/netfwd/wire"
)

// applyStep applies one change to both the structure and the model, the way
// the FIB writer does: Set, or Delete with the parent from the model.
func applyStep(t *testing.T, c *Table, m refModel, p netip.Prefix, v uint32, del bool) {
	t.Helper()
	if del {
		delete(m, p)
		pp, pv, ok := m.parent(p)
		if err := c.Delete(p, pp, pv, ok); err != nil {
			t.Fatalf("Delete(%v, %v, %d, %v): %v", p, pp, pv, ok, err)
		}
		return
	}
	m[p] = v
	if err := c.Set(p, v); err != nil {
		t.Fatalf("Set(%v, %d): %v", p, v, err)
	}
}

// checkAddrs compares Lookup, LookupAddr and LookupBatch with the model.
func checkAddrs(t *testing.T, c *Table, m refModel, addrs []wire.Addr4, what string) {
	t.Helper()
	out := make([]uint32, len(addrs))
	c.LookupBatch(addrs, out)
	for i, a := range addrs {
		want := m.lookup(a)
		if got := c.Lookup(a); got != want {
			t.Fatalf("%s: Lookup(%v) = %d, model %d", what, addrOf(a), got, want)
		}
		if got := c.LookupAddr(addrOf(a)); got != want {
			t.Fatalf("%s: LookupAddr(%v) = %d, model %d", what, addrOf(a), got, want)
		}
		if out[i] != want {
			t.Fatalf("%s: LookupBatch[%d] (%v) = %d, model %d", what, i, addrOf(a), out[i], want)
		}
	}
}

// edgeAddrs are the addresses around a prefix: one before, first, second,
// middle, last, one after.
func edgeAddrs(p netip.Prefix) []wire.Addr4 {
	first, last := prefixRange(p)
	return []wire.Addr4{first - 1, first, first + 1, first + (last-first)/2, last, last + 1}
}

func TestEmpty(t *testing.T) {
	c := New()
	if off := unsafe.Offsetof(c.tbl24); off%8 != 0 {
		t.Fatalf("tbl24 at offset %d: pair stores need 8-byte alignment", off)
	}
	checkAddrs(t, c, refModel{}, []wire.Addr4{0, 1, 0x0a000001, 0xffffffff}, "empty")
	if got := c.LookupAddr(netip.MustParseAddr("2001:db8::1")); got != 0 {
		t.Fatalf("IPv6 lookup = %d, want 0", got)
	}
	s := c.Stats()
	if s.Tbl24Bytes != 64<<20 || s.Groups != 0 || s.Bytes() < 64<<20 {
		t.Fatalf("stats of empty: %+v", s)
	}
}

// TestCases walks through hand-picked cases with the expected
// answers written out, so a wrong model cannot hide a wrong structure.
func TestCases(t *testing.T) {
	c := New()
	a := func(s string) wire.Addr4 { return u32(netip.MustParseAddr(s)) }
	pf := netip.MustParsePrefix
	want := func(step string, cases map[string]uint32) {
		t.Helper()
		for addr, v := range cases {
			if got := c.Lookup(a(addr)); got != v {
				t.Fatalf("%s: Lookup(%s) = %d, want %d", step, addr, got, v)
			}
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Set(pf("0.0.0.0/0"), 1))
	must(c.Set(pf("10.0.0.0/8"), 2))
	must(c.Set(pf("10.1.2.0/24"), 3))
	must(c.Set(pf("10.1.2.128/25"), 4))
	must(c.Set(pf("10.1.2.200/32"), 5))
	must(c.Set(pf("10.1.2.192/26"), 0)) // present, value 0: hides the /25
	want("built", map[string]uint32{
		"9.255.255.255": 1, "10.0.0.0": 2, "10.1.1.255": 2, "10.1.2.0": 3, "10.1.2.127": 3,
		"10.1.2.128": 4, "10.1.2.191": 4, "10.1.2.192": 0, "10.1.2.200": 5, "10.1.2.201": 0,
		"10.1.2.255": 0, "10.1.3.0": 2, "10.255.255.255": 2, "11.0.0.0": 1, "255.255.255.255": 1,
	})
	if s := c.Stats(); s.Groups != 1 {
		t.Fatalf("groups = %d, want 1", s.Groups)
	}
	// Replacing the /8 changes only what the /8 itself answers.
	must(c.Set(pf("10.0.0.0/8"), 6))
	want("/8 replaced", map[string]uint32{"10.0.0.0": 6, "10.1.2.0": 3, "10.1.2.128": 4, "10.1.3.0": 6})
	// Deleting the /24 under the group: the /8 shows through in the group.
	must(c.Delete(pf("10.1.2.0/24"), pf("10.0.0.0/8"), 6, true))
	want("/24 deleted", map[string]uint32{"10.1.2.0": 6, "10.1.2.127": 6, "10.1.2.128": 4, "10.1.2.200": 5})
	// Delete the long prefixes: the group collapses into a plain /8 entry.
	must(c.Delete(pf("10.1.2.200/32"), pf("10.1.2.192/26"), 0, true))
	must(c.Delete(pf("10.1.2.192/26"), pf("10.1.2.128/25"), 4, true))
	want("/32 and /26 deleted", map[string]uint32{"10.1.2.200": 4, "10.1.2.192": 4, "10.1.2.0": 6})
	must(c.Delete(pf("10.1.2.128/25"), pf("10.0.0.0/8"), 6, true))
	want("/25 deleted", map[string]uint32{"10.1.2.200": 6, "10.1.2.0": 6})
	if s := c.Stats(); s.Groups != 0 || s.FreeGroups != 1 {
		t.Fatalf("after collapse: %+v", s)
	}
	// Deleting an absent prefix changes nothing.
	must(c.Delete(pf("10.9.0.0/16"), pf("10.0.0.0/8"), 6, true))
	want("absent deleted", map[string]uint32{"10.9.0.1": 6})
	// The default route and the /8 go: back to empty, every entry zero.
	must(c.Delete(pf("10.0.0.0/8"), pf("0.0.0.0/0"), 1, true))
	want("/8 deleted", map[string]uint32{"10.1.2.3": 1})
	must(c.Delete(pf("0.0.0.0/0"), netip.Prefix{}, 0, false))
	want("empty again", map[string]uint32{"10.1.2.3": 0, "0.0.0.0": 0, "255.255.255.255": 0})
	if err := diff(c, New()); err != nil {
		t.Fatalf("not empty after deleting everything: %v", err)
	}
	// /32 at both ends of the address space, and a /1 over them.
	must(c.Set(pf("0.0.0.0/32"), 7))
	must(c.Set(pf("255.255.255.255/32"), 8))
	must(c.Set(pf("128.0.0.0/1"), 9))
	want("ends", map[string]uint32{"0.0.0.0": 7, "0.0.0.1": 0, "255.255.255.255": 8, "255.255.255.254": 9, "128.0.0.0": 9, "127.255.255.255": 0})
	must(c.Set(pf("0.0.0.0/32"), MaxValue))
	want("max value", map[string]uint32{"0.0.0.0": MaxValue})
}

func TestErrors(t *testing.T) {
	c := New()
	pf := netip.MustParsePrefix
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"ipv6 set", c.Set(pf("2001:db8::/32"), 1), ErrNotIPv4},
		{"invalid set", c.Set(netip.Prefix{}, 1), ErrNotIPv4},
		{"value too large", c.Set(pf("10.0.0.0/8"), MaxValue+1), ErrValue},
		{"ipv6 delete", c.Delete(pf("2001:db8::/32"), netip.Prefix{}, 0, false), ErrNotIPv4},
		{"parent longer", c.Delete(pf("10.0.0.0/8"), pf("10.0.0.0/16"), 1, true), ErrParent},
		{"parent equal", c.Delete(pf("10.0.0.0/8"), pf("10.0.0.0/8"), 1, true), ErrParent},
		{"parent disjoint", c.Delete(pf("10.0.0.0/16"), pf("11.0.0.0/8"), 1, true), ErrParent},
		{"parent ipv6", c.Delete(pf("10.0.0.0/16"), pf("::/0"), 1, true), ErrNotIPv4},
		{"parent value", c.Delete(pf("10.0.0.0/16"), pf("10.0.0.0/8"), MaxValue+1, true), ErrValue},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if _, err := Build(seq([]testRoute{{pf("::/0"), 1}})); !errors.Is(err, ErrNotIPv4) {
		t.Errorf("Build(IPv6): %v", err)
	}
	if _, err := Build(seq([]testRoute{{pf("1.0.0.0/8"), 1 << 24}})); !errors.Is(err, ErrValue) {
		t.Errorf("Build(value 2^24): %v", err)
	}
	// Nothing of the failed calls went in.
	if err := diff(c, New()); err != nil {
		t.Fatalf("failed calls changed the structure: %v", err)
	}
	// An unmasked prefix is taken as its masked form.
	if err := c.Set(pf("10.1.2.3/8"), 5); err != nil {
		t.Fatal(err)
	}
	if got := c.Lookup(u32(netip.MustParseAddr("10.200.0.1"))); got != 5 {
		t.Fatalf("unmasked prefix: got %d", got)
	}
}

// windowPrefix is where the random tests put most prefixes, so that nesting
// and overlap are dense; hot24s get many /25-/32s each.
var (
	windowPrefix   = netip.MustParsePrefix("10.20.0.0/16")
	hot24s         = []netip.Prefix{netip.MustParsePrefix("10.20.7.0/24"), netip.MustParsePrefix("10.20.8.0/24"), netip.MustParsePrefix("10.20.255.0/24")}
	cornerPrefixes = []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("0.0.0.0/32"),
		netip.MustParsePrefix("255.255.255.255/32"), netip.MustParsePrefix("0.0.0.0/24"),
		netip.MustParsePrefix("255.255.255.0/24"), netip.MustParsePrefix("255.255.255.0/25"),
		netip.MustParsePrefix("128.0.0.0/1"), netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("10.20.0.0/24"),
	}
)

// randPrefix draws a prefix: corners, short prefixes over the window,
// /16-/24 inside it, /25-/32 in the hot /24s or anywhere in the window, or
// anything anywhere. Under -race nothing in /1../7 (a /1 rewrites 2^23
// entries, minutes of race bookkeeping; TestCases covers them).
func randPrefix(rng *rand.Rand) netip.Prefix {
	p := randPrefixAny(rng)
	if race.Enabled && p.Bits() > 0 && p.Bits() < 8 {
		p = netip.PrefixFrom(p.Addr(), 8).Masked()
	}
	return p
}

func randPrefixAny(rng *rand.Rand) netip.Prefix {
	base := u32(windowPrefix.Addr())
	var addr wire.Addr4
	var bits int
	switch rng.IntN(12) {
	case 0:
		if rng.IntN(2) == 0 {
			return cornerPrefixes[rng.IntN(len(cornerPrefixes))]
		}
		return hot24s[rng.IntN(len(hot24s))]
	case 1: // a /0../7 rewrites up to 2^24 entries: keep them rare
		bits, addr = 8+rng.IntN(8), base
		if rng.IntN(8) == 0 {
			bits = rng.IntN(8)
		}
	case 2, 3, 4:
		bits, addr = 16+rng.IntN(9), base|wire.Addr4(rng.Uint32N(1<<16))
	case 5, 6, 7:
		h := hot24s[rng.IntN(len(hot24s))]
		bits, addr = 25+rng.IntN(8), u32(h.Addr())|wire.Addr4(rng.Uint32N(256))
	case 8, 9:
		bits, addr = 25+rng.IntN(8), base|wire.Addr4(rng.Uint32N(1<<16))
	default:
		bits, addr = 8+rng.IntN(25), wire.Addr4(rng.Uint32())
	}
	return netip.PrefixFrom(addrOf(addr), bits).Masked()
}

// randValue favours small values, and draws 0 and the maximum sometimes.
func randValue(rng *rand.Rand) uint32 {
	switch rng.IntN(10) {
	case 0:
		return 0
	case 1:
		return MaxValue
	case 2:
		return rng.Uint32N(MaxValue + 1)
	default:
		return 1 + rng.Uint32N(50)
	}
}

// TestRandom applies random changes (inserts, value changes,
// deletes of present and absent prefixes) and after each one compares the
// addresses around the changed prefix, and periodically the edges of every
// prefix, with the model. At the end of each round the structure must equal
// a bulk build of the model on every address and satisfy its invariants;
// then everything is deleted and it must be empty again.
func TestRandom(t *testing.T) {
	rounds, ops := 6, 1500
	switch {
	case race.Enabled:
		rounds, ops = 2, 1000
	case testing.Short():
		rounds, ops = 2, 500
	}
	for round := range rounds {
		rng := rand.New(rand.NewPCG(uint64(round), 42))
		c := newTable(1 + round%3) // small second level: growth happens
		m := refModel{}
		var seen []netip.Prefix
		randAddrs := func(n int) []wire.Addr4 {
			out := make([]wire.Addr4, 0, n)
			for range n {
				if rng.IntN(4) == 0 {
					out = append(out, wire.Addr4(rng.Uint32()))
				} else {
					out = append(out, u32(windowPrefix.Addr())|wire.Addr4(rng.Uint32N(1<<16)))
				}
			}
			return out
		}
		for op := range ops {
			var p netip.Prefix
			del := false
			switch r := rng.IntN(10); {
			case r < 5 || len(m) == 0: // insert (or overwrite)
				p = randPrefix(rng)
			case r < 7: // change the value of a present prefix
				p = seen[rng.IntN(len(seen))]
				if _, ok := m[p]; !ok {
					p = randPrefix(rng)
				}
			case r < 9: // delete a present prefix
				for _, q := range seen {
					if _, ok := m[q]; ok && rng.IntN(3) == 0 {
						p = q
						break
					}
				}
				if !p.IsValid() {
					p = seen[rng.IntN(len(seen))]
				}
				del = true
			default: // delete a prefix that may well be absent
				p, del = randPrefix(rng), true
			}
			seen = append(seen, p)
			applyStep(t, c, m, p, randValue(rng), del)
			addrs := append(edgeAddrs(p), randAddrs(16)...)
			checkAddrs(t, c, m, addrs, "after change")
			if op%100 == 99 {
				var all []wire.Addr4
				for q := range m {
					all = append(all, edgeAddrs(q)...)
				}
				checkAddrs(t, c, m, all, "edges of all prefixes")
			}
		}
		built, err := Build(func(yield func(netip.Prefix, uint32) bool) {
			for p, v := range m {
				if !yield(p, v) {
					return
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := diff(c, built); err != nil {
			t.Fatalf("round %d: incremental vs built: %v", round, err)
		}
		if err := checkInvariants(c); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if err := checkInvariants(built); err != nil {
			t.Fatalf("round %d: built: %v", round, err)
		}
		// Back to empty, in random order.
		left := make([]netip.Prefix, 0, len(m))
		for p := range m {
			left = append(left, p)
		}
		slices.SortFunc(left, func(a, b netip.Prefix) int { return a.Compare(b) })
		rng.Shuffle(len(left), func(i, j int) { left[i], left[j] = left[j], left[i] })
		for i, p := range left {
			applyStep(t, c, m, p, 0, true)
			if i%10 == 0 {
				checkAddrs(t, c, m, append(edgeAddrs(p), randAddrs(8)...), "emptying")
			}
		}
		if err := diff(c, New()); err != nil {
			t.Fatalf("round %d: not empty after deleting everything: %v", round, err)
		}
		if s := c.Stats(); s.Groups != 0 {
			t.Fatalf("round %d: %d groups live after deleting everything", round, s.Groups)
		}
		if err := checkInvariants(c); err != nil {
			t.Fatalf("round %d: empty: %v", round, err)
		}
	}
}

// TestTransactionParents: the FIB publishes a transaction as its
// list of merged-trie changes plus a Parent function over the *new* version
// (fib.Commit), so a delete early in a transaction gets the parent of the
// final state, not of the state right after that delete. Replaying a random
// multi-change transaction that way must still end exactly at the final
// state on every address.
func TestTransactionParents(t *testing.T) {
	txns, maxOps := 300, 12
	if testing.Short() || race.Enabled {
		txns = 60
	}
	rng := rand.New(rand.NewPCG(11, 12))
	c := New()
	m := refModel{}
	for n := range txns {
		type change struct {
			p   netip.Prefix
			v   uint32
			del bool
		}
		var log []change
		for range 1 + rng.IntN(maxOps) {
			p := randPrefix(rng)
			if _, ok := m[p]; ok && rng.IntN(2) == 0 {
				delete(m, p)
				log = append(log, change{p: p, del: true})
				continue
			}
			v := randValue(rng)
			m[p] = v
			log = append(log, change{p: p, v: v})
		}
		for _, ch := range log {
			var err error
			if ch.del {
				pp, pv, ok := m.parent(ch.p) // the final state's parent
				err = c.Delete(ch.p, pp, pv, ok)
			} else {
				err = c.Set(ch.p, ch.v)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		var addrs []wire.Addr4
		for _, ch := range log {
			addrs = append(addrs, edgeAddrs(ch.p)...)
		}
		checkAddrs(t, c, m, addrs, fmt.Sprintf("transaction %d", n))
		if n%20 == 19 {
			built, err := Build(func(yield func(netip.Prefix, uint32) bool) {
				for p, v := range m {
					if !yield(p, v) {
						return
					}
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := diff(c, built); err != nil {
				t.Fatalf("transaction %d: replay vs build: %v", n, err)
			}
			if err := checkInvariants(c); err != nil {
				t.Fatalf("transaction %d: %v", n, err)
			}
		}
	}
}

// TestGracePeriod replays the hazard the group tags exist for: a
// reader loads an extended tbl24 entry, the writer collapses that /24 and
// hands its group to another /24, and the reader then reads the group.
// Without the tag check it would answer the other /24's value.
func TestGracePeriod(t *testing.T) {
	c := New()
	pf := netip.MustParsePrefix
	addr := u32(netip.MustParseAddr("10.0.1.200"))
	if err := c.Set(pf("10.0.1.0/25"), 1); err != nil {
		t.Fatal(err)
	}
	stale := c.tbl24[addr>>8] // the reader's first load
	if !isGroup(stale) {
		t.Fatal("10.0.1.0/24 has no group")
	}
	// The writer: delete the /25 (group freed), then give 10.0.2.0/24 a
	// group; LIFO reuse hands it the same one.
	if err := c.Delete(pf("10.0.1.0/25"), netip.Prefix{}, 0, false); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(pf("10.0.2.0/24"), 7); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(pf("10.0.2.128/25"), 9); err != nil {
		t.Fatal(err)
	}
	reused := c.tbl24[u32(netip.MustParseAddr("10.0.2.0"))>>8]
	if reused != stale {
		t.Fatalf("group not reused (%#x vs %#x): scenario not reproduced", reused, stale)
	}
	// The reader resumes with its stale entry.
	tbl := c.groups.Load()
	if naive := tbl.entries[uint(stale&valueMask)*groupLen+uint(addr&0xff)] & valueMask; naive != 9 {
		t.Fatalf("unchecked read gives %d, expected the other /24's 9", naive)
	}
	if v, ok := tbl.read(stale, addr); ok {
		t.Fatalf("stale group read accepted, value %d", v&valueMask)
	}
	// Retrying from the first level gives the right answer.
	if got := c.lookupSlow(addr); got != 0 {
		t.Fatalf("lookupSlow after reuse = %d, want 0", got)
	}
	if got := c.Lookup(addr); got != 0 {
		t.Fatalf("Lookup = %d, want 0", got)
	}
	// A table that grew: the old copy still answers as of the swap, the
	// new one has everything.
	old := c.groups.Load()
	for i := range 200 { // more /24s with groups than the initial capacity
		p := netip.PrefixFrom(addrOf(0x0b000000|wire.Addr4(i)<<8|0x80), 25)
		if err := c.Set(p, uint32(100+i)); err != nil {
			t.Fatal(err)
		}
	}
	if c.groups.Load() == old {
		t.Fatal("second level did not grow")
	}
	if v, ok := old.read(reused, u32(netip.MustParseAddr("10.0.2.130"))); !ok || v&valueMask != 9 {
		t.Fatalf("old table after growth: %d %v, want 9 true", v&valueMask, ok)
	}
	if err := checkInvariants(c); err != nil {
		t.Fatal(err)
	}
}

// TestFullTable checks the full Internet table: the bulk build
// against bart on random probes and on the edges of every prefix; Set of
// every prefix in random order equals the build on every address; deleting
// a random half (parents from a bart trie, as the FIB writer would get them)
// equals a build of the other half.
func TestFullTable(t *testing.T) {
	if testing.Short() {
		t.Skip("full table: slow in -short")
	}
	routes := fullTable(t)
	built, err := Build(seq(routes))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkInvariants(built); err != nil {
		t.Fatal(err)
	}
	oracle := new(bart.Table[uint32])
	for _, r := range routes {
		oracle.Insert(r.p, r.v)
	}
	nProbes, every := 1<<20, 4
	if race.Enabled {
		nProbes, every = 1<<16, 64
	}
	probes := probeAddrs(routes, nProbes, 1)
	for i, r := range routes {
		if i%every == 0 || r.p.Bits() > 24 {
			probes = append(probes, edgeAddrs(r.p)...)
		}
	}
	checkOracle(t, built, oracle, probes, "built")
	if race.Enabled {
		return // the incremental part below runs without -race
	}

	rng := rand.New(rand.NewPCG(7, 7))
	shuffled := slices.Clone(routes)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	inc := New()
	for _, r := range shuffled {
		if err := inc.Set(r.p, r.v); err != nil {
			t.Fatal(err)
		}
	}
	if err := diff(inc, built); err != nil {
		t.Fatalf("Set in random order vs build: %v", err)
	}

	half := shuffled[:len(shuffled)/2]
	for _, r := range half {
		oracle.Delete(r.p)
		pp, pv, ok := oracle.LookupPrefixLPM(r.p)
		if err := inc.Delete(r.p, pp, pv, ok); err != nil {
			t.Fatal(err)
		}
	}
	rest, err := Build(seq(shuffled[len(shuffled)/2:]))
	if err != nil {
		t.Fatal(err)
	}
	if err := diff(inc, rest); err != nil {
		t.Fatalf("after deleting half: %v", err)
	}
	if err := checkInvariants(inc); err != nil {
		t.Fatal(err)
	}
	checkOracle(t, inc, oracle, probes[:1<<18], "half deleted")
	runtime.KeepAlive(built)
}

func checkOracle(t *testing.T, c *Table, oracle *bart.Table[uint32], probes []wire.Addr4, what string) {
	t.Helper()
	out := make([]uint32, 256)
	for start := 0; start < len(probes); start += len(out) {
		batch := probes[start:min(start+len(out), len(probes))]
		c.LookupBatch(batch, out)
		for i, a := range batch {
			want, _ := oracle.Lookup(addrOf(a))
			if got := c.Lookup(a); got != want || out[i] != want {
				t.Fatalf("%s: %v: Lookup %d, LookupBatch %d, bart %d", what, addrOf(a), got, out[i], want)
			}
		}
	}
}

// TestAllocs: lookups allocate nothing.
func TestAllocs(t *testing.T) {
	c := New()
	for i, p := range []string{"10.0.0.0/8", "10.20.0.0/16", "10.20.0.128/25", "255.255.255.255/32"} {
		if err := c.Set(netip.MustParsePrefix(p), uint32(i+96)); err != nil {
			t.Fatal(err)
		}
	}
	addrs := []wire.Addr4{0, 0x0a140001, 0x0a140081, 0xffffffff}
	out := make([]uint32, len(addrs))
	a6 := netip.MustParseAddr("10.20.0.129")
	var sink uint32
	for name, f := range map[string]func(){
		"Lookup":      func() { sink += c.Lookup(addrs[2]) },
		"LookupAddr":  func() { sink += c.LookupAddr(a6) },
		"LookupBatch": func() { c.LookupBatch(addrs, out) },
	} {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocs per run", name, n)
		}
	}
	runtime.KeepAlive(sink)
}

// TestLookupInlines: Lookup sits at the inliner's budget; a change
// that pushes it over costs a call per packet. Asks the compiler.
func TestLookupInlines(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the compiler")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool")
	}
	out, err := exec.Command(gobin, "build", "-gcflags=-m", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "can inline (*Table).Lookup\n") {
		t.Fatalf("(*Table).Lookup is not inlinable:\n%s", out)
	}
}
