package fpm

import (
	"testing"
	"time"
)

func TestLagBuckets(t *testing.T) {
	var l Lag
	for _, d := range []time.Duration{-time.Millisecond, 700 * time.Microsecond, 30 * time.Millisecond, 100 * time.Millisecond, time.Minute} {
		l.Observe(d)
	}
	n, sum, c := l.Snapshot()
	if n != 5 {
		t.Errorf("count %d, want 5", n)
	}
	if want := (700*time.Microsecond + 130*time.Millisecond + time.Minute).Seconds(); sum < want-1e-9 || sum > want+1e-9 {
		t.Errorf("sum %v, want %v", sum, want)
	}
	// <=1ms: the negative (clamped to 0) and 0.7 ms; <=0.05: +30 ms; <=0.1: +100 ms (bounds are inclusive); the minute is past the last bound.
	for b, want := range map[float64]uint64{0.001: 2, 0.025: 2, 0.05: 3, 0.1: 4, 10: 4} {
		if c[b] != want {
			t.Errorf("bucket le=%v: %d, want %d", b, c[b], want)
		}
	}
}
