package bench

// Suite fib: FIB lookups on the real full Internet table (901,899 IPv4
// prefixes) plus a local table like a real router's, through
//   bart-fast-raw, bart-table-raw  the bare library on the same prefixes: the floor
//   split                          a local trie, then a main trie (the kernel before the merge)
//   merged                         netfwd's FIB: one trie, one pointer
//   compiled, compiled-batch       the compiled DIR-24-8 structure that follows
//                                  the merged trie: one lookup
//                                  answering the compact nexthop index, and a
//                                  vector of 256 at a time mapped to *Nexthop
//   compiled-nexthop               one lookup mapped to the *Nexthop (what
//                                  FIB.Lookup returns in compiled mode)
//   rules                          FIB.LookupFlow with 0, 1, 10, 100 policy
//                                  routing rules (fib_rules.go); --only
//                                  without "rules" leaves them out (the
//                                  suite's lookups as before, for A/B runs)
// with probes "hot" (one address, as bart's own benchmark) and "random"
// (1M shuffled addresses inside the table's prefixes: cache-cold), plus the
// time to load the table from a config file, the memory per route, and the
// compiled structure's update latency (median, p99), build time and memory.

import (
	"bytes"
	"fmt"
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/gaissmai/bart"
	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/fib/dir24"
	"github.com/netfwd/netfwd/internal/apply"
	"github.com/netfwd/netfwd/internal/fulltable"
	"github.com/netfwd/netfwd/nexthop"
)

func init() {
	Register(Suite{Name: "fib", Doc: "FIB lookups on the full table: bart raw, split local+main, merged", Run: runFIB})
}

// FIBSetup is the route set and probes shared by every case of the suite.
type FIBSetup struct {
	Main   []netip.Prefix // the full table
	Addrs  []netip.Prefix // interface addresses (the local table derives from them)
	Gw     netip.Addr
	Random []netip.Addr
	Hot    netip.Addr
}

// NewFIBSetup loads the table (n prefixes; 0 = all) and makes nProbes probes.
func NewFIBSetup(n, nProbes int) (*FIBSetup, error) {
	all, err := fulltable.Load()
	if err != nil {
		return nil, err
	}
	if n > 0 && n < len(all) {
		all = all[:n]
	}
	s := &FIBSetup{Main: all, Gw: netip.MustParseAddr("192.0.2.254")}
	s.Addrs = append(s.Addrs, netip.MustParsePrefix("192.0.2.1/24"))
	// Interfaces numbered from announced space, as on a provider's router:
	// their local and broadcast routes overlap main routes.
	for i := 0; len(s.Addrs) < 16; i += len(all) / 15 {
		p := all[i]
		if p.Bits() > 28 {
			continue
		}
		a := p.Addr().Next()
		s.Addrs = append(s.Addrs, netip.PrefixFrom(a, max(p.Bits(), 24)))
	}
	s.Random = fulltable.RandomProbes(all, nProbes, 42)
	s.Hot = s.Random[0]
	return s, nil
}

// Config renders the setup as a netfwd config file.
func (s *FIBSetup) Config() []byte {
	var b bytes.Buffer
	b.Grow(len(s.Main) * 48)
	for i, a := range s.Addrs {
		fmt.Fprintf(&b, "address add %s dev eth%d\n", a, i)
	}
	for _, p := range s.Main {
		fmt.Fprintf(&b, "route add %s via %s dev eth0 proto bgp metric 20\n", p, s.Gw)
	}
	return b.Bytes()
}

// BuildFIB loads the setup into a FIB through a transaction.
func (s *FIBSetup) BuildFIB(kind fib.TrieKind) (*fib.FIB, error) {
	return s.build(fib.Options{Trie: kind})
}

// BuildCompiledFIB loads the setup into a FIB in compiled mode.
func (s *FIBSetup) BuildCompiledFIB() (*fib.FIB, error) {
	return s.build(fib.Options{Compiled: true})
}

