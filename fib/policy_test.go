package fib

// The compiled rule walk (policy.go) against the reference walk
// (policy_slow.go) on random tables, rule lists and flows, in trie and
// compiled mode; and the default-rules fast path against both.

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/netfwd/netfwd/internal/race"
	"github.com/netfwd/netfwd/nexthop"
	"github.com/netfwd/netfwd/wire"
)

type policyGen struct {
	r *rand.Rand
}

func (g *policyGen) addr() netip.Addr {
	if g.r.IntN(4) == 0 {
		return netip.AddrFrom4([4]byte{198, 18 + byte(g.r.IntN(2)), byte(g.r.IntN(4)), byte(g.r.IntN(256))})
	}
	return netip.AddrFrom4([4]byte{10, byte(g.r.IntN(2)), byte(g.r.IntN(4)), byte(g.r.IntN(256))})
}

func (g *policyGen) prefix() netip.Prefix {
	lens := []int{0, 1, 8, 15, 16, 20, 22, 24, 24, 26, 28, 32}
	p, _ := g.addr().Prefix(lens[g.r.IntN(len(lens))])
	return p
}

func (g *policyGen) port() PortRange {
	if g.r.IntN(3) > 0 {
		return PortRange{}
	}
	lo := uint16(g.r.IntN(4)) * 100
	return PortRange{lo, lo + uint16(g.r.IntN(3))*50}
}

var (
	policyTables = []uint32{TableLocal, TableMain, TableDefault, 100, 200, 300}
	// routeTables: fewer routes in local, so that it does not answer most
	// lookups before any custom rule is reached.
	routeTables = []uint32{TableLocal, TableMain, TableMain, TableMain, TableDefault, 100, 200, 300, 100, 200, 300}
)

// populate gives f four up devices with addresses and random routes in
// several tables, and takes one device down (dead routes).
func (g *policyGen) populate(t *testing.T, f *FIB) {
	tx := f.Begin(0)
	for d := range 4 {
		dev := fmt.Sprintf("eth%d", d)
		if err := tx.SetLinkUp(dev, true); err != nil {
			t.Fatal(err)
		}
		if err := tx.AddAddress(dev, netip.MustParsePrefix(fmt.Sprintf("10.9.%d.1/24", d))); err != nil {
			t.Fatal(err)
		}
	}
	types := []Type{Unicast, Unicast, Unicast, Unicast, Local, Blackhole, Unreachable, Prohibit, Throw}
	for range 120 {
		p := g.prefix()
		for p.Bits() < 8 && g.r.IntN(3) > 0 {
			p = g.prefix() // fewer catch-alls
		}
		s := RouteSpec{Prefix: p, Type: types[g.r.IntN(len(types))], TypeSet: true,
			Table: routeTables[g.r.IntN(len(routeTables))], Metric: uint32(g.r.IntN(2)) * 10, MetricSet: true}
		d := g.r.IntN(4)
		switch s.Type {
		case Unicast:
			s.Dev = fmt.Sprintf("eth%d", d)
			if g.r.IntN(2) == 0 {
				s.Gateway = netip.AddrFrom4([4]byte{10, 9, byte(d), byte(2 + g.r.IntN(50))})
			}
		case Local:
			s.Dev = fmt.Sprintf("eth%d", d)
		}
		_ = tx.AddRoute(s) // duplicates and the like are refused: fine
	}
	tx.Commit()
	tx = f.Begin(0)
	if err := tx.SetLinkUp("eth3", false); err != nil {
		t.Fatal(err)
	}
	tx.Commit()
}

func (g *policyGen) rule() RuleSpec {
	s := RuleSpec{}
	s.SuppressPrefixLen = -1
	if g.r.IntN(3) > 0 {
		s.Priority, s.PrioritySet = uint32(1+g.r.IntN(40))*1000, true
		if g.r.IntN(8) == 0 {
			s.Priority = 32766 + uint32(g.r.IntN(2))
		}
	}
	s.Invert = g.r.IntN(8) == 0
	if g.r.IntN(2) == 0 {
		s.Src = g.prefix()
	}
	if g.r.IntN(3) == 0 {
		s.Dst = g.prefix()
	}
	devs := []string{"eth0", "eth1", "eth2", "lo"}
	if g.r.IntN(4) == 0 {
		s.IIF = devs[g.r.IntN(len(devs))]
	}
	if g.r.IntN(6) == 0 {
		s.OIF = devs[g.r.IntN(3)]
	}
	if g.r.IntN(5) == 0 {
		s.Mark, s.MarkSet = uint32(g.r.IntN(4)), true
		if g.r.IntN(2) == 0 {
			s.Mask, s.MaskSet = 0x3, true
		}
	}
	if g.r.IntN(6) == 0 {
		s.TOS = uint8(g.r.IntN(8)) << 2
	}
	if g.r.IntN(5) == 0 {
		s.IPProto = []uint8{1, 6, 17}[g.r.IntN(3)]
	}
	s.SPort, s.DPort = g.port(), g.port()
	switch k := g.r.IntN(20); {
	case k < 11:
		s.Action, s.ActionSet = RuleLookup, true
		s.Table, s.TableSet = policyTables[g.r.IntN(len(policyTables))], true
		if g.r.IntN(8) == 0 {
			s.Table = 400 // no such table
		}
		if g.r.IntN(2) == 0 {
			s.SuppressPrefixLen = []int{0, 8, 16, 24, 28, 32}[g.r.IntN(6)]
		}
	case k < 13:
		s.Action, s.ActionSet = RuleGoto, true
		s.Goto = s.Priority + uint32(1+g.r.IntN(4))*1000
	case k < 14:
		s.Action, s.ActionSet = RuleNop, true
	case k < 16:
		s.Action, s.ActionSet = RuleBlackhole, true
	case k < 18:
		s.Action, s.ActionSet = RuleUnreachable, true
	default:
		s.Action, s.ActionSet = RuleProhibit, true
	}
	return s
}

