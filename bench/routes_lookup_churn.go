package bench

// Benchmark 4(c), in process: FIB lookup latency while routes change at
// 10,000 per second, beside the same lookups without changes, in one run.
//
// Set-up: a compiled FIB (the daemon's default) behind a real fpm.Server on
// loopback, loaded with the table over FPM as zebra sends it (churnBase).
// Readers (GOMAXPROCS-1 goroutines, at least one: a core is left to the
// server and the writer, as the daemon's datapath leaves one to its control
// plane on a small box) look up random addresses of the table in timed
// batches of lookupBatch, plus the hot prefix once per batch (it must
// always resolve). Two phases of equal length, readers alike: "quiet" (no
// changes), then "churn" (the paced writer of routes_churn.go on the FPM
// connection: the server's reader, batching and transactions do the rest,
// exactly as in the daemon). Afterwards every change must have been
// applied: the server counted every message and the FIB holds the table
// less the prefixes withdrawn at the end.
//
// Per-lookup latency is a batch's time / lookupBatch (timing single lookups
// would mostly measure the clock); the percentiles are over batches, and
// the longest batch is reported whole (a GC pause or a preemption shows
// there undiluted).
//
// Locking: readers only load FIB snapshots (lock-free); each owns its
// histogram, read after it stopped (WaitGroup).

import (
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/fulltable"
)

const (
	lookupBatch = 32
	histNs      = 4096 // 1-ns buckets of the per-lookup histogram
	maxOver     = 1 << 16
)

// hotPrefix is the churned prefix the traffic goes to (not in the table).
var hotPrefix = netip.MustParsePrefix("198.19.81.0/24")

// lookupHist collects one reader's batches.
type lookupHist struct {
	buckets   [histNs]uint64
	over      []uint32 // per-lookup ns of batches beyond the buckets
	overLost  uint64   // ... beyond maxOver of them
	maxBatch  time.Duration
	batches   uint64
	misses    uint64 // table addresses without a route (withdrawn, uncovered)
	hotMisses uint64 // the hot prefix without a route: must stay 0

	// The process's garbage collections during the phase (set by
	// lookupPhase on the merged histogram).
	gcCycles uint32
	gcPause  time.Duration
}

func (h *lookupHist) add(batch time.Duration) {
	h.batches++
	h.maxBatch = max(h.maxBatch, batch)
	ns := batch.Nanoseconds() / lookupBatch
	if ns < histNs {
		h.buckets[ns]++
	} else if len(h.over) < cap(h.over) {
		h.over = append(h.over, uint32(min(ns, 1<<32-1)))
	} else {
		h.overLost++
	}
}

// merge adds o to h.
func (h *lookupHist) merge(o *lookupHist) {
	for i, n := range o.buckets {
		h.buckets[i] += n
	}
	h.over = append(h.over, o.over...)
	h.overLost += o.overLost
	h.maxBatch = max(h.maxBatch, o.maxBatch)
	h.batches += o.batches
	h.misses += o.misses
	h.hotMisses += o.hotMisses
}

// quantile is the per-lookup ns below which a fraction q of the batches
// fall.
func (h *lookupHist) quantile(q float64) float64 {
	if h.batches == 0 {
		return 0
	}
	k := uint64(q * float64(h.batches))
	k = min(max(k, 1), h.batches)
	var seen uint64
	for ns, n := range h.buckets {
		if seen += n; seen >= k {
			return float64(ns)
		}
	}
	over := slices.Clone(h.over)
	slices.Sort(over)
	if i := int(k - seen - 1); i < len(over) {
		return float64(over[i])
	}
	return float64(h.maxBatch.Nanoseconds()) / lookupBatch // among the uncounted
}

func (h *lookupHist) mean() float64 {
	var sum float64
	for ns, n := range h.buckets {
		sum += float64(ns) * float64(n)
	}
	for _, ns := range h.over {
		sum += float64(ns)
	}
	if n := h.batches - h.overLost; n > 0 {
		return sum / float64(n)
	}
	return 0
}

