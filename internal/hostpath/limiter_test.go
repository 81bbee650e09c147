package hostpath

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// refBucket is the textbook token bucket, in integer nanoseconds of credit:
// the bucket holds up to burst*interval, refills one ns per ns, and a frame
// costs one interval. SetLimit keeps the debt (what is missing from a full
// bucket), which is what the GCRA's TAT carries over.
type refBucket struct {
	credit, capacity, iv, last int64
	burst                      int
	refused                    uint64
}

func newRefBucket(l Limit, now int64) *refBucket {
	iv := max(int64(math.Round(1e9/l.Rate)), 1)
	c := int64(l.Burst) * iv
	return &refBucket{credit: c, capacity: c, iv: iv, last: now, burst: l.Burst}
}

func (b *refBucket) advance(now int64) {
	if now > b.last {
		b.credit = min(b.capacity, b.credit+now-b.last)
		b.last = now
	}
}

func (b *refBucket) allowN(now int64, n int) bool {
	b.advance(now)
	need := int64(min(max(n, 1), b.burst)) * b.iv
	if b.credit >= need {
		b.credit -= need
		return true
	}
	b.refused++
	return false
}

func (b *refBucket) setLimit(l Limit, now int64) {
	b.advance(now)
	debt := b.capacity - b.credit
	nb := newRefBucket(l, now)
	b.iv, b.capacity, b.burst = nb.iv, nb.capacity, nb.burst
	b.credit = b.capacity - debt
}

func randomLimit(r *rand.Rand) Limit {
	rates := []float64{1, 3, 7, 10, 999, 1000, 123456, 1e6, 3e8}
	return Limit{Rate: rates[r.IntN(len(rates))], Burst: 1 + r.IntN(50)}
}

// TestLimiterMatchesTokenBucket drives the limiter and the reference bucket
// with the same random (monotonic) times, costs and limit changes: every
// decision and the refusal count must agree.
func TestLimiterMatchesTokenBucket(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 7))
		l := randomLimit(r)
		lim, err := NewLimiter(l)
		if err != nil {
			t.Fatal(err)
		}
		now := int64(time.Hour) + r.Int64N(int64(time.Second))
		ref := newRefBucket(l, now)
		for i := range 2000 {
			iv := ref.iv
			switch k := r.IntN(10); {
			case k < 4:
				now += r.Int64N(3*iv + 1)
			case k < 5:
				now += r.Int64N(iv*int64(ref.burst)*2 + 1)
			}
			if r.IntN(500) == 0 {
				nl := randomLimit(r)
				if err := lim.SetLimit(nl); err != nil {
					t.Fatal(err)
				}
				ref.setLimit(nl, now)
			}
			n := 1
			if r.IntN(4) == 0 {
				n = r.IntN(60)
			}
			got, want := lim.AllowN(now, n), ref.allowN(now, n)
			if got != want {
				t.Fatalf("seed %d step %d: limit %v, now %d, n %d: allowed %v, token bucket says %v", seed, i, lim.Limit(), now, n, got, want)
			}
		}
		if lim.Refused() != ref.refused {
			t.Fatalf("seed %d: refused %d, token bucket %d", seed, lim.Refused(), ref.refused)
		}
	}
}

// A caller with a stale clock never gets more than a full bucket.
func TestLimiterStaleClock(t *testing.T) {
	lim, _ := NewLimiter(Limit{Rate: 1000, Burst: 10})
	now := int64(time.Hour)
	allowed := 0
	for i := range 100 {
		if lim.AllowN(now-int64(i%5)*int64(time.Millisecond), 1) {
			allowed++
		}
	}
	if allowed != 10 {
		t.Fatalf("allowed %d at (nearly) one instant, want the burst 10", allowed)
	}
}

func TestLimiterUnlimitedAndChecks(t *testing.T) {
	lim, err := NewLimiter(NoLimit)
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		if !lim.AllowN(0, 1000) {
			t.Fatal("NoLimit refused")
		}
	}
	for _, bad := range []Limit{{}, {Rate: -1, Burst: 1}, {Rate: 10, Burst: 0}, {Rate: math.NaN(), Burst: 1}} {
		if _, err := NewLimiter(bad); err == nil {
			t.Errorf("NewLimiter(%v) accepted", bad)
		}
	}
	if got := (Limit{Rate: 250, Burst: 3}); func() Limit { l, _ := NewLimiter(got); return l.Limit() }() != got {
		t.Errorf("Limit() does not give back %v", got)
	}
}

// TestLimiterConcurrent: workers share one limiter on the real clock. What
// it allows can never exceed the burst plus the rate over the time taken,
// and every call is either allowed or counted as refused.
func TestLimiterConcurrent(t *testing.T) {
	l := Limit{Rate: 2000, Burst: 50}
	lim, _ := NewLimiter(l)
	var allowed, calls atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for time.Since(start) < 150*time.Millisecond {
				calls.Add(1)
				if lim.Allow() {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	limit := int64(float64(l.Burst) + l.Rate*elapsed + 1)
	if a := allowed.Load(); a > limit || a < int64(l.Burst) {
		t.Fatalf("allowed %d in %.3fs; want between the burst %d and %d", a, elapsed, l.Burst, limit)
	}
	if uint64(calls.Load()-allowed.Load()) != lim.Refused() {
		t.Fatalf("calls %d, allowed %d, refused %d: do not add up", calls.Load(), allowed.Load(), lim.Refused())
	}
}

func TestLimiterAllocs(t *testing.T) {
	lim, _ := NewLimiter(Limit{Rate: 100, Burst: 1})
	if a := testing.AllocsPerRun(1000, func() { lim.Allow() }); a != 0 {
		t.Fatalf("Allow allocates %v per call", a)
	}
}