func (s *FIBSetup) build(opts fib.Options) (*fib.FIB, error) {
	f := fib.New(opts)
	tx := f.Begin(len(s.Main))
	for i, a := range s.Addrs {
		if err := tx.AddAddress(fmt.Sprintf("eth%d", i), a); err != nil {
			tx.Abort()
			return nil, err
		}
	}
	for _, p := range s.Main {
		if err := tx.AddRoute(fib.RouteSpec{Prefix: p, Gateway: s.Gw, Dev: "eth0", Proto: fib.ProtoBGP, Metric: 20, MetricSet: true}); err != nil {
			tx.Abort()
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	tx.Commit()
	return f, nil
}

// rawTries builds bart tries with the FIB's effective values: the same
// prefixes and results, without the FIB around them.
func rawTries(f *fib.FIB) (*bart.Fast[*nexthop.Nexthop], *bart.Table[*nexthop.Nexthop], [2]*bart.Fast[*nexthop.Nexthop], [2]*bart.Table[*nexthop.Nexthop]) {
	fast := new(bart.Fast[*nexthop.Nexthop])
	table := new(bart.Table[*nexthop.Nexthop])
	var splitFast [2]*bart.Fast[*nexthop.Nexthop]
	var splitTable [2]*bart.Table[*nexthop.Nexthop]
	for i := range 2 {
		splitFast[i] = new(bart.Fast[*nexthop.Nexthop])
		splitTable[i] = new(bart.Table[*nexthop.Nexthop])
	}
	// Insert in the order the FIB saw the routes (local first, then the table
	// in file order), so memory layout is comparable, with the merged trie's
	// effective values.
	eff := map[netip.Prefix]*nexthop.Nexthop{}
	var order []netip.Prefix
	for p, nh := range mergedView(f) {
		eff[p] = nh
	}
	for _, id := range []uint32{fib.TableLocal, fib.TableMain} {
		for _, r := range f.Routes(id) {
			order = append(order, r.Prefix)
		}
	}
	for _, p := range order {
		if nh, ok := eff[p]; ok {
			fast.Insert(p, nh)
			table.Insert(p, nh)
			delete(eff, p)
		}
	}
	// The split tables hold each table's best route per prefix; the setup
	// has no throw routes and no dead nexthops, so that is the whole story.
	for i, id := range []uint32{fib.TableLocal, fib.TableMain} {
		for _, r := range f.Routes(id) {
			if _, dup := splitFast[i].Get(r.Prefix); dup {
				continue // routes are best first
			}
			splitFast[i].Insert(r.Prefix, r.NH)
			splitTable[i].Insert(r.Prefix, r.NH)
		}
	}
	return fast, table, splitFast, splitTable
}

var (
	sinkNH  *nexthop.Nexthop
	sinkIdx uint32
)

// indexCase measures the compiled structure's compact answer, the nexthop
// index, for destinations as the datapath holds them (uint32 from the
// header): table is the structure a compiled FIB builds from its merged
// trie (compiledTable), loaded through an atomic pointer as FIB lookups do.
func indexCase(table *atomic.Pointer[dir24.Table], probes []netip.Addr) func(n int) {
	dsts := hostOrder(probes)
	mask := len(dsts) - 1
	return func(n int) {
		var last uint32
		for i := range n {
			last = table.Load().Lookup(dsts[i&mask])
		}
		sinkIdx = last
	}
}

// lookupCase measures one lookup function over probes (hot: one address).
func lookupCase(lookup func(netip.Addr) *nexthop.Nexthop, probes []netip.Addr) func(n int) {
	mask := len(probes) - 1 // probes has a power-of-two length
	return func(n int) {
		var last *nexthop.Nexthop
		for i := range n {
			last = lookup(probes[i&mask])
		}
		sinkNH = last
	}
}

// FIBCases returns the named lookup cases for a built FIB (shared with the
// go test benchmarks).
func FIBCases(f *fib.FIB, kind fib.TrieKind) map[string]func(netip.Addr) *nexthop.Nexthop {
	fast, table, sf, st := rawTries(f)
	cases := map[string]func(netip.Addr) *nexthop.Nexthop{
		"merged": f.Lookup,
	}
	if kind == fib.TrieFast {
		cases["bart-fast-raw"] = func(a netip.Addr) *nexthop.Nexthop { nh, _ := fast.Lookup(a); return nh }
		cases["split"] = func(a netip.Addr) *nexthop.Nexthop {
			if nh, ok := sf[0].Lookup(a); ok && nh != nil {
				return nh
			}
			nh, _ := sf[1].Lookup(a)
			return nh
		}
	} else {
		cases["bart-table-raw"] = func(a netip.Addr) *nexthop.Nexthop { nh, _ := table.Lookup(a); return nh }
		cases["split"] = func(a netip.Addr) *nexthop.Nexthop {
			if nh, ok := st[0].Lookup(a); ok && nh != nil {
				return nh
			}
			nh, _ := st[1].Lookup(a)
			return nh
		}
	}
	return cases
}

func runFIB(o Options) ([]Record, error) {
	n, probes := 0, 1<<20
	if o.Quick {
		n, probes = 100_000, 1<<16
	}
	s, err := NewFIBSetup(n, probes)
	if err != nil {
		return nil, err
	}
	routes := len(s.Main)
	var recs []Record

	// Load from a config file, as the daemon does, and memory per route.
	text := s.Config()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	f := fib.New(fib.Options{})
	start := time.Now()
	if err := apply.LoadFIB(f, "full.conf", bytes.NewReader(text), len(s.Main)); err != nil {
		return nil, err
	}
	took := time.Since(start)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(text)
	runtime.KeepAlive(f)
	perRoute := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(routes)
	o.Log("loaded %d routes from config text in %v, %.0f bytes per route", routes, took, perRoute)
	recs = append(recs, Record{Suite: "fib", Impl: "load", Params: map[string]any{"routes": routes, "trie": "fast"},
		NsOp: float64(took.Nanoseconds()) / float64(routes), Mops: float64(routes) / took.Seconds() / 1e6,
		Extra: map[string]any{"seconds": took.Seconds(), "bytes_per_route": perRoute}})
	f = nil

	crecs, cfib, ctable, err := compiledRecords(o, s, routes)
	if err != nil {
		return nil, err
	}
	// Every lookup case is built first and measured in interleaved rounds
	// (bench/interleave.go): ratios between them come from the same moments.
	type lcase struct {
		impl, probe, trie string
		body              func(n int)
	}
	var cases []lcase
	var fastFIB *fib.FIB
	for _, kind := range []fib.TrieKind{fib.TrieFast, fib.TrieTable} {
		f, err := s.BuildFIB(kind)
		if err != nil {
			return nil, err
		}
		if kind == fib.TrieFast {
			fastFIB = f
		}
		impls := FIBCases(f, kind)
		for _, probe := range []string{"hot", "random"} {
			ps := s.Random
			if probe == "hot" {
				ps = []netip.Addr{s.Hot}
			}
			for _, impl := range []string{"bart-fast-raw", "bart-table-raw", "split", "merged"} {
				if lookup, ok := impls[impl]; ok {
					cases = append(cases, lcase{impl, probe, kind.String(), lookupCase(lookup, ps)})
				}
			}
		}
	}
	for _, probe := range []string{"hot", "random"} {
		ps := s.Random
		if probe == "hot" {
			ps = []netip.Addr{s.Hot}
		}
		cases = append(cases, lcase{"compiled", probe, "", indexCase(ctable, ps)},
			lcase{"compiled-nexthop", probe, "", lookupCase(cfib.Lookup, ps)},
			lcase{"compiled-batch", probe, "", compiledBatchCase(cfib, ps)})
	}
	// Policy routing (fib_rules.go): LookupFlow with 0-100 rules.
	var rcases []ruleCase
	if o.Wants("rules") {
		if rcases, err = ruleCases(o, s, fastFIB, cfib); err != nil {
			return nil, err
		}
	}
	for _, rc := range rcases {
		cases = append(cases, lcase{"rules", "random", rc.trie, rc.body})
	}
	bodies := make([]func(n int), len(cases))
	for i, c := range cases {
		bodies[i] = c.body
	}
	for i, res := range interleaved(o, bodies) {
		c := cases[i]
		params := map[string]any{"probe": c.probe, "routes": routes}
		if c.impl == "merged" || c.impl == "split" || c.impl == "rules" {
			params["trie"] = c.trie
		}
		if c.impl == "compiled-batch" {
			params["batch"] = compiledBatch
		}
		var extra map[string]any
		if j := i - (len(cases) - len(rcases)); j >= 0 {
			params["rules"] = rcases[j].rules
			extra = map[string]any{"match_fraction": round2(rcases[j].match)}
		}
		recs = append(recs, Record{Suite: "fib", Impl: c.impl, Params: params, NsOp: res.NsOp, Mops: res.Mops(), AllocsOp: res.AllocsOp, Extra: extra})
	}
	ruleRatios(o, recs)
	recs = append(recs, crecs...)
	return recs, nil
}
