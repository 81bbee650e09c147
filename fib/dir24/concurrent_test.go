// Concurrency test of the compiled FIB: lookups on several goroutines while
// one writer applies thousands of changes, every answer checked against the
// values its address had while the lookup ran. Meant for -race.

package dir24

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/netfwd/netfwd/internal/race"
	"github.com/netfwd/netfwd/wire"
)

// changeStep is one writer step, with the parent the FIB writer would pass.
type changeStep struct {
	p         netip.Prefix
	v         uint32
	del       bool
	parent    netip.Prefix
	parentVal uint32
	hasParent bool
}

func (ch changeStep) apply(c *Table) error {
	if ch.del {
		return c.Delete(ch.p, ch.parent, ch.parentVal, ch.hasParent)
	}
	return c.Set(ch.p, ch.v)
}

// concurrentScript draws n changes concentrated on 16 /24s (prefixes
// /25-/32 come and go, so groups are allocated, collapsed, freed and reused
// all the time), with /16-/24, the odd /8 and default-route changes over
// them (many probes answer from the default), and returns
// the probe addresses and want[k*len(probes)+i], the model's answer for probe
// i after change k (k = 0 is the empty table).
func concurrentScript(n int, seed uint64) ([]changeStep, []wire.Addr4, []uint32) {
	rng := rand.New(rand.NewPCG(seed, 1))
	base := u32(netip.MustParseAddr("10.20.0.0"))
	probes := make([]wire.Addr4, 128)
	for i := range probes {
		probes[i] = base | wire.Addr4(rng.Uint32N(16<<8))
	}
	m := refModel{}
	var present []netip.Prefix
	changes := make([]changeStep, 0, n)
	want := make([]uint32, 0, (n+1)*len(probes))
	want = append(want, make([]uint32, len(probes))...)
	for range n {
		var ch changeStep
		if len(present) > 0 && rng.IntN(5) < 2 {
			j := rng.IntN(len(present))
			ch.p = present[j]
			present[j] = present[len(present)-1]
			present = present[:len(present)-1]
			ch.del = true
			delete(m, ch.p)
			ch.parent, ch.parentVal, ch.hasParent = m.parent(ch.p)
		} else {
			var bits int
			switch r := rng.IntN(100); {
			case r < 68:
				bits = 25 + rng.IntN(8)
			case r < 94:
				bits = 16 + rng.IntN(9)
			case r < 96:
				bits = 8
			default: // the default route: one word, read beside the entries
				bits = 0
			}
			ch.p = netip.PrefixFrom(addrOf(base|wire.Addr4(rng.Uint32N(16<<8))), bits).Masked()
			ch.v = 1 + rng.Uint32N(1000)
			if _, ok := m[ch.p]; !ok {
				present = append(present, ch.p)
			}
			m[ch.p] = ch.v
		}
		changes = append(changes, ch)
		prev := want[len(want)-len(probes):]
		first, last := prefixRange(ch.p)
		for i, a := range probes {
			if a >= first && a <= last {
				want = append(want, m.lookup(a))
			} else {
				want = append(want, prev[i])
			}
		}
	}
	return changes, probes, want
}

// TestConcurrent: readers record the writer's version before and
// after each lookup; the answer must be the model's answer at one of the
// versions in between, or at the next one (the change in progress when the
// lookup ended may be partly visible). The second level starts with one
// group, so it also grows under the readers.
func TestConcurrent(t *testing.T) {
	n := 100000
	if testing.Short() || race.Enabled {
		n = 20000
	}
	changes, probes, want := concurrentScript(n, 3)
	np := len(probes)
	c := newTable(1)
	var version atomic.Int64 // number of changes fully applied
	var done atomic.Bool
	var lookups, during atomic.Int64

	check := func(i int, got uint32, v0, v1 int64) error {
		hi := min(v1+1, int64(n))
		for k := v0; k <= hi; k++ {
			if want[int(k)*np+i] == got {
				return nil
			}
		}
		return fmt.Errorf("probe %v: got %d, versions %d..%d had %v", addrOf(probes[i]), got, v0, hi,
			wantRange(want, np, i, v0, hi))
	}

	// Two readers (single and batch) and the writer share the machine;
	// readers yield often so the writer makes progress on two cores.
	const readers = 2
	errs := make(chan error, readers)
	var wg sync.WaitGroup
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 9))
			out := make([]uint32, np)
			var nLookups, nDuring int64
			defer func() { lookups.Add(nLookups); during.Add(nDuring) }()
			for iter := 0; !done.Load(); iter++ {
				if iter%8 == 7 {
					runtime.Gosched()
				}
				if r == 0 { // single lookups
					i := rng.IntN(np)
					v0 := version.Load()
					got := c.Lookup(probes[i])
					v1 := version.Load()
					if err := check(i, got, v0, v1); err != nil {
						errs <- fmt.Errorf("Lookup: %w", err)
						return
					}
					nLookups++
					if v0 != v1 {
						nDuring++
					}
					continue
				}
				v0 := version.Load()
				c.LookupBatch(probes, out)
				v1 := version.Load()
				for i, got := range out {
					if err := check(i, got, v0, v1); err != nil {
						errs <- fmt.Errorf("LookupBatch: %w", err)
						return
					}
				}
				nLookups += int64(np)
				if v0 != v1 {
					nDuring += int64(np)
				}
			}
		}()
	}
	for k, ch := range changes {
		if err := ch.apply(c); err != nil {
			t.Fatal(err)
		}
		version.Store(int64(k + 1))
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if during.Load() == 0 {
		t.Fatalf("no lookup overlapped a change (%d lookups): test proves nothing", lookups.Load())
	}
	// The final state is exact.
	last := want[n*np:]
	for i, a := range probes {
		if got := c.Lookup(a); got != last[i] {
			t.Fatalf("final: %v = %d, want %d", addrOf(a), got, last[i])
		}
	}
	if err := checkInvariants(c); err != nil {
		t.Fatal(err)
	}
	s := c.Stats()
	t.Logf("%d changes, %d lookups (%d overlapping a change), groups live %d free %d cap %d",
		n, lookups.Load(), during.Load(), s.Groups, s.FreeGroups, s.GroupCap)
}

func wantRange(want []uint32, np, i int, lo, hi int64) []uint32 {
	var vs []uint32
	for k := lo; k <= hi; k++ {
		vs = append(vs, want[int(k)*np+i])
	}
	return vs
}
