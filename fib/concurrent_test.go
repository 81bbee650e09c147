package fib

// Lock-free readers during 100,000 route changes: every answer a reader got
// must be the reference model's answer at a version the reader could have
// seen (between the versions published before and after its lookup).

import (
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/netfwd/netfwd/nexthop"
)

// fastLookup is the model's rule-order lookup in one pass per table (the
// plain one is too slow to run 100,000 times x probes).
func (m *model) fastLookup(a netip.Addr) *mroute {
	for _, id := range []uint32{TableLocal, TableMain} {
		var best *mroute
		for _, r := range m.tables[id] {
			if !r.prefix.Contains(a) || (best != nil && r.prefix.Bits() <= best.prefix.Bits()) {
				continue
			}
			if r.typ.hasNexthop() && m.dead(r) {
				continue
			}
			best = r
		}
		if best != nil && best.typ != Throw {
			return best
		}
	}
	return nil
}

type sample struct {
	probe  int32
	before uint64
	after  uint64
	nh     *nexthop.Nexthop
}

func TestConcurrentLookupsDuringChanges(t *testing.T) {
	changes := 100_000
	if testing.Short() {
		changes = 20_000
	}
	concurrentLookups(t, New(Options{}), changes)
}

// The same through the compiled structure, which follows each commit.
func TestConcurrentLookupsDuringChangesCompiled(t *testing.T) {
	concurrentLookups(t, New(Options{Compiled: true}), 20_000)
}

func concurrentLookups(t *testing.T, f *FIB, changes int) {
	m := newModel()
	setup := func(op func(tx *Txn) error, mop func() error) {
		tx := f.Begin(1)
		if err, merr := op(tx), mop(); err != nil || merr != nil {
			t.Fatalf("setup: %v / %v", err, merr)
		}
		tx.Commit()
	}
	for i, d := range devs {
		p := netip.MustParsePrefix("192.0.2.1/24")
		p = netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 0, byte(2 + i), 1}), 24)
		setup(func(tx *Txn) error { return tx.AddAddress(d, p) }, func() error { return m.addAddress(d, p) })
	}
	// Candidate routes over a small space: heavy local/main overlap.
	r := rand.New(rand.NewPCG(5, 5))
	g := &gen{r: r, m: m}
	var cands []RouteSpec
	for len(cands) < 48 {
		s := RouteSpec{Prefix: g.prefix(), Metric: uint32(r.IntN(2) * 10), MetricSet: true}
		switch r.IntN(6) {
		case 0:
			s.Type, s.TypeSet, s.Dev = Local, true, devs[r.IntN(4)]
		case 1:
			s.Type, s.TypeSet, s.Table = Throw, true, TableLocal
		case 2:
			s.Type, s.TypeSet = Blackhole, true
		default:
			s.Gateway = netip.AddrFrom4([4]byte{192, 0, byte(2 + r.IntN(4)), byte(2 + r.IntN(200))})
		}
		if s.Table == 0 && r.IntN(3) == 0 && s.Type != Local {
			s.Table = TableLocal
		}
		cands = append(cands, s)
	}
	probes := make([]netip.Addr, 96)
	for i := range probes {
		if i%2 == 0 {
			probes[i] = cands[i/2%len(cands)].Prefix.Addr()
		} else {
			probes[i] = g.addr()
		}
	}
	base := f.Version()

	// expected[v-base][p]: the model's answer after change v, as an interned
	// key. A change at prefix q can only change the answers of probes in q.
	ids := map[string]int32{"": 0}
	keys := []string{""}
	intern := func(k string) int32 {
		id, ok := ids[k]
		if !ok {
			id = int32(len(keys))
			ids[k] = id
			keys = append(keys, k)
		}
		return id
	}
	answer := func(a netip.Addr) int32 {
		if r := m.fastLookup(a); r != nil {
			return intern(r.nhKey())
		}
		return 0
	}
	expected := make([][]int32, 0, changes+1)
	first := make([]int32, len(probes))
	for i, a := range probes {
		first[i] = answer(a)
	}
	expected = append(expected, first)
	snap := func(q netip.Prefix) {
		row := append([]int32(nil), expected[len(expected)-1]...)
		for i, a := range probes {
			if q.Contains(a) {
				row[i] = answer(a)
			}
		}
		expected = append(expected, row)
	}

	var stop atomic.Bool
	var wg sync.WaitGroup
	readers := 2
	samples := make([][]sample, readers)
	for w := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]sample, 0, 1<<18)
			i := w
			for !stop.Load() && len(buf) < cap(buf) {
				p := i % len(probes)
				before := f.Version()
				nh := f.Lookup(probes[p])
				buf = append(buf, sample{int32(p), before, f.Version(), nh})
				i += 7
			}
			samples[w] = buf
		}()
	}

	present := make([]bool, len(cands))
	for range changes {
		i := r.IntN(len(cands))
		s := cands[i]
		tx := f.Begin(1)
		var err, merr error
		if present[i] {
			s.Gateway, s.Dev = netip.Addr{}, ""
			err, merr = tx.DelRoute(s), m.del(s)
		} else {
			err, merr = tx.AddRoute(s), m.insert(s, modeAdd)
		}
		if (err != nil) != (merr != nil) {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("change %v: fib %v, model %v", s, err, merr)
		}
		if err != nil {
			tx.Abort()
			continue
		}
		present[i] = !present[i]
		tx.Commit()
		snap(s.Prefix)
	}
	stop.Store(true)
	wg.Wait()

	checked := 0
	for _, buf := range samples {
		for _, s := range buf {
			got := ""
			if s.nh != nil {
				got = nhKeyOf(s.nh)
			}
			ok := false
			last := s.after
			if f.compiled != nil && int(last-base)+1 < len(expected) {
				last++ // the version being stored during the lookup
			}
			for v := s.before; v <= last; v++ {
				if keys[expected[v-base][s.probe]] == got {
					ok = true
					break
				}
			}
			if !ok {
				t.Fatalf("probe %s read %q between versions %d and %d; model had %q", probes[s.probe], got, s.before, s.after, keys[expected[s.before-base][s.probe]])
			}
			checked++
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d lookups checked", checked)
	}
	t.Logf("%d changes published, %d concurrent lookups checked", len(expected)-1, checked)
}
