package bench

// The policy routing part of suite fib (issue 29): what a lookup costs with
// custom `ip rule`s, measured in the same interleaved rounds as merged and
// compiled-nexthop, as impl "rules" with params rules (0, 1, 10, 100),
// probe random and trie fast (the merged trie) or compiled (DIR-24-8).
//
// Each case is the suite's full-table FIB plus N rules added with
// Txn.AddRule (ruleSpecs: mostly `from 10.K.0.0/16 lookup 100+K`, every
// tenth an `iif`, a `to` or a `fwmark` rule), each rule's table holding a
// handful of routes and a default route, probed through FIB.LookupFlow with
// flow keys (ruleFlows) whose destinations are the suite's random probes,
// whose sources put about a fifth of them under a rule, and whose input
// interface is one of four ports. Rules 0 is LookupFlow on the merged FIB
// itself (Linux's default rules: the fast path). Each record's extra has
// the ratio to the same run's merged (fast) or compiled-nexthop (compiled)
// random lookup, vs_merged, and the fraction of flows a custom rule
// decided, match_fraction.
//
// Locking: none; set-up and measurement run in the suite's goroutine.

import (
	"fmt"
	"math/rand/v2"
	"net/netip"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/wire"
)

// ruleCounts are the rule counts the suite measures (0: default rules).
var ruleCounts = []int{0, 1, 10, 100}

// rulePorts are the input interfaces of the flows (eth0..eth3 of the
// setup, which have addresses); iif rules name them too.
var rulePorts = []string{"eth0", "eth1", "eth2", "eth3"}

// ruleTable is the table rule k looks up.
func ruleTable(k int) uint32 { return 100 + uint32(k) }

// ruleMark is the fwmark of rule k (when it is a fwmark rule).
func ruleMark(k int) uint32 { return 0x100 + uint32(k) }

// ruleSpecs returns n rules as a policy-routing router would have them,
// priorities 100+k in order: rule k is
//
//	k%10 == 3:  from 10.k.0.0/16 iif eth(k%4) lookup 100+k
//	k%10 == 7:  to D/16 lookup 100+k (D: one of the probes' /16s)
//	k%10 == 9:  fwmark 0x100+k lookup 100+k
//	otherwise:  from 10.k.0.0/16 lookup 100+k
func ruleSpecs(s *FIBSetup, n int) []fib.RuleSpec {
	specs := make([]fib.RuleSpec, n)
	for k := range n {
		r := fib.Rule{Priority: 100 + uint32(k), Table: ruleTable(k), SuppressPrefixLen: -1}
		from := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(k), 0, 0}), 16)
		spec := fib.RuleSpec{PrioritySet: true, TableSet: true}
		switch k % 10 {
		case 3:
			r.Src, r.IIF = from, rulePorts[k%len(rulePorts)]
		case 7:
			d := s.Random[(k*7919)%len(s.Random)]
			r.Dst = netip.PrefixFrom(d, 16).Masked()
		case 9:
			r.Mark, r.Mask = ruleMark(k), 0xffffffff
			spec.MarkSet, spec.MaskSet = true, true
		default:
			r.Src = from
		}
		spec.Rule = r
		specs[k] = spec
	}
	return specs
}

// ruleRoutes are the routes of rule k's table: a default route and a few
// more specific ones, through the setup's gateway subnet (eth0).
func ruleRoutes(k int) []fib.RouteSpec {
	gw := netip.AddrFrom4([4]byte{192, 0, 2, byte(2 + k%250)})
	t := ruleTable(k)
	return []fib.RouteSpec{
		{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Table: t, Gateway: gw, Dev: "eth0"},
		{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(k), 0, 0}), 16), Table: t, Dev: rulePorts[1+k%3]},
		{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(k), 0}), 24), Table: t, Gateway: gw, Dev: "eth0"},
		{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{100, 64, byte(k), 0}), 24), Table: t, Gateway: gw, Dev: "eth0"},
		{Prefix: netip.MustParsePrefix("203.0.113.0/24"), Table: t, Type: fib.Blackhole, TypeSet: true},
	}
}

// addRules adds ruleSpecs(s, n) and their tables' routes to f in one
// transaction, after naming the ports in rulePorts' order so that every
// FIB gives them the same indices (ruleFlows' IIF).
func addRules(s *FIBSetup, f *fib.FIB, n int) error {
	for i, name := range rulePorts {
		if got, want := f.DevIndex(name), uint32(i+2); got != want {
			return fmt.Errorf("rules: %s has index %d, the flows use %d", name, got, want)
		}
	}
	tx := f.Begin(n * 5)
	for k, spec := range ruleSpecs(s, n) {
		for _, r := range ruleRoutes(k) {
			if err := tx.AddRoute(r); err != nil {
				tx.Abort()
				return fmt.Errorf("table %d: %s: %w", r.Table, r.Prefix, err)
			}
		}
		if err := tx.AddRule(spec); err != nil {
			tx.Abort()
			return fmt.Errorf("rule %d: %w", k, err)
		}
	}
	tx.Commit()
	return nil
}

