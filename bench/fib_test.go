package bench

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/nexthop"
)

// go test -bench Lookup ./bench: the same cases as `netfwd-bench fib`.
func BenchmarkLookup(b *testing.B) {
	s, err := NewFIBSetup(0, 1<<20)
	if err != nil {
		b.Skip(err)
	}
	for _, kind := range []fib.TrieKind{fib.TrieFast, fib.TrieTable} {
		f, err := s.BuildFIB(kind)
		if err != nil {
			b.Fatal(err)
		}
		for name, lookup := range FIBCases(f, kind) {
			for _, probe := range []string{"hot", "random"} {
				ps := s.Random
				if probe == "hot" {
					ps = []netip.Addr{s.Hot}
				}
				body := lookupCase(lookup, ps)
				b.Run(name+"/"+kind.String()+"/"+probe, func(b *testing.B) {
					b.ReportAllocs()
					body(b.N)
				})
			}
		}
	}
}

// The suite runs end to end in quick mode and reports every impl and probe.
func TestFIBSuiteQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 100,000 routes")
	}
	recs, err := runFIB(Options{Quick: true, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range recs {
		key := r.Impl
		if p, ok := r.Params["probe"]; ok {
			key += "/" + p.(string)
		}
		if tr, ok := r.Params["trie"]; ok {
			key += "/" + tr.(string)
		}
		seen[key] = true
		if _, ok := r.Extra["vs_merged"]; r.Impl == "rules" && !ok {
			t.Errorf("%s %v: no vs_merged", key, r.Params)
		}
		if r.NsOp <= 0 {
			t.Errorf("%s: ns_op %v", key, r.NsOp)
		}
		if (r.Impl == "merged" || r.Impl == "rules") && r.AllocsOp != 0 {
			t.Errorf("%s allocates %.2f per lookup", key, r.AllocsOp)
		}
	}
	for _, k := range []string{"load/fast", "bart-fast-raw/random", "bart-table-raw/hot", "split/random/fast", "merged/random/fast", "merged/hot/table", "rules/random/fast", "rules/random/compiled"} {
		if !seen[k] {
			t.Errorf("no record for %s (have %v)", k, seen)
		}
	}
}

// Merged lookups agree with the raw trie holding the same effective values
// on every probe: the benchmark compares equal work.
func TestFIBCasesAgree(t *testing.T) {
	s, err := NewFIBSetup(50_000, 1<<14)
	if err != nil {
		t.Skip(err)
	}
	f, err := s.BuildFIB(fib.TrieFast)
	if err != nil {
		t.Fatal(err)
	}
	cases := FIBCases(f, fib.TrieFast)
	for _, a := range s.Random {
		want := cases["merged"](a)
		for name, lookup := range cases {
			if got := lookup(a); got != want {
				t.Fatalf("%s(%s) = %v, merged %v", name, a, got, want)
			}
		}
	}
}

// The compiled FIB answers exactly as the trie on the full table, for single
// and batch lookups, and after a burst of route changes.
func TestCompiledMatchesTrieFullTable(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the full table twice")
	}
	s, err := NewFIBSetup(0, 1<<18)
	if err != nil {
		t.Skip(err)
	}
	trie, err := s.BuildFIB(fib.TrieFast)
	if err != nil {
		t.Fatal(err)
	}
	comp, err := s.BuildCompiledFIB()
	if err != nil {
		t.Fatal(err)
	}
	check := func(stage string) {
		dsts := hostOrder(s.Random)
		out := make([]*nexthop.Nexthop, len(dsts))
		comp.LookupBatch4(dsts, out, make([]uint32, len(dsts)))
		// The keys by nexthop object (a few distinct ones): formatting one
		// per lookup was a third of the test's time under -race. Nothing
		// changes the FIBs during a check.
		keys := map[*nexthop.Nexthop]string{}
		key := func(nh *nexthop.Nexthop) string {
			k, ok := keys[nh]
			if !ok {
				k = nhKey(nh)
				keys[nh] = k
			}
			return k
		}
		bad := 0
		for i, a := range s.Random {
			want := trie.Lookup(a)
			if got := comp.Lookup(a); key(got) != key(want) || key(out[i]) != key(want) {
				bad++
				if bad < 5 {
					t.Errorf("%s: %s: compiled %v / batch %v, trie %v", stage, a, got, out[i], want)
				}
			}
		}
		if bad > 0 {
			t.Fatalf("%s: %d mismatches of %d", stage, bad, len(s.Random))
		}
	}
	check("loaded")
	// Delete every 7th route and add a few covering ones, in both.
	for _, f := range []*fib.FIB{trie, comp} {
		tx := f.Begin(len(s.Main) / 7)
		for i := 0; i < len(s.Main); i += 7 {
			if err := tx.DelRoute(fib.RouteSpec{Prefix: s.Main[i]}); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range []string{"0.0.0.0/0", "1.0.0.0/8", "100.64.0.0/10"} {
			if err := tx.AddRoute(fib.RouteSpec{Prefix: netip.MustParsePrefix(p), Type: fib.Blackhole, TypeSet: true}); err != nil {
				t.Fatal(err)
			}
		}
		tx.Commit()
	}
	check("changed")
}

// nhKey compares nexthops of two FIBs (different objects, same meaning).
func nhKey(nh *nexthop.Nexthop) string {
	if nh == nil {
		return "none"
	}
	return nh.String()
}

// TestMergedViewMatchesFIB: the suite's merged view (built from the FIB's
// API, since the FIB's merged trie is not part of it) holds what the FIB
// answers: the DIR-24-8 structure built from it gives every probe, and
// every interface address and its neighbours, the index of the nexthop the
// compiled FIB returns.
func TestMergedViewMatchesFIB(t *testing.T) {
	s, err := NewFIBSetup(50_000, 1<<14)
	if err != nil {
		t.Skip(err)
	}
	f, err := s.BuildCompiledFIB()
	if err != nil {
		t.Fatal(err)
	}
	table, err := compiledTable(f)
	if err != nil {
		t.Fatal(err)
	}
	probes := append([]netip.Addr(nil), s.Random...)
	for _, a := range s.Addrs {
		probes = append(probes, a.Addr(), a.Addr().Next(), a.Masked().Addr())
	}
	for _, a := range probes {
		want := uint32(0)
		if nh := f.Lookup(a); nh != nil {
			want = nh.Index
		}
		if got := table.Load().LookupAddr(a); got != want {
			t.Fatalf("%s: merged view's index %d, FIB's nexthop index %d", a, got, want)
		}
	}
}

// go test -bench LookupRules ./bench: the rules cases of `netfwd-bench
// fib` (fib_rules.go), LookupFlow with 0-100 rules on the full table,
// beside the merged lookups they are compared with.
func BenchmarkLookupRules(b *testing.B) {
	s, err := NewFIBSetup(0, 1<<20)
	if err != nil {
		b.Skip(err)
	}
	fast, err := s.BuildFIB(fib.TrieFast)
	if err != nil {
		b.Fatal(err)
	}
	comp, err := s.BuildCompiledFIB()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("merged/fast/random", func(b *testing.B) {
		b.ReportAllocs()
		lookupCase(fast.Lookup, s.Random)(b.N)
	})
	b.Run("compiled-nexthop/random", func(b *testing.B) {
		b.ReportAllocs()
		lookupCase(comp.Lookup, s.Random)(b.N)
	})
	cases, err := ruleCases(Options{Log: b.Logf}, s, fast, comp)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range cases {
		b.Run(fmt.Sprintf("rules=%d/%s/random", c.rules, c.trie), func(b *testing.B) {
			b.ReportAllocs()
			c.body(b.N)
		})
	}
}

// The rules cases measure what they claim: on a part of the table, every
// flow's LookupFlow answer is the reference walk's (`route get` with the
// same selectors), in both modes, without allocating; a custom rule decides
// 10-30 % of the flows; and the rule list is the one configured.
func TestRuleCasesAgree(t *testing.T) {
	s, err := NewFIBSetup(20_000, 1<<12)
	if err != nil {
		t.Skip(err)
	}
	for _, n := range ruleCounts[1:] {
		for _, compiled := range []bool{false, true} {
			var f *fib.FIB
			if compiled {
				f, err = s.BuildCompiledFIB()
			} else {
				f, err = s.BuildFIB(fib.TrieFast)
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := addRules(s, f, n); err != nil {
				t.Fatal(err)
			}
			if got := len(f.Rules()); got != n+3 {
				t.Fatalf("%d rules: the list has %d", n, got)
			}
			flows := ruleFlows(s, n)
			for i := range flows {
				k := &flows[i]
				res, _ := f.LookupRouteFlow(fib.FlowQuery{Dst: k.Dst.Netip(), Src: k.Src.Netip(), IIF: rulePorts[k.IIF-2], Mark: k.Mark})
				if got := f.LookupFlow(k); nhKey(got) != nhKey(res.NH) {
					t.Fatalf("%d rules, compiled %t: flow %+v: LookupFlow %v, reference %v (rule %+v)", n, compiled, *k, got, res.NH, res.Rule)
				}
			}
			m := ruleMatchFraction(f, flows)
			t.Logf("%d rules, compiled %t: a custom rule decides %.1f%% of the flows", n, compiled, 100*m)
			if m < 0.1 || m > 0.3 {
				t.Errorf("%d rules, compiled %t: a custom rule decides %.1f%% of the flows, want 10-30%%", n, compiled, 100*m)
			}
			body := flowCase(f, flows)
			if a := testing.AllocsPerRun(10, func() { body(1000) }); a != 0 {
				t.Errorf("%d rules, compiled %t: %v allocations per 1000 lookups", n, compiled, a)
			}
		}
	}
}
