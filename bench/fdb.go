package bench

// Suite `fdb`: FDB lookup and learning cost as the table grows
// from 1K to 1M entries. Impls: `hash256`, the fixed 256-bucket chained
// hash Linux's bridge used before rhashtable, and `fdb`,
// the bridge's salted, resizable, lock-free-read table (l2's FDB), driven
// through the same datapath entry points the bridge uses. Those are no part
// of l2's API, so the measurement is l2's own BenchmarkFDB
// (l2/fdb_bench_test.go, with l2/export_test.go), which this suite runs
// with go test (goTestBench: the source tree and the go command are
// needed) and turns into records.
//
// lookup: destination lookups of known stations; the probes cycle through
// 4096 stations drawn at random from all entries (the active set; a
// uniformly random probe over 1M entries measures DRAM, not the table,
// and is reported in extra as lookup_uniform_ns).
// learn: one new station learned (slow path: lock, insert) while the
// oldest is forgotten, so the table stays at its size.
//
// Both impls run in the same go test process, each case the fastest of
// its rounds (-count).

import (
	"fmt"
	"strings"
)

func init() {
	Register(Suite{Name: "fdb", Doc: "FDB lookup/learn at 1K-1M entries: hash256 vs salted resizable table", Run: runFDB})
}

// FDBEntries are the table sizes of the suite (l2's fdbEntries holds
// them; --quick measures 100,000 instead of 1,000,000).
var FDBEntries = []int{1000, 2000, 3000, 30000, 1000000}

func runFDB(opts Options) ([]Record, error) {
	opts.Normalize()
	var sizes []int
	for _, n := range FDBEntries {
		if opts.Quick && n > 30000 {
			n = 100000 // --quick: building 1M entries takes seconds
		}
		sizes = append(sizes, n)
	}
	alts := make([]string, len(sizes))
	for i, n := range sizes {
		alts[i] = fmt.Sprint(n)
	}
	pattern := "^BenchmarkFDB$/^impl=(hash256|fdb)$/^entries=(" + strings.Join(alts, "|") + ")$/"
	count := 5
	if opts.Quick {
		count = 2
	}
	if opts.Rounds > 0 {
		count = opts.Rounds
	}
	opts.Log("fdb: go test -bench '%s' github.com/netfwd/netfwd/l2 (-count %d)", pattern, count)
	res, err := goTestBench("github.com/netfwd/netfwd/l2", pattern, opts.Duration()/5, count)
	if err != nil {
		return nil, err
	}
	var recs []Record
	for _, n := range sizes {
		for _, op := range []string{"lookup", "learn"} {
			var base float64
			for _, impl := range []string{"hash256", "fdb"} {
				name := fmt.Sprintf("FDB/impl=%s/entries=%d/op=%s", impl, n, op)
				r, ok := res[name]
				if !ok {
					return nil, fmt.Errorf("fdb: no result for %s", name)
				}
				m := Result{NsOp: r.NsOp, AllocsOp: r.AllocsOp}
				rec := Record{Suite: "fdb", Impl: impl, Params: map[string]any{"entries": n, "op": op},
					NsOp: r.NsOp, Mops: m.Mops(), AllocsOp: r.AllocsOp, Extra: map[string]any{}}
				if op == "lookup" {
					if u, ok := res[fmt.Sprintf("FDB/impl=%s/entries=%d/op=lookup-uniform", impl, n)]; ok {
						rec.Extra["lookup_uniform_ns"] = round2(u.NsOp)
					}
				}
				if impl == "hash256" {
					base = r.NsOp
				} else if base > 0 {
					rec.Extra["speedup_vs_hash256"] = round2(base / r.NsOp)
				}
				if v, ok := r.Metrics["entries"]; ok {
					rec.Extra["table_entries"] = int(v)
				}
				if v, ok := r.Metrics["buckets/lookup"]; ok {
					rec.Extra["avg_buckets_probed"] = round2(v)
				}
				recs = append(recs, rec)
			}
		}
	}
	return recs, nil
}
