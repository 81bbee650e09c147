package hostpath

// Limiter: a token bucket shared by every datapath worker that punts into
// one twin, without locks. It is the generic cell rate algorithm (GCRA,
// "virtual scheduling"): one atomic word holds the theoretical arrival time
// (TAT) of the next frame; a frame is allowed when taking it would not push
// the TAT more than Burst intervals past now, and then one CAS moves the
// TAT on by one interval. That is exactly a bucket of Burst tokens refilled
// at Rate per second (the test checks it against such a bucket, in integer
// nanoseconds), with one word of state instead of two.
//
// Locking: none. Allow is a load and, when it allows, a CAS (retried only
// when another worker allowed a frame in between); refusals are a load and
// an add on a counter kept on its own cache line, so a flood of refused
// frames does not bounce the TAT's line between cores. SetLimit publishes
// new parameters with one atomic store.

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// Limit is a rate limit: Rate frames per second on average, Burst frames
// at once.
type Limit struct {
	Rate  float64 // frames per second; +Inf: no limit
	Burst int     // bucket depth in frames (at least 1)
}

// NoLimit lets everything through.
var NoLimit = Limit{Rate: math.Inf(1), Burst: 1}

func (l Limit) String() string {
	if math.IsInf(l.Rate, 1) {
		return "unlimited"
	}
	return fmt.Sprintf("%g/s burst %d", l.Rate, l.Burst)
}

func (l Limit) check() error {
	if math.IsNaN(l.Rate) || l.Rate <= 0 {
		return fmt.Errorf("rate %v: must be positive", l.Rate)
	}
	if l.Burst < 1 {
		return fmt.Errorf("burst %d: must be at least 1", l.Burst)
	}
	return nil
}

// gcra holds a limit in the algorithm's terms.
type gcra struct {
	interval  int64 // ns between frames at the rate
	tolerance int64 // Burst * interval: how far the TAT may run ahead of now
	burst     int
	unlimited bool
}

func newGCRA(l Limit) *gcra {
	if math.IsInf(l.Rate, 1) {
		return &gcra{unlimited: true}
	}
	iv := int64(math.Round(1e9 / l.Rate))
	if iv < 1 {
		iv = 1
	}
	return &gcra{interval: iv, tolerance: int64(l.Burst) * iv, burst: l.Burst}
}

// Limiter is a lock-free token bucket; the zero value is unusable, make
// one with NewLimiter.
type Limiter struct {
	params  atomic.Pointer[gcra]
	tat     atomic.Int64 // ns on the monotonic clock (monoNow)
	_       [48]byte     // keep refused off the TAT's cache line
	refused atomic.Uint64
}

// NewLimiter returns a limiter with a full bucket.
func NewLimiter(l Limit) (*Limiter, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	lim := &Limiter{}
	lim.params.Store(newGCRA(l))
	return lim, nil
}

// SetLimit changes the limit; the bucket's level carries over.
func (l *Limiter) SetLimit(lim Limit) error {
	if err := lim.check(); err != nil {
		return err
	}
	l.params.Store(newGCRA(lim))
	return nil
}

// Limit returns the current limit.
func (l *Limiter) Limit() Limit {
	p := l.params.Load()
	if p.unlimited {
		return NoLimit
	}
	return Limit{Rate: 1e9 / float64(p.interval), Burst: p.burst}
}

// Allow takes one token now.
func (l *Limiter) Allow() bool { return l.AllowN(monoNow(), 1) }

// AllowN takes n tokens at time now (ns, monotonic, as monoNow; callers may
// pass slightly stale times). n above the burst is charged as the burst, so
// a large GSO frame can pass a full bucket. It counts a refusal once per
// call.
func (l *Limiter) AllowN(now int64, n int) bool {
	p := l.params.Load()
	if p.unlimited {
		return true
	}
	n = min(max(n, 1), p.burst)
	inc := int64(n) * p.interval
	for {
		tat := l.tat.Load()
		next := max(tat, now) + inc
		if next-now > p.tolerance {
			l.refused.Add(1)
			return false
		}
		if l.tat.CompareAndSwap(tat, next) {
			return true
		}
	}
}

// Refused counts the calls that were refused.
func (l *Limiter) Refused() uint64 { return l.refused.Load() }

// epoch anchors monoNow; time.Since reads the monotonic clock.
var epoch = time.Now()

// monoNow is nanoseconds on the monotonic clock, starting well above zero
// so a fresh limiter (TAT 0) starts full.
func monoNow() int64 { return int64(time.Since(epoch)) + int64(time.Hour) }
