package l2

// A lock-free-read hash table keyed by uint64, the FDB's and the neighbour
// table's index (seed 003: salted, resizable, flat from 1K to 1M entries).
//
// Layout: open addressing over buckets of 4 slots; a bucket is one 64-byte
// cache line holding 4 keys and 4 entry pointers, so a lookup compares keys
// without touching entries and usually reads one line of the table plus the
// entry it returns. Probing is linear by bucket. The bucket index comes from
// a keyed mix of the key with two random 64-bit secrets per table version:
// an attacker who cannot see the secrets cannot aim MACs at one bucket, and
// every resize (rehash) draws new secrets.
//
// Concurrency: any number of readers, one writer at a time (the owner's
// mutex). Readers load the current table version atomically and read slots
// with atomic loads. Slot life cycle: empty (key 0) -> used -> tombstone ->
// used ..., never back to empty except in a new version, so a reader that
// reaches an empty slot may stop. Insert stores the entry pointer before the
// key; delete stores the tombstone before clearing the pointer; a reader
// double-checks the entry's own key, so a slot reused between its two loads
// cannot return a wrong entry. Growth, shrinking and tombstone cleanup build
// a new version and publish it with one store; readers still on the old one
// see the entries as they were (RCU semantics).

import (
	"crypto/rand"
	"encoding/binary"
	"sync/atomic"
)

const (
	slotEmpty     = 0
	slotTombstone = ^uint64(0) // VID bits 0xffff: never a valid key
	bucketSlots   = 4
	minBuckets    = 256 // 1K slots
)

type keyedPtr[E any] interface {
	*E
	hashKey() uint64
}

type bucket[E any] struct {
	keys [bucketSlots]atomic.Uint64
	vals [bucketSlots]atomic.Pointer[E]
}

type tableVersion[E any] struct {
	buckets    []bucket[E]
	mask       uint64
	seed, mult uint64
}

func newTableVersion[E any](nBuckets int) *tableVersion[E] {
	seed, mult := newSecrets()
	return &tableVersion[E]{buckets: make([]bucket[E], nBuckets), mask: uint64(nBuckets - 1), seed: seed, mult: mult}
}

// newSecrets draws a table version's hash secrets.
func newSecrets() (seed, mult uint64) {
	var s [16]byte
	if _, err := rand.Read(s[:]); err != nil {
		panic("l2: no randomness for hash secrets: " + err.Error())
	}
	return binary.LittleEndian.Uint64(s[0:8]), binary.LittleEndian.Uint64(s[8:16]) | 1
}

// mixHome is the keyed mix: secret xor, secret odd multiplier, then a
// splitmix finaliser so every key bit reaches the low (index) bits.
func mixHome(k, seed, mult, mask uint64) uint64 {
	x := (k ^ seed) * mult
	x ^= x >> 29
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 32
	return x & mask
}

// home returns the first bucket to probe for k.
func (t *tableVersion[E]) home(k uint64) uint64 { return mixHome(k, t.seed, t.mult, t.mask) }

// hashMap is the table: readers call get, the writer (holding the owner's
// lock) calls the *Locked methods.
type hashMap[E any, P keyedPtr[E]] struct {
	cur atomic.Pointer[tableVersion[E]]
	// Guarded by the owner's writer lock.
	live, tombs int
	// count mirrors live for lock-free readers (stats, benchmarks).
	count atomic.Int64
}

func (m *hashMap[E, P]) init() { m.cur.Store(newTableVersion[E](minBuckets)) }

// get returns the entry with key k, or nil. Lock-free.
func (m *hashMap[E, P]) get(k uint64) *E {
	t := m.cur.Load()
	i := t.home(k)
	for n := uint64(0); n <= t.mask; n++ {
		b := &t.buckets[i]
		for j := 0; j < bucketSlots; j++ {
			bk := b.keys[j].Load()
			if bk == k {
				if e := b.vals[j].Load(); e != nil && P(e).hashKey() == k {
					return e
				}
			} else if bk == slotEmpty {
				return nil
			}
		}
		i = (i + 1) & t.mask
	}
	return nil
}

// findLocked returns the slot holding k in t, or nil.
func findSlot[E any, P keyedPtr[E]](t *tableVersion[E], k uint64) (*bucket[E], uint64, int) {
	i := t.home(k)
	for n := uint64(0); n <= t.mask; n++ {
		b := &t.buckets[i]
		for j := 0; j < bucketSlots; j++ {
			switch b.keys[j].Load() {
			case k:
				return b, i, j
			case slotEmpty:
				return nil, 0, 0
			}
		}
		i = (i + 1) & t.mask
	}
	return nil, 0, 0
}

