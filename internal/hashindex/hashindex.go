// Package hashindex is a hash index from uint64 keys to entries (*E) that
// datapath readers search without locks while one writer at a time changes
// it: the neighbour table's index and the bridge's neighbour-suppression
// table.
//
// An entry carries its key: E must be a struct whose first field is a
// uint64 holding the key, which never changes once the entry is in the
// index (Init checks the layout). Keys 0 and 1<<64-1 are reserved.
package hashindex

// Layout: open addressing with linear probing over slots of {key, entry}
// (the key is compared without touching the entry), in a version of a
// power-of-two size published through an atomic pointer. The home slot is a
// multiplicative (Fibonacci) hash of the key xor a random seed drawn per
// version, so colliding keys cannot be chosen from outside across rebuilds.
//
// Locking: the writer changes slots in place: an insert stores the entry,
// then the key; a delete turns the key into a tombstone, then clears the
// entry. A reader racing with the reuse of a slot may read an old key with
// a new entry: it checks the entry's own key and keeps probing, so it can at
// worst miss (callers fall back to their locked path, which is exact).
// Used slots (entries + tombstones) stay at or below half of a version, so
// every probe sequence ends at an empty slot. When tombstones or growth push
// past that, or the entries drop below 1/16, the writer builds a new version
// at a quarter load with a new seed and publishes it with one store; readers
// still on the old version see a frozen, consistent table.

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"iter"
	"math/bits"
	"reflect"
	"sync/atomic"
	"unsafe"
)

const (
	slotEmpty     = 0
	slotTombstone = ^uint64(0)
	minSlots      = 64
)

// Index is the index. Call Init before any other method.
type Index[E any] struct {
	cur atomic.Pointer[version[E]]
}

type slot[E any] struct {
	key atomic.Uint64
	e   atomic.Pointer[E]
}

type version[E any] struct {
	slots []slot[E] // immutable length; contents written by the writer
	shift uint8     // 64 - log2(len(slots)): the hash's top bits pick the slot
	seed  uint64
	// Writer-side.
	live int // entries
	used int // entries + tombstones
}

func newVersion[E any](nslots int) *version[E] {
	nslots = max(minSlots, 1<<bits.Len(uint(nslots-1)))
	var s [8]byte
	if _, err := rand.Read(s[:]); err != nil {
		panic("hashindex: no randomness for the hash seed: " + err.Error())
	}
	return &version[E]{
		slots: make([]slot[E], nslots),
		shift: uint8(64 - bits.TrailingZeros(uint(nslots))),
		seed:  binary.LittleEndian.Uint64(s[:]),
	}
}

// home is the key's first slot: one multiply, whose top bits depend on
// every key bit.
func (v *version[E]) home(key uint64) uint64 {
	return ((key ^ v.seed) * 0x9e3779b97f4a7c15) >> (v.shift & 63)
}

func (v *version[E]) next(i uint64) uint64 { return (i + 1) & uint64(len(v.slots)-1) }

// keyOf reads an entry's key, its first field (checked by Init).
func keyOf[E any](e *E) uint64 { return *(*uint64)(unsafe.Pointer(e)) }

// Init publishes an empty index. It panics if E does not start with its
// uint64 key.
func (ix *Index[E]) Init() {
	if t := reflect.TypeFor[E](); t.Kind() != reflect.Struct || t.NumField() == 0 ||
		t.Field(0).Type.Kind() != reflect.Uint64 {
		panic(fmt.Sprintf("hashindex: %v does not start with a uint64 key", t))
	}
	ix.cur.Store(newVersion[E](minSlots))
}

// Get returns the entry with key k, or nil. Lock-free and allocation-free.
func (ix *Index[E]) Get(k uint64) *E {
	if e := ix.Home(k); e != nil {
		return e
	}
	return ix.cur.Load().get(k)
}

