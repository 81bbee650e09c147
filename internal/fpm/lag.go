package fpm

// Lag: how long a route change waited before forwarding saw it, from the
// moment its batch's first message was read (from zebra's FPM stream or the
// kernel's netlink socket) to the commit of the batch's FIB transaction. It
// includes the batching wait (IdleCommit, MaxBatchDelay) on purpose: that is
// the delay an operator sees between a routing daemon's decision and
// netfwd's forwarding. One observation per batch, never per packet. The
// kernel mirror's notifications held during a resync are applied with the
// cycle's last dump batch and counted in its lag (from that batch's first
// message), not from their own arrival.
//
// Locking: atomics only; Observe runs on the source's goroutine and
// Snapshot on a metrics scrape, which may see a count one batch ahead of a
// bucket (harmless for a rate).

import (
	"sync/atomic"
	"time"
)

// LagBuckets are the histogram's upper bounds, in seconds.
var LagBuckets = [...]float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Lag is a histogram of batch delays.
type Lag struct {
	buckets  [len(LagBuckets)]atomic.Uint64 // not cumulative: one per bound
	count    atomic.Uint64
	sumNanos atomic.Uint64
}

// Observe records one batch that waited d.
func (l *Lag) Observe(d time.Duration) {
	d = max(d, 0)
	s := d.Seconds()
	for i, b := range LagBuckets {
		if s <= b {
			l.buckets[i].Add(1)
			break
		}
	}
	l.sumNanos.Add(uint64(d))
	l.count.Add(1)
}

// Snapshot returns the histogram as Prometheus wants it: the count, the sum
// in seconds and the cumulative count at each bound of LagBuckets.
func (l *Lag) Snapshot() (count uint64, sum float64, cumulative map[float64]uint64) {
	cumulative = make(map[float64]uint64, len(LagBuckets))
	var n uint64
	for i, b := range LagBuckets {
		n += l.buckets[i].Load()
		cumulative[b] = n
	}
	count = max(l.count.Load(), n)
	return count, time.Duration(l.sumNanos.Load()).Seconds(), cumulative
}