// ruleFlows makes one flow per probe for n rules: destination the probe;
// source in 10.k.0.0/16 of a random rule k < n for a fifth of them (the
// traffic of the customers the rules route), else another probe (public
// space no rule selects); input interface one of rulePorts (indices 2-5,
// as addRules checks); fwmark 0x100+k for one in twenty (a fwmark rule's
// where k%10 == 9).
func ruleFlows(s *FIBSetup, n int) []fib.Flow {
	r := rand.New(rand.NewPCG(29, uint64(n)))
	flows := make([]fib.Flow, len(s.Random))
	for i, a := range s.Random {
		k := &flows[i]
		k.Dst = wire.Addr4From(a)
		k.Src = wire.Addr4From(s.Random[(i*7+len(s.Random)/3)%len(s.Random)])
		if n > 0 && r.IntN(5) == 0 {
			k.Src = wire.Addr4From(netip.AddrFrom4([4]byte{10, byte(r.IntN(n)), byte(r.IntN(256)), byte(r.IntN(256))}))
		}
		k.IIF = uint32(2 + r.IntN(len(rulePorts)))
		if n > 0 && r.IntN(20) == 0 {
			k.Mark = ruleMark(r.IntN(n))
		}
	}
	return flows
}

// ruleMatchFraction is the fraction of flows (a sample) that a custom rule
// decides, by the reference walk behind `route get`.
func ruleMatchFraction(f *fib.FIB, flows []fib.Flow) float64 {
	const sample = 4096
	step := max(len(flows)/sample, 1)
	hit, seen := 0, 0
	for i := 0; i < len(flows); i += step {
		k := &flows[i]
		res, _ := f.LookupRouteFlow(fib.FlowQuery{Dst: k.Dst.Netip(), Src: k.Src.Netip(),
			IIF: rulePorts[k.IIF-2], Mark: k.Mark})
		seen++
		if res.RuleSet && res.Rule.Priority >= 100 && res.Rule.Priority < 32766 {
			hit++
		}
	}
	return float64(hit) / float64(seen)
}

// flowCase measures LookupFlow over flows (a power-of-two count).
func flowCase(f *fib.FIB, flows []fib.Flow) func(n int) {
	mask := len(flows) - 1
	return func(n int) {
		for i := range n {
			sinkNH = f.LookupFlow(&flows[i&mask])
		}
	}
}

// ruleCase is one rules case before measurement.
type ruleCase struct {
	rules int
	trie  string // "fast" or "compiled"
	body  func(n int)
	match float64
}

// ruleCases builds the rules cases: rules 0 on the suite's own FIBs
// (fast: the merged FIB; compiled: cfib), the others each on a FIB of its
// own built from the setup.
func ruleCases(o Options, s *FIBSetup, fast, cfib *fib.FIB) ([]ruleCase, error) {
	var cases []ruleCase
	for _, trie := range []string{"fast", "compiled"} {
		for _, n := range ruleCounts {
			f := fast
			if trie == "compiled" {
				f = cfib
			}
			if n > 0 {
				var err error
				if trie == "compiled" {
					f, err = s.BuildCompiledFIB()
				} else {
					f, err = s.BuildFIB(fib.TrieFast)
				}
				if err != nil {
					return nil, err
				}
				if err := addRules(s, f, n); err != nil {
					return nil, err
				}
			}
			flows := ruleFlows(s, n)
			c := ruleCase{rules: n, trie: trie, body: flowCase(f, flows)}
			if n > 0 {
				c.match = ruleMatchFraction(f, flows)
			}
			o.Log("rules %d (%s): %d rules in the list, %.1f%% of flows decided by a custom rule", n, trie, len(f.Rules()), 100*c.match)
			cases = append(cases, c)
		}
	}
	return cases, nil
}

// ruleRatios puts each rules record's ratio to the same run's merged
// lookup (fast: merged/random/fast; compiled: compiled-nexthop/random) in
// its extra, vs_merged, and logs it.
func ruleRatios(o Options, recs []Record) {
	var mergedFast, mergedCompiled float64
	for _, r := range recs {
		if str, _ := r.Params["probe"].(string); str != "random" {
			continue
		}
		switch {
		case r.Impl == "merged" && r.Params["trie"] == "fast":
			mergedFast = r.NsOp
		case r.Impl == "compiled-nexthop":
			mergedCompiled = r.NsOp
		}
	}
	for i := range recs {
		r := &recs[i]
		if r.Impl != "rules" {
			continue
		}
		base, name := mergedFast, "merged (fast)"
		if r.Params["trie"] == "compiled" {
			base, name = mergedCompiled, "compiled-nexthop"
		}
		if base <= 0 {
			continue
		}
		if r.Extra == nil {
			r.Extra = map[string]any{}
		}
		r.Extra["vs_merged"] = float64(int64(r.NsOp/base*1000+0.5)) / 1000
		o.Log("rules %v (%v): %.1f ns per lookup, %.2fx %s (%.1f ns) in the same rounds",
			r.Params["rules"], r.Params["trie"], r.NsOp, r.NsOp/base, name, base)
	}
}
