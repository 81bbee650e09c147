package bench

import (
	"runtime"
	"time"
)

// Result is one timed case.
type Result struct {
	N        int
	NsOp     float64
	AllocsOp float64
}

// Mops converts ns per operation to million operations per second.
func (r Result) Mops() float64 {
	if r.NsOp <= 0 {
		return 0
	}
	return 1e3 / r.NsOp
}

// Measure runs body(n) with growing n until one run takes at least minTime,
// like testing.B, and reports ns and heap allocations per operation of that
// last run. body must do n operations and nothing else that should not be
// timed; setup belongs outside.
func Measure(minTime time.Duration, body func(n int)) Result {
	body(1) // warm caches and lazily built state
	n := 1
	for {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		body(n)
		d := time.Since(start)
		runtime.ReadMemStats(&after)
		if d >= minTime || n >= 1<<31 {
			return Result{
				N:        n,
				NsOp:     float64(d.Nanoseconds()) / float64(n),
				AllocsOp: float64(after.Mallocs-before.Mallocs) / float64(n),
			}
		}
		// Aim 20% past minTime, growing at most 100x per step.
		next := int(float64(n) * 1.2 * float64(minTime) / float64(max(d, time.Microsecond)))
		n = min(max(next, n+1), 100*n)
	}
}

// Duration picks the measuring time for a case.
func (o Options) Duration() time.Duration {
	if o.Quick {
		return 50 * time.Millisecond
	}
	return 500 * time.Millisecond
}
