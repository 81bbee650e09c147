package l2

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

type testEntry struct {
	key uint64
	val int
}

func (e *testEntry) hashKey() uint64 { return e.key }

// TestHashMapAgainstMap runs random inserts, replaces and deletes against a
// plain map, across growth, tombstone cleanup and shrinking.
func TestHashMapAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var m hashMap[testEntry, *testEntry]
	m.init()
	ref := map[uint64]int{}
	keys := func() uint64 { return uint64(1 + rng.IntN(20000)) }
	for i := 0; i < 400000; i++ {
		k := keys()
		switch op := rng.IntN(10); {
		case op < 5 || (i > 200000 && op < 3):
			m.putLocked(&testEntry{key: k, val: i})
			ref[k] = i
		case op < 8:
			e := m.deleteLocked(k)
			if _, ok := ref[k]; ok != (e != nil) {
				t.Fatalf("delete %d: got %v, ref has %v", k, e, ok)
			}
			delete(ref, k)
		default:
			e := m.get(k)
			v, ok := ref[k]
			if ok != (e != nil) || (ok && e.val != v) {
				t.Fatalf("get %d: got %+v, ref %v %v", k, e, v, ok)
			}
		}
		if i == 250000 {
			// Delete most: the table must shrink.
			for k := range ref {
				if rng.IntN(20) != 0 {
					m.deleteLocked(k)
					delete(ref, k)
				}
			}
		}
	}
	if int(m.count.Load()) != len(ref) {
		t.Fatalf("count %d, ref %d", m.count.Load(), len(ref))
	}
	n := 0
	m.each(func(e *testEntry) {
		n++
		if ref[e.key] != e.val {
			t.Fatalf("each: %d=%d, ref %d", e.key, e.val, ref[e.key])
		}
	})
	if n != len(ref) {
		t.Fatalf("each saw %d, ref %d", n, len(ref))
	}
}

// TestHashMapConcurrentReaders: readers never miss a key that is present
// for the whole test, while a writer inserts, deletes and resizes.
func TestHashMapConcurrentReaders(t *testing.T) {
	var m hashMap[testEntry, *testEntry]
	m.init()
	var mu sync.Mutex
	const stable = 500
	for k := uint64(1); k <= stable; k++ {
		m.putLocked(&testEntry{key: k, val: int(k)})
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 0))
			for !stop.Load() {
				k := uint64(1 + rng.IntN(stable))
				e := m.get(k)
				if e == nil || e.val != int(k) {
					t.Errorf("stable key %d: got %+v", k, e)
					return
				}
			}
		}(uint64(r))
	}
	rng := rand.New(rand.NewPCG(9, 9))
	for i := 0; i < 200000; i++ {
		k := uint64(stable + 1 + rng.IntN(50000))
		mu.Lock()
		if rng.IntN(2) == 0 {
			m.putLocked(&testEntry{key: k, val: int(k)})
		} else {
			m.deleteLocked(k)
		}
		mu.Unlock()
	}
	stop.Store(true)
	wg.Wait()
}

// TestHashSaltDiffers: two tables place the same keys differently (the
// secret is per table version), so bucket collisions found on one do not
// carry over.
func TestHashSaltDiffers(t *testing.T) {
	a, b := newTableVersion[testEntry](1024), newTableVersion[testEntry](1024)
	same := 0
	for k := uint64(1); k <= 1000; k++ {
		if a.home(k<<16) == b.home(k<<16) {
			same++
		}
	}
	if same > 50 { // ~1 expected
		t.Fatalf("%d of 1000 keys share a bucket in two tables", same)
	}
}

// TestFDBTableAgainstMap: the hand-specialised FDB table against a map.
func TestFDBTableAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var m fdbTable
	m.init()
	ref := map[uint64]*fdbEntry{}
	for i := 0; i < 300000; i++ {
		k := uint64(1+rng.IntN(30000)) << 16
		switch op := rng.IntN(10); {
		case op < 5:
			e := &fdbEntry{key: k}
			m.putLocked(e)
			ref[k] = e
		case op < 8:
			e := m.deleteLocked(k)
			if e != ref[k] {
				t.Fatalf("delete %x: %p, ref %p", k, e, ref[k])
			}
			delete(ref, k)
		default:
			if e := m.get(k); e != ref[k] {
				t.Fatalf("get %x: %p, ref %p", k, e, ref[k])
			}
		}
		if i == 200000 {
			for k := range ref {
				m.deleteLocked(k)
				delete(ref, k)
			}
			if m.nBuckets() != minBuckets {
				t.Fatalf("empty table has %d buckets", m.nBuckets())
			}
		}
	}
	n := 0
	m.each(func(e *fdbEntry) {
		n++
		if ref[e.key] != e {
			t.Fatalf("each: %x", e.key)
		}
	})
	if n != len(ref) || int(m.count.Load()) != n {
		t.Fatalf("each %d, count %d, ref %d", n, m.count.Load(), len(ref))
	}
}
