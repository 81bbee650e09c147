package dir24

// Incremental updates: the writer calls Set and Delete for each change of
// the prefix set, in order.
//
// Flow: Set(p, v) writes entry (v, len p) over every entry of p's range whose
// prefix length is <= len p (p itself or something shorter that p now
// overrides); entries of longer prefixes stay. A prefix longer than /24 first
// gives its /24 a group (filled with the /24's plain entry) if it has none.
// Delete(p, parent...) writes the parent's entry over every entry of p's
// range whose length is exactly len p (those are p's: two prefixes of one
// length containing one address are the same prefix). Deleting a prefix
// longer than /24 may leave its group with only entries of length <= 24,
// which are then all equal: the group collapses back into one plain tbl24
// entry and is freed. So a /24 change touches one entry (or one group), a /8
// change at most 65,536 first-level entries, and a /0 change only the
// default word (entries standing for "no prefix but the /0" are 0).
//
// Locking: mu serialises writers; every entry and tag a reader can reach is
// written with an atomic store, and an entry that names a group is stored
// only after that group is complete (see dir24.go for the reader side).

import (
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"unsafe"
)

// Errors of Set/Delete/Build. The structure is unchanged when one is
// returned.
var (
	ErrNotIPv4  = errors.New("dir24: prefix is not IPv4")
	ErrValue    = fmt.Errorf("dir24: value out of range 0..%d", MaxValue)
	ErrParent   = errors.New("dir24: parent does not strictly contain the prefix")
	ErrTooLarge = errors.New("dir24: second-level table full")
)

