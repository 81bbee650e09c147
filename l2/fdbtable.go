package l2

// fdbTable is hashMap (hashtable.go) specialised by hand for *fdbEntry: the
// FDB lookup is the hottest path of the bridge, and the generic version
// pays an indirect call per candidate slot (Go's shape dictionaries) and
// does not inline. The algorithm, slot protocol and resizing are identical;
// TestFDBTableAgainstMap and the hashMap tests cover both. Keep them in step.
//
// Code generated from hashtable.go by hand-applied substitutions; edit both.

import "sync/atomic"

type fdbBucket struct {
	keys [bucketSlots]atomic.Uint64
	vals [bucketSlots]atomic.Pointer[fdbEntry]
}

type fdbTableVersion struct {
	buckets    []fdbBucket
	mask       uint64
	seed, mult uint64
}

func newFDBTableVersion(nBuckets int) *fdbTableVersion {
	seed, mult := newSecrets()
	return &fdbTableVersion{buckets: make([]fdbBucket, nBuckets), mask: uint64(nBuckets - 1), seed: seed, mult: mult}
}

// home returns the first bucket to probe for k.
func (t *fdbTableVersion) home(k uint64) uint64 { return mixHome(k, t.seed, t.mult, t.mask) }

// fdbTable is the table: readers call get, the writer (holding the owner's
// lock) calls the *Locked methods.
type fdbTable struct {
	cur atomic.Pointer[fdbTableVersion]
	// Guarded by the owner's writer lock.
	live, tombs int
	// count mirrors live for lock-free readers (stats, benchmarks).
	count atomic.Int64
}

func (m *fdbTable) init() { m.cur.Store(newFDBTableVersion(minBuckets)) }

// get returns the entry with key k, or nil. Lock-free.
func (m *fdbTable) get(k uint64) *fdbEntry {
	t := m.cur.Load()
	i := t.home(k)
	for n := uint64(0); n <= t.mask; n++ {
		b := &t.buckets[i]
		for j := 0; j < bucketSlots; j++ {
			bk := b.keys[j].Load()
			if bk == k {
				if e := b.vals[j].Load(); e != nil && e.key == k {
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
func findFDBSlot(t *fdbTableVersion, k uint64) (*fdbBucket, uint64, int) {
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
func (m *fdbTable) putLocked(e *fdbEntry) (old *fdbEntry) {
	k := e.key
	t := m.cur.Load()
	if b, _, j := findFDBSlot(t, k); b != nil {
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
func (m *fdbTable) deleteLocked(k uint64) *fdbEntry {
	t := m.cur.Load()
	b, bi, j := findFDBSlot(t, k)
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
func (m *fdbTable) reclaimLocked(t *fdbTableVersion, bi uint64, j int) {
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
func (m *fdbTable) resizeLocked(n int) {
	nb := minBuckets
	for nb*bucketSlots*5 < n*8 {
		nb *= 2
	}
	old := m.cur.Load()
	t := newFDBTableVersion(nb)
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
func (m *fdbTable) each(fn func(e *fdbEntry)) {
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
func (m *fdbTable) nBuckets() int { return len(m.cur.Load().buckets) }
