package l3

// ICMP rate limiting as Linux does it: a global budget (icmp_msgs_per_sec
// 1000, icmp_msgs_burst 50) and a per-destination budget (icmp_ratelimit
// 1000 ms, burst 6) for the types in icmp_ratemask (destination
// unreachable, source quench, time exceeded, parameter problem).
// Fragmentation-needed is never limited (path MTU discovery depends on it).
//
// Both budgets are GCRA (generic cell rate) buckets: one "theoretical arrival
// time" per bucket, so each is one atomic word updated by CAS and several
// workers share them without locks. The per-destination buckets live in a
// fixed-size table indexed by a keyed hash; a collision just shares a bucket,
// so an attacker spraying sources cannot grow memory, and the global budget
// bounds the total either way.
//
// Locking: atomics only.

import (
	"math/bits"
	"sync/atomic"

	"github.com/netfwd/netfwd/wire"
)

// RateLimitConfig sets the budgets; zero values take Linux's defaults.
type RateLimitConfig struct {
	PerSec       int   // global messages per second (1000)
	Burst        int   // global burst (50)
	PerDestMs    int64 // per-destination interval in ms (1000)
	PerDestBurst int   // per-destination burst (6)
}

const peerSlots = 4096

type icmpLimiter struct {
	globalTAT    atomic.Int64 // ns
	globalT      int64        // ns per message
	globalBurst  int64        // tolerance: (burst-1) intervals, ns
	peerT        int64
	peerBurst    int64
	peers        [peerSlots]atomic.Int64
	seed         uint64
	limitedCount atomic.Uint64
}

func newICMPLimiter(c RateLimitConfig, seed uint64) *icmpLimiter {
	if c.PerSec <= 0 {
		c.PerSec = 1000
	}
	if c.Burst <= 0 {
		c.Burst = 50
	}
	if c.PerDestMs <= 0 {
		c.PerDestMs = 1000
	}
	if c.PerDestBurst <= 0 {
		c.PerDestBurst = 6
	}
	l := &icmpLimiter{seed: seed}
	l.globalT = int64(1e9) / int64(c.PerSec)
	l.globalBurst = l.globalT * int64(c.Burst-1)
	l.peerT = c.PerDestMs * 1e6
	l.peerBurst = l.peerT * int64(c.PerDestBurst-1)
	return l
}

// rateLimited reports whether this ICMP type is subject to the limits.
func rateLimited(typ, code uint8) bool {
	switch typ {
	case wire.ICMPDestUnreach:
		return code != wire.ICMPCodeFragNeeded
	case wire.ICMPSourceQuench, wire.ICMPTimeExceeded, wire.ICMPParamProblem:
		return true
	}
	return false
}

// allow takes one message from dst's budget and the global one at time now
// (monotonic ns).
func (l *icmpLimiter) allow(typ, code uint8, dst wire.Addr4, now int64) bool {
	if !rateLimited(typ, code) {
		return true
	}
	hi, lo := bits.Mul64(uint64(dst)^l.seed, 0x9E3779B97F4A7C15)
	slot := &l.peers[(hi^lo)%peerSlots]
	if !gcra(slot, now, l.peerT, l.peerBurst) || !gcra(&l.globalTAT, now, l.globalT, l.globalBurst) {
		l.limitedCount.Add(1)
		return false
	}
	return true
}

// gcra admits an event at now if the bucket's theoretical arrival time is
// at most tau ahead of now (tau = (burst-1) intervals), and advances it by t.
func gcra(tat *atomic.Int64, now, t, tau int64) bool {
	for {
		old := tat.Load()
		next := max(old, now)
		if next-now > tau {
			return false
		}
		if tat.CompareAndSwap(old, next+t) {
			return true
		}
	}
}
