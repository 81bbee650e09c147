package l2

// fdbTable: the FDB's hash table, salted and resizable, with the entries
// stored in the table itself. It is not an internal/hashindex (key ->
// pointer): a destination lookup or a source refresh, once per frame each,
// would then touch the entry's line besides the table's, which costs the
// lookup at 1M entries most of its speed (docs/l2.md).
//
// Layout: open addressing over 64-byte buckets (one cache line) holding a
// sequence counter and 2 entries; an entry is its key (with the entry's
// flags in the key's 4 unused VID bits), its destination port-VLAN and its
// last-refresh time. A destination lookup or a source refresh touches one
// line of the table. Probing is linear by bucket; the bucket index is a
// keyed mix of the key with two random 64-bit secrets per table version
// (every resize rekeys), so an attacker cannot aim MACs at one bucket.
//
// Concurrency: readers never lock. Every change of a bucket's keys or
// destinations is made by the single writer (FDB.mu held) between two
// increments of the bucket's sequence counter (odd while changing); a
// reader takes the counter, reads the slot, and accepts what it read only
// if the counter is unchanged and even, so a slot reused between its loads
// can never pair one station's key with another's port. A reader that keeps
// finding the bucket changing gives up after a few tries and reports a
// miss (the frame is flooded, never stalled). Refresh times are single
// atomic stores outside the sequence (a refresh that lands on a slot just
// reused refreshes the new entry: harmless). Slot life cycle: empty ->
// used -> tombstone -> used ..., and a tombstone followed by an empty slot
// becomes empty again (see reclaimLocked); readers stop at an empty slot.
// Growth, shrinking and cleanup build a new version and publish it with one
// store; readers still on the old one see the entries as they were, and
// refreshes made there meanwhile are lost (the entry is refreshed again by
// its next frame).

import (
	"crypto/rand"
	"encoding/binary"
	"iter"
	"sync/atomic"
)

// Key flag bits (bits 12-15 of the key, above the 12-bit VID).
const (
	fdbLocal   uint64 = 1 << 12 // deliver to host
	fdbStatic  uint64 = 1 << 13 // not aged
	fdbSticky  uint64 = 1 << 14 // never moved by learning
	fdbLearned uint64 = 1 << 15 // learned by the datapath: counts against the limits
	fdbFlags          = fdbLocal | fdbStatic | fdbSticky | fdbLearned
)

const (
	slotEmpty         = 0
	slotTombstone     = ^uint64(0) // VID bits 0xffff: never a valid key
	fdbSlotsPerBucket = 2
	fdbMinBuckets     = 512 // 1K entries
	fdbReadTries      = 8
)

type fdbSlot struct {
	key     atomic.Uint64 // fdbKey | flags; slotEmpty or slotTombstone
	dst     atomic.Pointer[PortVLAN]
	updated atomic.Int64
}

type fdbBucket struct {
	seq   atomic.Uint64
	slots [fdbSlotsPerBucket]fdbSlot
	_     [8]byte
}

