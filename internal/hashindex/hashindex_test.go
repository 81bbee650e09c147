package hashindex

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/netfwd/netfwd/internal/race"
)

type entry struct {
	key uint64
	val int
}

// Random inserts, replaces and deletes against a plain map, in phases that
// grow the index to ~20K keys, shrink it to a few hundred and grow it again:
// tombstones, their reuse and rebuilds both ways.
func TestAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var ix Index[entry]
	ix.Init()
	ref := map[uint64]*entry{}
	ops, rebuilds := 400_000, 0
	if race.Enabled {
		ops = 80_000
	}
	for i := range ops {
		span := 20_000
		if (i/50_000)%2 == 1 {
			span = 500
		}
		k := uint64(1 + rng.IntN(span))
		switch op := rng.IntN(10); {
		case op < 4:
			e := &entry{key: k, val: i}
			old, rebuilt := ix.Put(e)
			if old != ref[k] {
				t.Fatalf("op %d: put %d replaced %v, model had %v", i, k, old, ref[k])
			}
			ref[k] = e
			if rebuilt {
				rebuilds++
			}
		case op < 7 || (i/50_000)%2 == 1:
			old, rebuilt := ix.Delete(k)
			if old != ref[k] {
				t.Fatalf("op %d: delete %d returned %v, model had %v", i, k, old, ref[k])
			}
			delete(ref, k)
			if rebuilt {
				rebuilds++
			}
		}
		if got := ix.Get(k); got != ref[k] {
			t.Fatalf("op %d: get %d = %v, model %v", i, k, got, ref[k])
		}
	}
	if ix.Len() != len(ref) {
		t.Fatalf("len %d, model %d", ix.Len(), len(ref))
	}
	seen := 0
	for e := range ix.All() {
		seen++
		if ref[e.key] != e {
			t.Fatalf("All yields %+v, model %v", e, ref[e.key])
		}
	}
	if seen != len(ref) {
		t.Fatalf("All yields %d entries, model %d", seen, len(ref))
	}
	for k, e := range ref {
		if ix.Get(k) != e {
			t.Fatalf("key %d lost", k)
		}
	}
	if rebuilds < 4 {
		t.Fatalf("only %d rebuilds", rebuilds)
	}
}

// Readers during churn: a stable set of keys is never missed (deletes and
// rebuilds of other keys notwithstanding) and no reader ever gets an entry
// with another key. Run with -race.
func TestConcurrentReaders(t *testing.T) {
	var ix Index[entry]
	ix.Init()
	const stable = 64
	for k := uint64(1); k <= stable; k++ {
		ix.Put(&entry{key: k})
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := range 3 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 7))
			for !stop.Load() {
				k := uint64(1 + r.IntN(5000))
				e := ix.Get(k)
				switch {
				case e != nil && e.key != k:
					errs <- "entry with another key"
					return
				case e == nil && k <= stable:
					errs <- "stable key missed"
					return
				}
			}
		})
	}
	r := rand.New(rand.NewPCG(9, 9))
	writes := 200_000
	if race.Enabled {
		writes = 50_000
	}
	for range writes {
		k := uint64(stable + 1 + r.IntN(5000-stable))
		if r.IntN(2) == 0 {
			ix.Put(&entry{key: k})
		} else {
			ix.Delete(k)
		}
	}
	stop.Store(true)
	wg.Wait()
	select {
	case e := <-errs:
		t.Fatal(e)
	default:
	}
}

// Each version draws its own seed: keys that share a home slot in one
// version are spread in the next.
func TestSeedPerVersion(t *testing.T) {
	a, b := newVersion[entry](1024), newVersion[entry](1024)
	same := 0
	for k := uint64(1); k <= 1000; k++ {
		if a.home(k<<32) == b.home(k<<32) {
			same++
		}
	}
	if same > 50 { // ~1 expected
		t.Fatalf("%d of 1000 keys share a slot in two versions", same)
	}
}

func TestGetAllocs(t *testing.T) {
	var ix Index[entry]
	ix.Init()
	ix.Put(&entry{key: 7})
	if n := testing.AllocsPerRun(1000, func() { ix.Get(7); ix.Get(8) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

func TestInitChecksLayout(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("an entry without a leading uint64 key was accepted")
		}
	}()
	var ix Index[struct {
		name string
		key  uint64
	}]
	ix.Init()
}
