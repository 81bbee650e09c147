package neigh

// The neighbour index: an open-addressing hash (linear probing) from the
// packed key {ifindex, ip} to *Entry that datapath readers search without
// locks.
//
// Flow: a reader loads the current *entryIndex once and probes from the
// key's hash until it finds the key or an empty slot. Each slot holds the
// key (compared without touching the entry) and the entry pointer.
//
// Locking: the writer (Table.mu) changes slots in place: an insert
// stores the entry, then the key; a delete turns the key into a tombstone
// and clears the entry. A reader racing with the reuse of a tombstone may
// read an old key with a new entry: it checks the entry's own key and keeps
// probing, so it can at worst miss (the slow path, under the lock, then
// finds the entry). Load (live + tombstones) stays at or below half the
// slots, so every probe sequence ends at an empty slot. When tombstones or
// growth push it past that, the writer builds a new index with a new hash
// seed (like the kernel's neigh_hash_grow) and publishes it with one atomic
// store; readers still on the old index see a frozen, consistent table
// whose removed entries report NUDNone.

import (
	"math/bits"
	"sync/atomic"
)

const (
	slotEmpty     = 0
	slotTombstone = 1
	indexMinSlots = 64
)

type indexSlot struct {
	key atomic.Uint64
	n   atomic.Pointer[Entry]
}

type entryIndex struct {
	slots []indexSlot // immutable length; slot contents written under Table.mu
	mask  uint64
	shift uint8 // 64 - log2(len(slots)): the hash's top bits pick the slot
	seed  uint64
	// Writer-side, guarded by Table.mu.
	live int // entries
	used int // entries + tombstones
}

func newEntryIndex(nslots int) *entryIndex {
	nslots = max(indexMinSlots, 1<<bits.Len(uint(nslots-1)))
	return &entryIndex{
		slots: make([]indexSlot, nslots),
		mask:  uint64(nslots - 1),
		shift: uint8(64 - bits.TrailingZeros(uint(nslots))),
		seed:  randomSeed(),
	}
}

// home is the key's first slot: Fibonacci hashing of the seeded key (one
// multiply; the top bits depend on every key bit). The seed is new for every
// index, so colliding keys cannot be chosen from outside across rebuilds;
// the table's limits bound what a collision flood could do anyway.
func (ix *entryIndex) home(key uint64) uint64 {
	return ((key ^ ix.seed) * 0x9e3779b97f4a7c15) >> ix.shift
}

// lookup is the datapath search.
func (ix *entryIndex) lookup(key uint64) *Entry {
	slots, mask := ix.slots, ix.mask
	for i := ix.home(key); ; i = (i + 1) & mask {
		s := &slots[i]
		k := s.key.Load()
		if k == key {
			if n := s.n.Load(); n != nil && n.key == key {
				return n
			}
		} else if k == slotEmpty {
			return nil
		}
	}
}

// insertLocked adds n, which must not be present. It reports whether the
// index must be rebuilt (too many used slots).
func (ix *entryIndex) insertLocked(n *Entry) (rebuild bool) {
	slots, mask := ix.slots, ix.mask
	for i := ix.home(n.key); ; i = (i + 1) & mask {
		s := &slots[i]
		switch s.key.Load() {
		case slotEmpty:
			ix.used++
			fallthrough
		case slotTombstone:
			s.n.Store(n)
			s.key.Store(n.key)
			ix.live++
			return ix.used*2 > len(slots)
		}
	}
}

// deleteLocked removes n; it reports whether the index should shrink.
func (ix *entryIndex) deleteLocked(n *Entry) (rebuild bool) {
	slots, mask := ix.slots, ix.mask
	for i := ix.home(n.key); ; i = (i + 1) & mask {
		s := &slots[i]
		k := s.key.Load()
		if k == slotEmpty {
			return false // not present
		}
		if k == n.key && s.n.Load() == n {
			s.key.Store(slotTombstone)
			s.n.Store(nil)
			ix.live--
			return len(slots) > indexMinSlots && ix.live*16 < len(slots)
		}
	}
}

// rebuiltLocked returns a fresh index holding ix's live entries, sized for a
// load of at most a quarter.
func (ix *entryIndex) rebuiltLocked() *entryIndex {
	nx := newEntryIndex(ix.live * 4)
	for i := range ix.slots {
		s := &ix.slots[i]
		if k := s.key.Load(); k > slotTombstone {
			nx.insertLocked(s.n.Load())
		}
	}
	return nx
}

// indexInsertLocked and indexDeleteLocked keep the published index current.
func (t *Table) indexInsertLocked(n *Entry) {
	ix := t.index.Load()
	if ix.insertLocked(n) {
		t.index.Store(ix.rebuiltLocked())
		t.c.hashRebuilds++
	}
}

func (t *Table) indexDeleteLocked(n *Entry) {
	ix := t.index.Load()
	if ix.deleteLocked(n) {
		t.index.Store(ix.rebuiltLocked())
		t.c.hashRebuilds++
	}
}