type fdbTableVersion struct {
	buckets    []fdbBucket
	mask       uint64
	seed, mult uint64
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

func newFDBTableVersion(nBuckets int) *fdbTableVersion {
	seed, mult := newSecrets()
	return &fdbTableVersion{buckets: make([]fdbBucket, nBuckets), mask: uint64(nBuckets - 1), seed: seed, mult: mult}
}

func (t *fdbTableVersion) home(k uint64) uint64 { return mixHome(k, t.seed, t.mult, t.mask) }

// fdbTable: lock-free get; the *Locked methods need the owner's lock.
type fdbTable struct {
	cur atomic.Pointer[fdbTableVersion]
	// Guarded by the owner's writer lock.
	live, tombs int
	count       atomic.Int64 // live, for lock-free readers
}

func (m *fdbTable) init() { m.cur.Store(newFDBTableVersion(fdbMinBuckets)) }

func slotKey(bk uint64) uint64 { return bk &^ fdbFlags }

// get returns the destination and flags of key k (flags 0, ok false if
// absent), and the slot (for refreshing its time). Lock-free.
func (m *fdbTable) get(k uint64) (dst *PortVLAN, flags uint64, s *fdbSlot, ok bool) {
	t := m.cur.Load()
	i := t.home(k)
	for n := uint64(0); n <= t.mask; n++ {
		b := &t.buckets[i]
		for try := 0; ; try++ {
			if try == fdbReadTries {
				return nil, 0, nil, false // bucket kept changing: report a miss
			}
			seq := b.seq.Load()
			if seq&1 != 0 {
				continue
			}
			found, end := false, false
			for j := range b.slots {
				bk := b.slots[j].key.Load()
				if slotKey(bk) == k && bk != slotTombstone {
					dst, flags, s, found = b.slots[j].dst.Load(), bk&fdbFlags, &b.slots[j], true
					break
				}
				if bk == slotEmpty {
					end = true
					break
				}
			}
			if b.seq.Load() != seq {
				continue
			}
			if found {
				return dst, flags, s, true
			}
			if end {
				return nil, 0, nil, false
			}
			break
		}
		i = (i + 1) & t.mask
	}
	return nil, 0, nil, false
}

// findLocked returns the bucket and slot of k in t (writer only).
func findFDBSlot(t *fdbTableVersion, k uint64) (*fdbBucket, uint64, int) {
	i := t.home(k)
	for n := uint64(0); n <= t.mask; n++ {
		b := &t.buckets[i]
		for j := range b.slots {
			bk := b.slots[j].key.Load()
			if bk == slotEmpty {
				return nil, 0, 0
			}
			if bk != slotTombstone && slotKey(bk) == k {
				return b, i, j
			}
		}
		i = (i + 1) & t.mask
	}
	return nil, 0, 0
}

// lookupLocked returns k's current flags and destination (writer side).
func (m *fdbTable) lookupLocked(k uint64) (dst *PortVLAN, flags uint64, ok bool) {
	b, _, j := findFDBSlot(m.cur.Load(), k)
	if b == nil {
		return nil, 0, false
	}
	return b.slots[j].dst.Load(), b.slots[j].key.Load() & fdbFlags, true
}

// setDstLocked changes k's destination (a move) and refresh time.
func (m *fdbTable) setDstLocked(k uint64, pv *PortVLAN, now int64) bool {
	b, _, j := findFDBSlot(m.cur.Load(), k)
	if b == nil {
		return false
	}
	b.seq.Add(1)
	b.slots[j].dst.Store(pv)
	b.seq.Add(1)
	b.slots[j].updated.Store(now)
	return true
}

// putLocked sets entry k (flags included in fk's flag bits) to pv, inserting
// or replacing. It returns the replaced entry's flags and destination.
func (m *fdbTable) putLocked(fk uint64, pv *PortVLAN, now int64) (oldFlags uint64, oldDst *PortVLAN, replaced bool) {
	k := slotKey(fk)
	t := m.cur.Load()
	if b, _, j := findFDBSlot(t, k); b != nil {
		s := &b.slots[j]
		oldFlags, oldDst = s.key.Load()&fdbFlags, s.dst.Load()
		b.seq.Add(1)
		s.dst.Store(pv)
		s.key.Store(fk)
		b.seq.Add(1)
		s.updated.Store(now)
		return oldFlags, oldDst, true
	}
	if (m.live+m.tombs+1)*8 > len(t.buckets)*fdbSlotsPerBucket*5 { // load > 5/8: 2-slot buckets probe more
		m.resizeLocked(m.live + 1)
		t = m.cur.Load()
	}
	i := t.home(k)
	for {
		b := &t.buckets[i]
		for j := range b.slots {
			s := &b.slots[j]
			switch bk := s.key.Load(); bk {
			case slotEmpty, slotTombstone:
				if bk == slotTombstone {
					m.tombs--
				}
				b.seq.Add(1)
				s.dst.Store(pv)
				s.updated.Store(now)
				s.key.Store(fk)
				b.seq.Add(1)
				m.live++
				m.count.Store(int64(m.live))
				return 0, nil, false
			}
		}
		i = (i + 1) & t.mask
	}
}

// deleteLocked removes k; it returns the removed entry's flags and
// destination.
func (m *fdbTable) deleteLocked(k uint64) (flags uint64, dst *PortVLAN, ok bool) {
	t := m.cur.Load()
	b, bi, j := findFDBSlot(t, k)
	if b == nil {
		return 0, nil, false
	}
	s := &b.slots[j]
	flags, dst = s.key.Load()&fdbFlags, s.dst.Load()
	b.seq.Add(1)
	s.key.Store(slotTombstone)
	s.dst.Store(nil)
	b.seq.Add(1)
	m.live--
	m.tombs++
	m.count.Store(int64(m.live))
	m.reclaimLocked(t, bi, j)
	if m.live*8 < len(t.buckets)*fdbSlotsPerBucket && len(t.buckets) > fdbMinBuckets {
		m.resizeLocked(m.live) // shrink below 1/8 load
	}
	return flags, dst, true
}

// reclaimLocked turns the tombstone at (bi, j) back into an empty slot if
// the next slot in probe order is empty, and then the tombstones just
// before it: no probe sequence reaches a live key through a slot followed
// by an empty one (slots become empty only by this rule, so by induction
// nothing was inserted past an empty slot). This keeps churn (learn new,
// age old) from filling the table with tombstones and lengthening probes.
func (m *fdbTable) reclaimLocked(t *fdbTableVersion, bi uint64, j int) {
	nb, nj := bi, j+1
	if nj == fdbSlotsPerBucket {
		nb, nj = (bi+1)&t.mask, 0
	}
	if t.buckets[nb].slots[nj].key.Load() != slotEmpty {
		return
	}
	for n := uint64(0); n <= (t.mask+1)*fdbSlotsPerBucket; n++ {
		b := &t.buckets[bi]
		if b.slots[j].key.Load() != slotTombstone {
			return
		}
		b.seq.Add(1)
		b.slots[j].key.Store(slotEmpty)
		b.seq.Add(1)
		m.tombs--
		if j--; j < 0 {
			bi, j = (bi-1)&t.mask, fdbSlotsPerBucket-1
		}
	}
}

// resizeLocked builds a version sized for n live entries (the smallest
// power of two with load at most 5/8, at least fdbMinBuckets) with fresh
// secrets, and publishes it.
func (m *fdbTable) resizeLocked(n int) {
	nb := fdbMinBuckets
	for nb*fdbSlotsPerBucket*5 < n*8 {
		nb *= 2
	}
	t := newFDBTableVersion(nb)
	for os := range m.cur.Load().live() {
		bk := os.key.Load()
		i := t.home(slotKey(bk))
	probe:
		for {
			b := &t.buckets[i]
			for s := range b.slots {
				if b.slots[s].key.Load() == slotEmpty {
					b.slots[s].dst.Store(os.dst.Load())
					b.slots[s].updated.Store(os.updated.Load())
					b.slots[s].key.Store(bk)
					break probe
				}
			}
			i = (i + 1) & t.mask
		}
	}
	m.tombs = 0
	m.cur.Store(t)
}

// live iterates the version's used slots (not empty, not tombstones).
func (t *fdbTableVersion) live() iter.Seq[*fdbSlot] {
	return func(yield func(*fdbSlot) bool) {
		for bi := range t.buckets {
			b := &t.buckets[bi]
			for j := range b.slots {
				if k := b.slots[j].key.Load(); k != slotEmpty && k != slotTombstone && !yield(&b.slots[j]) {
					return
				}
			}
		}
	}
}

// fdbView is a copy of one entry.
type fdbView struct {
	key, flags uint64
	dst        *PortVLAN
	updated    int64
}

// each calls fn with a copy of every entry of the current version
// (lock-free; entries changed meanwhile may or may not be seen).
func (m *fdbTable) each(fn func(e fdbView)) {
	for s := range m.cur.Load().live() {
		bk := s.key.Load()
		fn(fdbView{key: slotKey(bk), flags: bk & fdbFlags, dst: s.dst.Load(), updated: s.updated.Load()})
	}
}

func (m *fdbTable) nBuckets() int { return len(m.cur.Load().buckets) }