// Home returns the entry with key k if it sits in its home slot, as most
// keys do, else nil (then Get finds it, or not). It inlines into the caller
// (no calls: the inliner's budget), which saves a hot path the call to Get.
func (ix *Index[E]) Home(k uint64) *E {
	v := ix.cur.Load()
	s := &v.slots[v.home(k)]
	if s.key.Load() == k {
		if e := s.e.Load(); e != nil && *(*uint64)(unsafe.Pointer(e)) == k { // keyOf, by hand: the inliner's budget
			return e
		}
	}
	return nil
}

func (v *version[E]) get(k uint64) *E {
	for i := v.home(k); ; i = v.next(i) {
		s := &v.slots[i]
		switch s.key.Load() {
		case k:
			if e := s.e.Load(); e != nil && keyOf(e) == k {
				return e
			}
		case slotEmpty:
			return nil
		}
	}
}

// Put inserts e, or replaces the entry with e's key by e. It returns the
// replaced entry (nil if there was none) and whether it published a new
// version (a rebuild). Writer only.
func (ix *Index[E]) Put(e *E) (old *E, rebuilt bool) {
	v := ix.cur.Load()
	k := keyOf(e)
	free := -1 // the first tombstone on the way, else the empty slot at its end
probe:
	for i := v.home(k); ; i = v.next(i) {
		s := &v.slots[i]
		switch s.key.Load() {
		case k:
			old = s.e.Load()
			s.e.Store(e)
			return old, false
		case slotTombstone:
			if free < 0 {
				free = int(i)
			}
		case slotEmpty:
			if free < 0 {
				free = int(i)
				v.used++
			}
			break probe
		}
	}
	s := &v.slots[free]
	s.e.Store(e)
	s.key.Store(k)
	v.live++
	if v.used*2 > len(v.slots) {
		ix.rebuild(v)
		return nil, true
	}
	return nil, false
}

// Delete removes the entry with key k and returns it (nil if there was
// none), and whether it published a new version. Writer only.
func (ix *Index[E]) Delete(k uint64) (old *E, rebuilt bool) {
	v := ix.cur.Load()
	for i := v.home(k); ; i = v.next(i) {
		s := &v.slots[i]
		switch s.key.Load() {
		case slotEmpty:
			return nil, false
		case k:
			old = s.e.Load()
			s.key.Store(slotTombstone)
			s.e.Store(nil)
			v.live--
			if len(v.slots) > minSlots && v.live*16 < len(v.slots) {
				ix.rebuild(v)
				return old, true
			}
			return old, false
		}
	}
}

// rebuild publishes a version holding v's entries at a load of at most a
// quarter.
func (ix *Index[E]) rebuild(v *version[E]) {
	nv := newVersion[E](v.live * 4)
	for i := range v.slots {
		s := &v.slots[i]
		if k := s.key.Load(); k != slotEmpty && k != slotTombstone {
			for j := nv.home(k); ; j = nv.next(j) {
				if t := &nv.slots[j]; t.key.Load() == slotEmpty {
					t.e.Store(s.e.Load())
					t.key.Store(k)
					break
				}
			}
			nv.live++
			nv.used++
		}
	}
	ix.cur.Store(nv)
}

// Len is the number of entries. Writer only.
func (ix *Index[E]) Len() int { return ix.cur.Load().live }

// Slots is the size of the current version (entries fill at most half).
func (ix *Index[E]) Slots() int { return len(ix.cur.Load().slots) }

// All iterates the entries of the current version. For the writer; readers
// racing with it may miss entries that are being changed.
func (ix *Index[E]) All() iter.Seq[*E] {
	return func(yield func(*E) bool) {
		v := ix.cur.Load()
		for i := range v.slots {
			s := &v.slots[i]
			if k := s.key.Load(); k == slotEmpty || k == slotTombstone {
				continue
			}
			if e := s.e.Load(); e != nil && !yield(e) {
				return
			}
		}
	}
}