// rules installs a random rule list: the defaults, sometimes moved or
// removed, plus random rules.
func (g *policyGen) rules(t *testing.T, f *FIB, n int) {
	tx := f.Begin(0)
	if g.r.IntN(4) == 0 { // the VRF set-up: local moves behind the custom rules
		if err := tx.DelRule(RuleSpec{Rule: Rule{Priority: 0, SuppressPrefixLen: -1}, PrioritySet: true}); err != nil {
			t.Fatal(err)
		}
		s := RuleSpec{Rule: Rule{Priority: 32765, Table: TableLocal, SuppressPrefixLen: -1}, PrioritySet: true, TableSet: true}
		if err := tx.AddRule(s); err != nil {
			t.Fatal(err)
		}
	}
	if g.r.IntN(6) == 0 {
		_ = tx.DelRule(RuleSpec{Rule: Rule{Priority: 32766, SuppressPrefixLen: -1}, PrioritySet: true})
	}
	for range n {
		_ = tx.AddRule(g.rule())
	}
	tx.Commit()
}

func (g *policyGen) flow() Flow {
	k := Flow{Dst: wire.Addr4From(g.addr()), Src: wire.Addr4From(g.addr())}
	k.IIF = uint32(g.r.IntN(6)) // 0, lo, and the devices' indices
	if g.r.IntN(4) == 0 {
		k.OIF = uint32(g.r.IntN(6))
	}
	k.Mark = uint32(g.r.IntN(4))
	k.TOS = uint8(g.r.IntN(64)) << 2
	k.Proto = []uint8{1, 6, 17, 47}[g.r.IntN(4)]
	k.SPort, k.DPort = uint16(g.r.IntN(400)), uint16(g.r.IntN(400))
	return k
}

func TestRuleWalkMatchesReference(t *testing.T) {
	// One goroutine: the race detector has nothing to find here and makes
	// it ten times slower (118 s). Under -race a fifth of the seeds run;
	// CI runs all 40 again without it (.ci/run's no-race step).
	seeds := 40
	if race.Enabled {
		seeds = 8
	}
	for seed := range seeds {
		for _, compiled := range []bool{false, true} {
			g := &policyGen{r: rand.New(rand.NewPCG(uint64(seed), 7))}
			f := New(Options{Compiled: compiled})
			for _, d := range []string{"lo", "eth0", "eth1", "eth2", "eth3"} {
				f.DevIndex(d) // indices 1..5 in this order
			}
			g.populate(t, f)
			g.rules(t, f, []int{1, 3, 10, 30}[seed%4])
			s := f.cur.Load()
			if !s.rules.custom {
				continue // every random rule was refused: nothing to walk
			}
			for range 3000 {
				k := g.flow()
				got := f.LookupFlow(&k)
				d := walkSlow(s.rules.list, s.tables, &k, lookupFilter{}, f.DevIndex)
				want := d.answer(s.rules.list)
				if got != want {
					t.Fatalf("seed %d compiled %t: flow %+v: walk %v, reference %v (rule %d, route %v)\nrules: %+v",
						seed, compiled, k, got, want, d.rule, d.route, s.rules.list)
				}
			}
		}
	}
}

// TestDefaultRulesFastPath: without custom rules, Lookup, LookupBatch4 and
// LookupFlow are the merged lookup plus table default, and agree with the
// reference walk over the default rules.
func TestDefaultRulesFastPath(t *testing.T) {
	// Under -race (64 s for 20 seeds, nothing concurrent in it) a few
	// seeds; .ci/run runs all 20 in its step without -race.
	seeds := 20
	if race.Enabled {
		seeds = 3
	}
	for seed := range seeds {
		for _, compiled := range []bool{false, true} {
			g := &policyGen{r: rand.New(rand.NewPCG(uint64(seed), 9))}
			f := New(Options{Compiled: compiled})
			g.populate(t, f)
			s := f.cur.Load()
			if s.rules.custom {
				t.Fatal("a new FIB has custom rules")
			}
			dsts := make([]wire.Addr4, 256)
			for i := range dsts {
				dsts[i] = wire.Addr4From(g.addr())
			}
			out := make([]*nexthop.Nexthop, len(dsts))
			f.LookupBatch4(dsts, out, make([]uint32, len(dsts)))
			for i, d := range dsts {
				k := Flow{Dst: d}
				want := walkSlow(s.rules.list, s.tables, &k, lookupFilter{}, f.DevIndex).answer(s.rules.list)
				if got := f.Lookup(d.Netip()); got != want {
					t.Fatalf("seed %d compiled %t: Lookup(%v) = %v, reference %v", seed, compiled, d, got, want)
				}
				if out[i] != want {
					t.Fatalf("seed %d compiled %t: LookupBatch4(%v) = %v, reference %v", seed, compiled, d, out[i], want)
				}
				if got := f.LookupFlow(&k); got != want {
					t.Fatalf("seed %d compiled %t: LookupFlow(%v) = %v, reference %v", seed, compiled, d, got, want)
				}
			}
		}
	}
}