// putLocked inserts e (whose key must not be present) or, if its key is
// present, replaces that entry. It returns the replaced entry, if any.
func (m *hashMap[E, P]) putLocked(e *E) (old *E) {
	k := P(e).hashKey()
	t := m.cur.Load()
	if b, _, j := findSlot[E, P](t, k); b != nil {
		old = b.vals[j].Load()
		b.vals[j].Store(e)
		return old
	}
	if (m.live+m.tombs+1)*4 > len(t.buckets)*bucketSlots*3 { // load > 3/4
		m.resizeLocked(m.live + 1)
		t = m.cur.Load()
	}
	i := t.home(k)
	for {
		b := &t.buckets[i]
		for j := 0; j < bucketSlots; j++ {
			switch b.keys[j].Load() {
			case slotEmpty:
				b.vals[j].Store(e)
				b.keys[j].Store(k)
				m.live++
				m.count.Store(int64(m.live))
				return nil
			case slotTombstone:
				b.vals[j].Store(e)
				b.keys[j].Store(k)
				m.live++
				m.tombs--
				m.count.Store(int64(m.live))
				return nil
			}
		}
		i = (i + 1) & t.mask
	}
}

// deleteLocked removes key k if present and returns its entry.
func (m *hashMap[E, P]) deleteLocked(k uint64) *E {
	t := m.cur.Load()
	b, bi, j := findSlot[E, P](t, k)
	if b == nil {
		return nil
	}
	e := b.vals[j].Load()
	b.keys[j].Store(slotTombstone)
	b.vals[j].Store(nil)
	m.live--
	m.tombs++
	m.reclaimLocked(t, bi, j)
	m.count.Store(int64(m.live))
	if m.live*bucketSlots*8 < len(t.buckets)*bucketSlots && len(t.buckets) > minBuckets {
		m.resizeLocked(m.live) // shrink below 1/8 load
	}
	return e
}

// reclaimLocked turns the tombstone at (bi, j) back into an empty slot if
// the next slot in probe order is empty, and then the tombstones just
// before it: no probe sequence reaches a live key through a slot followed
// by an empty one (slots become empty only by this rule, so by induction
// nothing was inserted past an empty slot). Readers that meet the new
// empty slot stop early, correctly. This keeps churn (learn new, age old)
// from filling the table with tombstones and lengthening probes.
func (m *hashMap[E, P]) reclaimLocked(t *tableVersion[E], bi uint64, j int) {
	nb, nj := bi, j+1
	if nj == bucketSlots {
		nb, nj = (bi+1)&t.mask, 0
	}
	if t.buckets[nb].keys[nj].Load() != slotEmpty {
		return
	}
	for n := uint64(0); n <= t.mask*bucketSlots; n++ {
		if t.buckets[bi].keys[j].Load() != slotTombstone {
			return
		}
		t.buckets[bi].keys[j].Store(slotEmpty)
		m.tombs--
		if j--; j < 0 {
			bi, j = (bi-1)&t.mask, bucketSlots-1
		}
	}
}

// resizeLocked builds a version sized for n live entries (the smallest
// power of two with load at most 5/8,
// at least minBuckets) with fresh secrets, and publishes it.
func (m *hashMap[E, P]) resizeLocked(n int) {
	nb := minBuckets
	for nb*bucketSlots*5 < n*8 {
		nb *= 2
	}
	old := m.cur.Load()
	t := newTableVersion[E](nb)
	for bi := range old.buckets {
		ob := &old.buckets[bi]
		for j := 0; j < bucketSlots; j++ {
			k := ob.keys[j].Load()
			if k == slotEmpty || k == slotTombstone {
				continue
			}
			e := ob.vals[j].Load()
			i := t.home(k)
		probe:
			for {
				b := &t.buckets[i]
				for s := 0; s < bucketSlots; s++ {
					if b.keys[s].Load() == slotEmpty {
						b.vals[s].Store(e)
						b.keys[s].Store(k)
						break probe
					}
				}
				i = (i + 1) & t.mask
			}
		}
	}
	m.tombs = 0
	m.cur.Store(t)
}

// each calls fn for every entry of the current version (lock-free; entries
// inserted or deleted meanwhile may or may not be seen).
func (m *hashMap[E, P]) each(fn func(e *E)) {
	t := m.cur.Load()
	for bi := range t.buckets {
		b := &t.buckets[bi]
		for j := 0; j < bucketSlots; j++ {
			k := b.keys[j].Load()
			if k == slotEmpty || k == slotTombstone {
				continue
			}
			if e := b.vals[j].Load(); e != nil {
				fn(e)
			}
		}
	}
}

// buckets reports the current number of buckets (tests, stats).
func (m *hashMap[E, P]) nBuckets() int { return len(m.cur.Load().buckets) }
