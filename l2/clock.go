package l2

// Clocks. The datapath needs a timestamp per frame only to refresh FDB
// entries; it reads the clock once per batch (Tx caches it until Flush), so
// the clock may be as slow as time.Now. Ageing (control plane) reads the same
// clock. Tests inject a ManualClock to make ageing deterministic.

import (
	"sync/atomic"
	"time"
)

// Clock returns a monotonic time in nanoseconds. It must never go backwards.
type Clock interface {
	Now() int64
}

// monotonicClock reads the runtime's monotonic clock, relative to its
// creation (so values start near 0 and fit comfortably in int64).
type monotonicClock struct{ start time.Time }

// newMonotonicClock returns a clock starting now.
func newMonotonicClock() *monotonicClock { return &monotonicClock{start: time.Now()} }

// Now implements Clock. It never returns 0 (0 means "not read yet" in Tx).
func (c *monotonicClock) Now() int64 { return int64(time.Since(c.start)) + 1 }

// ManualClock is advanced explicitly (tests, replay of recorded time).
// Safe for concurrent use.
type ManualClock struct{ ns atomic.Int64 }

// NewManualClock starts at 1 s (not 0, which Tx treats as "unset").
func NewManualClock() *ManualClock {
	c := &ManualClock{}
	c.ns.Store(int64(time.Second))
	return c
}

// Now implements Clock.
func (c *ManualClock) Now() int64 { return c.ns.Load() }

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// Set sets the clock to an absolute value (must not go backwards).
func (c *ManualClock) Set(ns int64) { c.ns.Store(ns) }