func TestRuleAddDelSemantics(t *testing.T) {
	f := New(Options{})
	add := func(s RuleSpec) error {
		tx := f.Begin(0)
		defer tx.Commit()
		if s.SuppressPrefixLen == 0 {
			s.SuppressPrefixLen = -1
		}
		return tx.AddRule(s)
	}
	// The default priority: the second rule's minus one.
	if err := add(RuleSpec{Rule: Rule{Src: netip.MustParsePrefix("10.1.0.0/16")}}); err != nil {
		t.Fatal(err)
	}
	if err := add(RuleSpec{Rule: Rule{Src: netip.MustParsePrefix("10.2.0.0/16")}}); err != nil {
		t.Fatal(err)
	}
	var prios []uint32
	for _, r := range f.Rules() {
		prios = append(prios, r.Priority)
	}
	if fmt.Sprint(prios) != "[0 32764 32765 32766 32767]" {
		t.Fatalf("priorities %v", prios)
	}
	if r := f.Rules()[2]; r.Table != TableMain || r.Action != RuleLookup {
		t.Fatalf("default action: %+v", r)
	}
	// The same rule again: File exists.
	err := add(RuleSpec{Rule: Rule{Priority: 32765, Src: netip.MustParsePrefix("10.1.0.0/16")}, PrioritySet: true})
	if err != ErrRuleExists {
		t.Fatalf("duplicate: %v", err)
	}
	// A backward goto is refused; a forward one to nobody is unresolved.
	if err := add(RuleSpec{Rule: Rule{Priority: 100, Action: RuleGoto, Goto: 50}, PrioritySet: true, ActionSet: true}); err == nil {
		t.Fatal("backward goto accepted")
	}
	if err := add(RuleSpec{Rule: Rule{Priority: 100, Action: RuleGoto, Goto: 150}, PrioritySet: true, ActionSet: true}); err != nil {
		t.Fatal(err)
	}
	rules := f.Rules()
	if !RuleUnresolved(rules, &rules[1]) {
		t.Fatalf("goto 150 resolved: %+v", rules)
	}
	// Delete by a partial spec: the first match.
	tx := f.Begin(0)
	if err := tx.DelRule(RuleSpec{Rule: Rule{Src: netip.MustParsePrefix("10.2.0.0/16"), SuppressPrefixLen: -1}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.DelRule(RuleSpec{Rule: Rule{Src: netip.MustParsePrefix("10.3.0.0/16"), SuppressPrefixLen: -1}}); err != ErrRuleNotFound {
		t.Fatalf("delete of nothing: %v", err)
	}
	tx.FlushRules()
	tx.Commit()
	if rules := f.Rules(); len(rules) != 1 || rules[0].Priority != 0 {
		t.Fatalf("after flush: %+v", rules)
	}
}

func TestLookupFlowAllocs(t *testing.T) {
	g := &policyGen{r: rand.New(rand.NewPCG(1, 1))}
	f := New(Options{})
	g.populate(t, f)
	g.rules(t, f, 100)
	flows := make([]Flow, 64)
	for i := range flows {
		flows[i] = g.flow()
	}
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		f.LookupFlow(&flows[i%len(flows)])
		i++
	}); n != 0 {
		t.Fatalf("%v allocations per LookupFlow", n)
	}
}

// TestLookupWithRulesAllocs: the flow-less lookups build their flow on the
// stack, with custom rules, in both modes.
func TestLookupWithRulesAllocs(t *testing.T) {
	for _, compiled := range []bool{false, true} {
		g := &policyGen{r: rand.New(rand.NewPCG(2, 2))}
		f := New(Options{Compiled: compiled})
		g.populate(t, f)
		g.rules(t, f, 10)
		dsts := make([]wire.Addr4, 64)
		for i := range dsts {
			dsts[i] = wire.Addr4From(g.addr())
		}
		out, idx := make([]*nexthop.Nexthop, len(dsts)), make([]uint32, len(dsts))
		if n := testing.AllocsPerRun(200, func() {
			f.LookupBatch4(dsts, out, idx)
			for _, d := range dsts {
				f.Lookup(d.Netip())
			}
		}); n != 0 {
			t.Fatalf("compiled %t: %v allocations", compiled, n)
		}
	}
}
