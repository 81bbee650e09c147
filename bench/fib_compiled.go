package bench

// The compiled FIB's part of suite fib: lookups (single and batch), the
// latency of route changes through the FIB with the compiled structure
// following (median and p99 for /24 and /8), full build time and memory.

import (
	"fmt"
	"iter"
	"maps"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/gaissmai/bart"
	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/fib/dir24"
	"github.com/netfwd/netfwd/nexthop"
	"github.com/netfwd/netfwd/wire"
)

const compiledBatch = 256

// hostOrder converts IPv4 probes to the datapath's form (wire.Addr4, as
// parsed from the IPv4 header).
func hostOrder(probes []netip.Addr) []wire.Addr4 {
	dsts := make([]wire.Addr4, len(probes))
	for i, a := range probes {
		dsts[i] = wire.Addr4From(a)
	}
	return dsts
}

// compiledBatchCase looks probes up 256 at a time; n counts addresses.
func compiledBatchCase(f *fib.FIB, probes []netip.Addr) func(n int) {
	dsts := hostOrder(probes)
	for len(dsts) < compiledBatch { // the hot probe: one address, repeated
		dsts = append(dsts, dsts[0])
	}
	out := make([]*nexthop.Nexthop, compiledBatch)
	idx := make([]uint32, compiledBatch)
	return func(n int) {
		off := 0
		for done := 0; done < n; done += compiledBatch {
			if off+compiledBatch > len(dsts) {
				off = 0
			}
			f.LookupBatch4(dsts[off:off+compiledBatch], out, idx)
			off += compiledBatch
		}
		sinkNH = out[0]
	}
}

// compiledRecords measures the compiled structure's build, memory and
// update latencies, and returns the compiled FIB and the structure built
// from its merged trie (compiledTable) for the lookup cases.
func compiledRecords(o Options, s *FIBSetup, routes int) ([]Record, *fib.FIB, *atomic.Pointer[dir24.Table], error) {
	start := time.Now()
	f, err := s.BuildCompiledFIB()
	if err != nil {
		return nil, nil, nil, err
	}
	o.Log("compiled FIB loaded in %v", time.Since(start))
	var recs []Record

	// Build time of the compiled structure alone, from the merged trie.
	var build time.Duration
	for range 3 {
		t0 := time.Now()
		if _, err := dir24.Build(mergedIndices(f)); err != nil {
			return nil, nil, nil, err
		}
		if d := time.Since(t0); build == 0 || d < build {
			build = d
		}
	}
	table, err := compiledTable(f)
	if err != nil {
		return nil, nil, nil, err
	}
	st := table.Load().Stats()
	recs = append(recs, Record{Suite: "fib", Impl: "compiled-build", Params: map[string]any{"routes": routes},
		NsOp: float64(build.Nanoseconds()) / float64(routes), Mops: float64(routes) / build.Seconds() / 1e6,
		Extra: map[string]any{"seconds": build.Seconds(), "memory_mib": float64(st.Bytes()) / (1 << 20), "bytes_per_route": float64(st.Bytes()) / float64(routes)}})
	o.Log("compiled build %v, %.1f MiB", build, float64(st.Bytes())/(1<<20))

	// The compiled structure alone: Set and Delete of a /24 and a /8 on a
	// structure built from the full table (what a route change costs it).
	c, err := dir24.Build(mergedIndices(f))
	if err != nil {
		return nil, nil, nil, err
	}
	mergedParent := mergedParents(f)
	for _, bits := range []int{24, 8} {
		reps := 20000
		if bits == 8 {
			reps = 200
		}
		var sets, dels []time.Duration
		for i := range reps {
			p := updatePrefix(bits, i)
			parent, pnh, has := mergedParent(p)
			t0 := time.Now()
			if err := c.Set(p, 1); err != nil {
				return nil, nil, nil, err
			}
			sets = append(sets, time.Since(t0))
			t0 = time.Now()
			if err := c.Delete(p, parent, pnh, has); err != nil {
				return nil, nil, nil, err
			}
			dels = append(dels, time.Since(t0))
		}
		recs = append(recs, latencyRecords(o, "compiled-update", bits, routes, map[string][]time.Duration{"set": sets, "del": dels})...)
	}

	// Route changes through the whole FIB (transaction, per-table and
	// merged tries, compiled structure): add then delete a route of each
	// length, many times.
	n := 2000
	if o.Quick {
		n = 300
	}
	for _, bits := range []int{24, 8} {
		reps := n
		if bits == 8 {
			reps = n / 10
		}
		var adds, dels []time.Duration
		for i := range reps {
			p := updatePrefix(bits, i)
			spec := fib.RouteSpec{Prefix: p, Gateway: s.Gw, Dev: "eth0", Metric: 7, MetricSet: true}
			t0 := time.Now()
			tx := f.Begin(1)
			if err := tx.AddRoute(spec); err != nil {
				tx.Abort()
				return nil, nil, nil, fmt.Errorf("update %s: %w", p, err)
			}
			tx.Commit()
			adds = append(adds, time.Since(t0))
			t0 = time.Now()
			tx = f.Begin(1)
			if err := tx.DelRoute(spec); err != nil {
				tx.Abort()
				return nil, nil, nil, err
			}
			tx.Commit()
			dels = append(dels, time.Since(t0))
		}
		recs = append(recs, latencyRecords(o, "fib-update", bits, routes, map[string][]time.Duration{"add": adds, "del": dels})...)
	}
	return recs, f, table, nil
}