// Set makes v the value of prefix p (insert or update). v is 0..MaxValue;
// 0 means "no route" and is a legal value (a prefix whose route resolves to
// nothing still hides shorter prefixes). p is masked to its length.
func (c *Table) Set(p netip.Prefix, v uint32) error {
	addr, bits, err := prefixBits(p)
	if err != nil {
		return err
	}
	if v > MaxValue {
		return ErrValue
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if bits == 0 {
		c.setDefaultLocked(v)
		return nil
	}
	return c.setLocked(addr, bits, plainEntry(v, bits))
}

// setDefaultLocked makes v the /0's value: one store, whatever the table.
func (c *Table) setDefaultLocked(v uint32) {
	gen := c.def.Load()>>32 + 1
	c.def.Store(gen<<32 | uint64(v))
}

// Delete removes prefix p. The caller names the longest remaining prefix
// strictly containing p and its value (hasParent false: none, addresses of p
// not covered by longer prefixes then answer 0). The merged trie knows it:
// its LookupPrefixLPM(p) once p is deleted. The structure itself keeps no
// prefix list. Deleting a prefix that is not present changes nothing.
func (c *Table) Delete(p netip.Prefix, parent netip.Prefix, parentVal uint32, hasParent bool) error {
	addr, bits, err := prefixBits(p)
	if err != nil {
		return err
	}
	repl := uint32(0) // no parent, or the /0: default
	if hasParent {
		paddr, pbits, err := prefixBits(parent)
		if err != nil {
			return err
		}
		if pbits >= bits || (pbits > 0 && (addr^paddr)>>(32-pbits) != 0) {
			return ErrParent
		}
		if parentVal > MaxValue {
			return ErrValue
		}
		if pbits > 0 {
			repl = plainEntry(parentVal, pbits)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if bits == 0 {
		c.setDefaultLocked(0)
		return nil
	}
	c.deleteLocked(addr, bits, repl)
	return nil
}

// isGroup tells an extended entry (a group index) from plain and default.
func isGroup(e uint32) bool { return e-1 < plainBit-1 }

// prefixBits returns p's masked address as a uint32 and its length.
func prefixBits(p netip.Prefix) (uint32, int, error) {
	if !p.IsValid() || !p.Addr().Is4() {
		return 0, 0, ErrNotIPv4
	}
	b := p.Masked().Addr().As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]), p.Bits(), nil
}

// setLocked writes ent (length bits >= 1) over p = addr/bits.
func (c *Table) setLocked(addr uint32, bits int, ent uint32) error {
	t24 := &c.tbl24
	if bits <= 24 {
		// Plain entries of prefixes longer than p, [lim, 2^32), stay; one
		// unsigned compare skips them.
		lim := plainBit | uint32(bits+1)<<depthShift
		first := addr >> 8
		if bits == 24 {
			if e := t24[first]; c.setEntryLocked(e, bits, ent, lim) != e {
				atomic.StoreUint32(&t24[first], ent)
			}
			return nil
		}
		// Pairs of entries, one 64-bit store for both (store2).
		last := first + 1<<(24-bits) - 1
		for i := first; i < last && i+1 < tbl24Len; i += 2 {
			e0, e1 := t24[i], t24[i+1]
			if e0 >= lim && e1 >= lim {
				continue
			}
			n0, n1 := c.setEntryLocked(e0, bits, ent, lim), c.setEntryLocked(e1, bits, ent, lim)
			if n0 != e0 || n1 != e1 {
				store2(&t24[i], n0, n1)
			}
		}
		return nil
	}
	i := addr >> 8
	lo := int(addr & 0xff)
	n := 1 << (32 - bits)
	e := t24[i]
	if isGroup(e) {
		c.groupSetLocked(e&valueMask, lo, n, bits, ent)
		return nil
	}
	// The /24 gets a group: every address answers e (plain or default)
	// except p's range.
	g, t, err := c.allocGroupLocked()
	if err != nil {
		return err
	}
	grp := t.entries[uint(g)*groupLen:][:groupLen]
	for j := 0; j+1 < len(grp); j += 2 {
		x0, x1 := e, e
		if j >= lo && j < lo+n {
			x0 = ent
		}
		if j+1 >= lo && j+1 < lo+n {
			x1 = ent
		}
		store2(&grp[j], x0, x1)
	}
	gen := atomic.LoadUint64(&t.tags[g])>>32 + 1
	atomic.StoreUint64(&t.tags[g], gen<<32|tagLive|uint64(i))
	atomic.StoreUint32(&t24[i], g)
	return nil
}

// setEntryLocked returns what first-level entry e becomes when ent (length
// bits) is set over it: ent if e is default or plain and no longer than
// bits, else e. An extended e is updated inside its group and stays.
func (c *Table) setEntryLocked(e uint32, bits int, ent, lim uint32) uint32 {
	switch {
	case e >= lim:
		return e
	case isGroup(e):
		c.groupSetLocked(e&valueMask, 0, groupLen, bits, ent)
		return e
	}
	return ent
}

// groupSetLocked writes ent (length bits) over entries [lo, lo+n) of group g
// whose length is <= bits.
func (c *Table) groupSetLocked(g uint32, lo, n, bits int, ent uint32) {
	grp := c.groups.Load().entries[uint(g)*groupLen:][:groupLen]
	for j := lo; j < lo+n && j < len(grp); j++ {
		if e := grp[j]; depth(e) <= bits && e != ent {
			atomic.StoreUint32(&grp[j], ent)
		}
	}
}

// deleteLocked writes repl over the entries of addr/bits (bits >= 1) whose
// length is bits.
func (c *Table) deleteLocked(addr uint32, bits int, repl uint32) {
	t24 := &c.tbl24
	if bits <= 24 {
		// Only plain entries of length bits, [low, lim), and groups matter.
		low, lim := plainBit|uint32(bits)<<depthShift, plainBit|uint32(bits+1)<<depthShift
		first := addr >> 8
		if bits == 24 {
			if e := t24[first]; c.deleteEntryLocked(e, bits, repl, low, lim) != e {
				atomic.StoreUint32(&t24[first], repl)
			}
			return
		}
		last := first + 1<<(24-bits) - 1
		for i := first; i < last && i+1 < tbl24Len; i += 2 {
			e0, e1 := t24[i], t24[i+1]
			if e0-low >= lim-low && !isGroup(e0) && e1-low >= lim-low && !isGroup(e1) {
				continue
			}
			n0, n1 := c.deleteEntryLocked(e0, bits, repl, low, lim), c.deleteEntryLocked(e1, bits, repl, low, lim)
			if n0 != e0 || n1 != e1 {
				store2(&t24[i], n0, n1)
			}
		}
		return
	}
	i := addr >> 8
	e := t24[i]
	if !isGroup(e) {
		return // no group: no prefix longer than /24 here, so not p
	}
	g := e & valueMask
	c.groupDeleteLocked(g, int(addr&0xff), 1<<(32-bits), bits, repl)
	c.collapseLocked(i, g)
}

// deleteEntryLocked returns what first-level entry e becomes when the prefix
// of length bits under it goes: repl if e is plain of exactly that length,
// else e. An extended e is updated inside its group and stays.
func (c *Table) deleteEntryLocked(e uint32, bits int, repl, low, lim uint32) uint32 {
	switch {
	case e-low < lim-low:
		return repl
	case isGroup(e):
		c.groupDeleteLocked(e&valueMask, 0, groupLen, bits, repl)
	}
	return e
}

// groupDeleteLocked writes repl over entries [lo, lo+n) of group g whose
// length is bits.
func (c *Table) groupDeleteLocked(g uint32, lo, n, bits int, repl uint32) {
	grp := c.groups.Load().entries[uint(g)*groupLen:][:groupLen]
	for j := lo; j < lo+n && j < len(grp); j++ {
		if e := grp[j]; depth(e) == bits && e != repl {
			atomic.StoreUint32(&grp[j], repl)
		}
	}
}

// collapseLocked turns tbl24[i] back into a plain (or default) entry and
// frees its group g if no entry of the group comes from a prefix longer than
// /24 (then all come from the one longest prefix <= /24 covering the /24, or
// all are default, and are equal).
func (c *Table) collapseLocked(i, g uint32) {
	t := c.groups.Load()
	grp := t.entries[uint(g)*groupLen:][:groupLen]
	for _, e := range grp {
		if depth(e) > 24 {
			return
		}
	}
	atomic.StoreUint32(&c.tbl24[i], grp[0])
	// From here no new reader reaches g; readers that loaded the old tbl24
	// entry see the tag change and retry.
	gen := atomic.LoadUint64(&t.tags[g])>>32 + 1
	atomic.StoreUint64(&t.tags[g], gen<<32)
	c.free = append(c.free, g)
}

// store2 stores two adjacent entries (p 8-byte aligned, the first of an
// even pair) with one 64-bit atomic store: a locked instruction costs ~9 ns
// here whatever its width, so wide rewrites (a /8 is 65,536 entries) take
// half the time. Readers load each half with a 32-bit atomic load and see it
// old or new, as with two stores: aligned 8-byte stores are single-copy
// atomic on every Go platform, and the race detector treats both as atomic.
func store2(p *uint32, first, second uint32) {
	w := uint64(second)<<32 | uint64(first)
	if !littleEndian {
		w = uint64(first)<<32 | uint64(second)
	}
	atomic.StoreUint64((*uint64)(unsafe.Pointer(p)), w)
}

var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// maxGroups bounds the second level: one group per /24 at most, plus the
// unused index 0.
const maxGroups = tbl24Len

// allocGroupLocked hands out a group index and the table holding it: a freed
// one (safe at once, see lookupGroup) or the next never-used slot, growing
// the table if needed.
func (c *Table) allocGroupLocked() (uint32, *level2, error) {
	t := c.groups.Load()
	if n := len(c.free); n > 0 {
		g := c.free[n-1]
		c.free = c.free[:n-1]
		return g, t, nil
	}
	if int(c.used) == len(t.tags) {
		if len(t.tags) >= maxGroups {
			return 0, nil, ErrTooLarge
		}
		t = c.growLocked(t)
	}
	g := c.used
	c.used++
	return g, t, nil
}

// growLocked publishes a copy of t with twice the groups. Readers that still
// hold t read it as it was at the moment of the swap (the writer never
// writes t again), which is a state their lookup may legally answer from.
func (c *Table) growLocked(t *level2) *level2 {
	n := min(max(2*len(t.tags), initialGroups), maxGroups)
	nt := newLevel2(n)
	copy(nt.entries, t.entries)
	copy(nt.tags, t.tags)
	c.groups.Store(nt)
	return nt
}