// readLookups times batches of lookups of addrs (from offset start) until
// stop is set.
func readLookups(f *fib.FIB, addrs []netip.Addr, start int, hot netip.Addr, h *lookupHist, stop *atomic.Bool) {
	i := start % len(addrs)
	for !stop.Load() {
		t0 := time.Now()
		if f.Lookup(hot) == nil {
			h.hotMisses++
		}
		for range lookupBatch - 1 {
			if f.Lookup(addrs[i]) == nil {
				h.misses++
			}
			if i++; i == len(addrs) {
				i = 0
			}
		}
		h.add(time.Since(t0))
	}
}

// lookupPhase runs readers for d while during (nil: nothing) runs.
func lookupPhase(f *fib.FIB, addrs []netip.Addr, hot netip.Addr, readers int, d time.Duration,
	during func(stop <-chan struct{}) error) (*lookupHist, error) {
	var stop atomic.Bool
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	hs := make([]*lookupHist, readers)
	var wg sync.WaitGroup
	for r := range readers {
		hs[r] = &lookupHist{over: make([]uint32, 0, maxOver)}
		wg.Go(func() { readLookups(f, addrs, r*len(addrs)/readers, hot, hs[r], &stop) })
	}
	stopDuring := make(chan struct{})
	errc := make(chan error, 1)
	if during != nil {
		go func() { errc <- during(stopDuring) }()
	} else {
		errc <- nil
	}
	time.Sleep(d)
	close(stopDuring)
	err := <-errc
	stop.Store(true)
	wg.Wait()
	runtime.ReadMemStats(&ms1)
	all := &lookupHist{gcCycles: ms1.NumGC - ms0.NumGC, gcPause: time.Duration(ms1.PauseTotalNs - ms0.PauseTotalNs)}
	for _, h := range hs {
		all.merge(h)
	}
	return all, err
}

// lookupChurnResult is the two phases of one run.
type lookupChurnResult struct {
	routes, readers  int
	seconds          float64
	quiet, churn     *lookupHist
	c                *routeChurn
	sent             churnStats
	batches          uint64 // FIB transactions of the churn phase
	maxBatchVisible  time.Duration
	applied, skipped uint64
}