// updatePrefix is the i-th prefix of length bits (24 or 8) that the update
// cases add and delete: /24s in 100.64.0.0/10, /8s below 224/8.
func updatePrefix(bits, i int) netip.Prefix {
	if bits == 24 {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{100, byte(64 + i>>8&63), byte(i), 0}), 24)
	}
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(224 - 1 - i%16), 0, 0, 0}), 8)
}

// mergedIndices is the merged trie as the compiled structure stores it:
// each prefix with its nexthop's index.
func mergedIndices(f *fib.FIB) iter.Seq2[netip.Prefix, uint32] {
	return func(yield func(netip.Prefix, uint32) bool) {
		for p, nh := range mergedView(f) {
			v := uint32(0)
			if nh != nil {
				v = nh.Index
			}
			if !yield(p, v) {
				return
			}
		}
	}
}

// mergedView is the merged trie's content seen through the FIB's API: every
// prefix of the local table, then every prefix of the main table not in
// it, each with its best route's nexthop, sorted. That is the merged trie
// for the suite's set-up, whose local routes are host and broadcast
// routes (no main route is more specific than one) and which has no throw
// routes or dead nexthops; TestMergedViewMatchesFIB checks it against the
// FIB's lookups.
func mergedView(f *fib.FIB) iter.Seq2[netip.Prefix, *nexthop.Nexthop] {
	eff := map[netip.Prefix]*nexthop.Nexthop{}
	for _, id := range []uint32{fib.TableLocal, fib.TableMain} {
		for _, r := range f.Routes(id) {
			if _, ok := eff[r.Prefix]; !ok { // routes are best first; local wins
				eff[r.Prefix] = r.NH
			}
		}
	}
	keys := slices.SortedFunc(maps.Keys(eff), comparePrefix)
	return func(yield func(netip.Prefix, *nexthop.Nexthop) bool) {
		for _, p := range keys {
			if !yield(p, eff[p]) {
				return
			}
		}
	}
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// compiledTable builds the DIR-24-8 structure a compiled FIB keeps beside
// its merged trie, from f's merged view, behind an atomic pointer as the
// FIB loads it on every lookup.
func compiledTable(f *fib.FIB) (*atomic.Pointer[dir24.Table], error) {
	t, err := dir24.Build(mergedIndices(f))
	if err != nil {
		return nil, err
	}
	var p atomic.Pointer[dir24.Table]
	p.Store(t)
	return &p, nil
}

// mergedParents answers, for a prefix, the longest merged-trie prefix
// strictly containing it and that prefix's nexthop index: what the FIB
// writer passes to the compiled structure's Delete.
func mergedParents(f *fib.FIB) func(p netip.Prefix) (netip.Prefix, uint32, bool) {
	var t bart.Table[uint32]
	for p, v := range mergedIndices(f) {
		t.Insert(p, v)
	}
	return func(p netip.Prefix) (netip.Prefix, uint32, bool) {
		for q, v := range t.Supernets(p) {
			if q.Bits() < p.Bits() {
				return q, v, true
			}
		}
		return netip.Prefix{}, 0, false
	}
}

// latencyRecords turns update latency samples into records: ns_op is the
// median, extra has the p99.
func latencyRecords(o Options, impl string, bits, routes int, byOp map[string][]time.Duration) []Record {
	var recs []Record
	for _, op := range []string{"add", "set", "del"} {
		d := byOp[op]
		if len(d) == 0 {
			continue
		}
		slices.Sort(d)
		med, p99 := d[len(d)/2], d[len(d)*99/100]
		recs = append(recs, Record{Suite: "fib", Impl: impl, Params: map[string]any{"prefix_len": bits, "op": op, "routes": routes},
			NsOp: float64(med.Nanoseconds()), Mops: 1e3 / float64(med.Nanoseconds()),
			Extra: map[string]any{"median_ns": med.Nanoseconds(), "p99_ns": p99.Nanoseconds(), "samples": len(d)}})
		o.Log("%s /%d %s: median %v p99 %v", impl, bits, op, med, p99)
	}
	return recs
}
