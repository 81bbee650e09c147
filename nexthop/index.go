package nexthop

// The index table maps a nexthop's dense Index back to the object, for lookup
// structures that store 32-bit entries instead of pointers.
//
// Flow: the writer allocates an index when it creates a nexthop and stores the
// pointer in the slot; released indices wait in quarantine for a grace period
// before reuse, so a datapath reader that got an index from an older snapshot
// (microseconds ago) still finds the object it meant, never a newer one.
//
// Locking: slots are atomic pointers in fixed-size chunks, reached through a
// fixed directory of atomic chunk pointers (a lookup is two dependent loads).
// Readers never lock. The allocation state is writer-side (FIB writer lock).

import (
	"sync/atomic"
	"time"
)

const (
	chunkBits = 12
	chunkSize = 1 << chunkBits
)

type indexChunk [chunkSize]atomic.Pointer[Nexthop]

type quarantined struct {
	index uint32
	since time.Time
}

const numChunks = (maxIndex + 1) / chunkSize

type indexTable struct {
	dir [numChunks]atomic.Pointer[indexChunk]

	// Writer side.
	next       uint32 // lowest never-used index (index 0 means "no route")
	free       []uint32
	quarantine []quarantined // oldest first, from qhead on
	qhead      int
	grace      time.Duration
	now        func() time.Time
}

func (t *indexTable) init(grace time.Duration, now func() time.Time) {
	t.next = 1
	t.grace = grace
	t.now = now
}

// get returns the nexthop at index i, or nil. Lock-free.
func (t *indexTable) get(i uint32) *Nexthop {
	c := t.dir[(i>>chunkBits)%numChunks].Load()
	if c == nil {
		return nil
	}
	return c[i&(chunkSize-1)].Load()
}

// alloc returns an unused index and stores nh in its slot.
func (t *indexTable) alloc(nh *Nexthop) (uint32, bool) {
	t.reclaim()
	var i uint32
	if n := len(t.free); n > 0 {
		i = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		if t.next > maxIndex {
			return 0, false
		}
		i = t.next
		t.next++
		if t.dir[i>>chunkBits].Load() == nil {
			t.dir[i>>chunkBits].Store(new(indexChunk))
		}
	}
	t.dir[i>>chunkBits].Load()[i&(chunkSize-1)].Store(nh)
	return i, true
}

// unallocate returns an index that was never published (a rolled-back
// transaction's) straight to the free list.
func (t *indexTable) unallocate(i uint32) {
	t.dir[i>>chunkBits].Load()[i&(chunkSize-1)].Store(nil)
	t.free = append(t.free, i)
}

// release puts a published index in quarantine; its slot keeps pointing at
// the old nexthop until the index is reused.
func (t *indexTable) release(i uint32) {
	t.quarantine = append(t.quarantine, quarantined{index: i, since: t.now()})
}

// reclaim moves indices whose grace period is over to the free list. The
// quarantine is a FIFO (oldest first) consumed from qhead, compacted once
// half of it is consumed, so a reclaim costs what it frees.
func (t *indexTable) reclaim() {
	if t.qhead == len(t.quarantine) {
		return
	}
	now := t.now()
	for t.qhead < len(t.quarantine) && now.Sub(t.quarantine[t.qhead].since) >= t.grace {
		t.free = append(t.free, t.quarantine[t.qhead].index)
		t.qhead++
	}
	if t.qhead > len(t.quarantine)/2 {
		t.quarantine = append(t.quarantine[:0], t.quarantine[t.qhead:]...)
		t.qhead = 0
	}
}

// live counts allocated, non-quarantined indices.
func (t *indexTable) live() int {
	return int(t.next) - 1 - len(t.free) - (len(t.quarantine) - t.qhead)
}