// runLookupChurn loads prefixes into a compiled FIB over FPM and runs the
// quiet and churn phases of d each.
func runLookupChurn(prefixes []netip.Prefix, d time.Duration, o Options) (*lookupChurnResult, error) {
	prefixes = withoutPrefix(prefixes, hotPrefix)
	f := newRoutesFIBWith(fib.Options{Compiled: true})
	srv, conn, err := loopbackFPM(f)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	defer conn.Close()

	nhids := [2]uint32{21, 22}
	gws := [2]netip.Addr{netip.MustParseAddr("192.0.2.254"), netip.MustParseAddr("192.0.2.253")}
	base, baseMsgs := churnBase(prefixes, hotPrefix, nhids, gws, 2)
	t0 := time.Now()
	if _, err := conn.Write(base); err != nil {
		return nil, err
	}
	st := srv.Stats()
	if err := waitMessages(func() uint64 { return st.Messages.Load() }, baseMsgs, 5*time.Minute); err != nil {
		return nil, fmt.Errorf("loading the table: %w", err)
	}
	loaded := f.Size()
	o.Log("lookup-churn: %d prefixes loaded over FPM in %v (FIB size %d)", len(prefixes), time.Since(t0).Round(time.Millisecond), loaded)
	if err := expectRoutes(f, len(prefixes)+1); err != nil {
		return nil, err
	}

	addrs := fulltable.RandomProbes(prefixes, 1<<20, 81)
	hot := hotPrefix.Addr().Next()
	readers := max(1, runtime.GOMAXPROCS(0)-1)
	res := &lookupChurnResult{routes: len(prefixes), readers: readers, seconds: d.Seconds(),
		c: newRouteChurn(prefixes, hotPrefix, nhids, 4)}
	runtime.GC()
	if res.quiet, err = lookupPhase(f, addrs, hot, readers, d, nil); err != nil {
		return nil, err
	}
	b0, r0, rp0, d0 := st.Batches.Load(), st.C.RoutesAdded.Load(), st.C.RoutesReplaced.Load(), st.C.RoutesDeleted.Load()
	runtime.GC()
	res.churn, err = lookupPhase(f, addrs, hot, readers, d, func(stop <-chan struct{}) error {
		var err error
		res.sent, err = writeChurn(conn, res.c, churnRate, 5*time.Millisecond, stop)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := waitMessages(func() uint64 { return st.Messages.Load() }, baseMsgs+res.c.messages, time.Minute); err != nil {
		return nil, fmt.Errorf("churn not applied: %w", err)
	}
	res.batches = st.Batches.Load() - b0
	res.applied = st.C.RoutesAdded.Load() - r0 + st.C.RoutesReplaced.Load() - rp0 + st.C.RoutesDeleted.Load() - d0
	for _, n := range st.C.Skipped() {
		res.skipped += n
	}
	res.maxBatchVisible = time.Duration(st.MaxBatchNanos.Load())
	if want := loaded - res.c.withdrawnNow(); f.Size() != want {
		return nil, fmt.Errorf("after the churn the FIB holds %d prefixes, want %d (%d withdrawn)", f.Size(), want, res.c.withdrawnNow())
	}
	return res, nil
}

// waitMessages waits until count() reaches want.
func waitMessages(count func() uint64, want uint64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for count() < want {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d messages applied after %v", count(), want, limit)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// records turns the run into the suite's records.
func (r *lookupChurnResult) records() []Record {
	quietMean := r.quiet.mean()
	var recs []Record
	for _, p := range []struct {
		impl string
		h    *lookupHist
		rate int
	}{{"lookup-quiet", r.quiet, 0}, {"lookup-churn", r.churn, churnRate}} {
		h := p.h
		lookups := float64(h.batches * lookupBatch)
		mean := h.mean()
		extra := map[string]any{
			"p50_ns": h.quantile(0.5), "p99_ns": h.quantile(0.99), "p999_ns": h.quantile(0.999),
			"max_ns": round2(float64(h.maxBatch.Nanoseconds()) / lookupBatch), "max_batch_us": round2(float64(h.maxBatch.Nanoseconds()) / 1e3),
			"lookups": uint64(lookups), "hot_misses": h.hotMisses, "misses": h.misses,
			"x_quiet_mean": ratio(mean, quietMean), "x_quiet_p99": ratio(h.quantile(0.99), r.quiet.quantile(0.99)),
			"gc_cycles": h.gcCycles, "gc_pause_ms": round3(float64(h.gcPause.Microseconds()) / 1e3),
		}
		if p.rate > 0 {
			extra["changes"] = r.c.changes
			extra["changes_per_s"] = round2(r.sent.rate(r.c))
			extra["hot_changes"] = r.c.hotChanges
			extra["hot_del_add"] = r.c.hotDelAdd
			extra["applied"] = r.applied
			extra["skipped"] = r.skipped
			extra["fib_transactions"] = r.batches
			extra["max_visible_ms"] = round2(float64(r.maxBatchVisible.Microseconds()) / 1e3)
			extra["writer_late_ms"] = round2(float64(r.sent.late.Microseconds()) / 1e3)
		}
		recs = append(recs, Record{Suite: "routes", Impl: p.impl,
			Params: map[string]any{"routes": r.routes, "readers": r.readers, "churn_per_s": p.rate, "seconds": r.seconds,
				"fib": "compiled", "batch": lookupBatch},
			NsOp: round2(mean), Mops: round3(lookups / r.seconds / 1e6), Extra: extra})
	}
	return recs
}

func logLookupChurn(o Options, recs []Record) {
	for _, r := range recs {
		e := r.Extra
		o.Log("%-13s %5.1f ns/lookup mean  p50 %v  p99 %v  p99.9 %v  max %.0f ns (batch %.0f us)  %.2f M lookups/s  hot misses %v  GC %v cycles, %v ms paused",
			r.Impl, r.NsOp, e["p50_ns"], e["p99_ns"], e["p999_ns"], e["max_ns"], e["max_batch_us"], r.Mops, e["hot_misses"], e["gc_cycles"], e["gc_pause_ms"])
	}
}
