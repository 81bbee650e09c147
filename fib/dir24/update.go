// Incremental updates of the compiled FIB: the FIB writer calls Set and
// Delete after each change of the merged trie, in order.
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
// only after that group is complete (see compiled.go for the reader side).

package fib

import (
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"unsafe"
)

// Errors of Set/Delete/BuildCompiled. The structure is unchanged when one is
// returned.
var (
	ErrCompiledNotIPv4  = errors.New("compiled fib: prefix is not IPv4")
	ErrCompiledValue    = fmt.Errorf("compiled fib: value out of range 0..%d", MaxCompiledValue)
	ErrCompiledParent   = errors.New("compiled fib: parent does not strictly contain the prefix")
	ErrCompiledTooLarge = errors.New("compiled fib: second-level table full")
)

// Set makes v the value of prefix p (insert or update). v is 0..MaxCompiledValue;
// 0 means "no route" and is a legal value (a prefix whose route resolves to
// nothing still hides shorter prefixes). p is masked to its length.
func (c *Compiled) Set(p netip.Prefix, v uint32) error {
	addr, bits, err := cplPrefix(p)
	if err != nil {
		return err
	}
	if v > MaxCompiledValue {
		return ErrCompiledValue
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if bits == 0 {
		c.setDefaultLocked(v)
		return nil
	}
	return c.setLocked(addr, bits, cplEntry(v, bits))
}

// setDefaultLocked makes v the /0's value: one store, whatever the table.
func (c *Compiled) setDefaultLocked(v uint32) {
	gen := c.def.Load()>>32 + 1
	c.def.Store(gen<<32 | uint64(v))
}

// Delete removes prefix p. The caller names the longest remaining prefix
// strictly containing p and its value (hasParent false: none, addresses of p
// not covered by longer prefixes then answer 0). The merged trie knows it:
// its LookupPrefixLPM(p) once p is deleted. The structure itself keeps no
// prefix list. Deleting a prefix that is not present changes nothing.
func (c *Compiled) Delete(p netip.Prefix, parent netip.Prefix, parentVal uint32, hasParent bool) error {
	addr, bits, err := cplPrefix(p)
	if err != nil {
		return err
	}
	repl := uint32(0) // no parent, or the /0: default
	if hasParent {
		paddr, pbits, err := cplPrefix(parent)
		if err != nil {
			return err
		}
		if pbits >= bits || (pbits > 0 && (addr^paddr)>>(32-pbits) != 0) {
			return ErrCompiledParent
		}
		if parentVal > MaxCompiledValue {
			return ErrCompiledValue
		}
		if pbits > 0 {
			repl = cplEntry(parentVal, pbits)
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

// cplIsGroup tells an extended entry (a group index) from plain and default.
func cplIsGroup(e uint32) bool { return e-1 < cplPlain-1 }

// cplPrefix returns p's masked address as a uint32 and its length.
func cplPrefix(p netip.Prefix) (uint32, int, error) {
	if !p.IsValid() || !p.Addr().Is4() {
		return 0, 0, ErrCompiledNotIPv4
	}
	b := p.Masked().Addr().As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]), p.Bits(), nil
}

// setLocked writes ent (length bits >= 1) over p = addr/bits.
func (c *Compiled) setLocked(addr uint32, bits int, ent uint32) error {
	t24 := &c.tbl24
	if bits <= 24 {
		// Plain entries of prefixes longer than p, [lim, 2^32), stay; one
		// unsigned compare skips them.
		lim := cplPlain | uint32(bits+1)<<cplDepthShift
		first := addr >> 8
		if bits == 24 {
			if e := t24[first]; c.setEntryLocked(e, bits, ent, lim) != e {
				atomic.StoreUint32(&t24[first], ent)
			}
			return nil
		}
		// Pairs of entries, one 64-bit store for both (cplStore2).
		last := first + 1<<(24-bits) - 1
		for i := first; i < last && i+1 < cplTbl24Len; i += 2 {
			e0, e1 := t24[i], t24[i+1]
			if e0 >= lim && e1 >= lim {
				continue
			}
			n0, n1 := c.setEntryLocked(e0, bits, ent, lim), c.setEntryLocked(e1, bits, ent, lim)
			if n0 != e0 || n1 != e1 {
				cplStore2(&t24[i], n0, n1)
			}
		}
		return nil
	}
	i := addr >> 8
	lo := int(addr & 0xff)
	n := 1 << (32 - bits)
	e := t24[i]
	if cplIsGroup(e) {
		c.groupSetLocked(e&cplValueMask, lo, n, bits, ent)
		return nil
	}
	// The /24 gets a group: every address answers e (plain or default)
	// except p's range.
	g, t, err := c.allocGroupLocked()
	if err != nil {
		return err
	}
	grp := t.entries[uint(g)*cplGroupLen:][:cplGroupLen]
	for j := 0; j+1 < len(grp); j += 2 {
		x0, x1 := e, e
		if j >= lo && j < lo+n {
			x0 = ent
		}
		if j+1 >= lo && j+1 < lo+n {
			x1 = ent
		}
		cplStore2(&grp[j], x0, x1)
	}
	gen := atomic.LoadUint64(&t.tags[g])>>32 + 1
	atomic.StoreUint64(&t.tags[g], gen<<32|cplTagLive|uint64(i))
	atomic.StoreUint32(&t24[i], g)
	return nil
}

// setEntryLocked returns what first-level entry e becomes when ent (length
// bits) is set over it: ent if e is default or plain and no longer than
// bits, else e. An extended e is updated inside its group and stays.
func (c *Compiled) setEntryLocked(e uint32, bits int, ent, lim uint32) uint32 {
	switch {
	case e >= lim:
		return e
	case cplIsGroup(e):
		c.groupSetLocked(e&cplValueMask, 0, cplGroupLen, bits, ent)
		return e
	}
	return ent
}

// groupSetLocked writes ent (length bits) over entries [lo, lo+n) of group g
// whose length is <= bits.
func (c *Compiled) groupSetLocked(g uint32, lo, n, bits int, ent uint32) {
	grp := c.groups.Load().entries[uint(g)*cplGroupLen:][:cplGroupLen]
	for j := lo; j < lo+n && j < len(grp); j++ {
		if e := grp[j]; cplDepth(e) <= bits && e != ent {
			atomic.StoreUint32(&grp[j], ent)
		}
	}
}

// deleteLocked writes repl over the entries of addr/bits (bits >= 1) whose
// length is bits.
func (c *Compiled) deleteLocked(addr uint32, bits int, repl uint32) {
	t24 := &c.tbl24
	if bits <= 24 {
		// Only plain entries of length bits, [low, lim), and groups matter.
		low, lim := cplPlain|uint32(bits)<<cplDepthShift, cplPlain|uint32(bits+1)<<cplDepthShift
		first := addr >> 8
		if bits == 24 {
			if e := t24[first]; c.deleteEntryLocked(e, bits, repl, low, lim) != e {
				atomic.StoreUint32(&t24[first], repl)
			}
			return
		}
		last := first + 1<<(24-bits) - 1
		for i := first; i < last && i+1 < cplTbl24Len; i += 2 {
			e0, e1 := t24[i], t24[i+1]
			if e0-low >= lim-low && !cplIsGroup(e0) && e1-low >= lim-low && !cplIsGroup(e1) {
				continue
			}
			n0, n1 := c.deleteEntryLocked(e0, bits, repl, low, lim), c.deleteEntryLocked(e1, bits, repl, low, lim)
			if n0 != e0 || n1 != e1 {
				cplStore2(&t24[i], n0, n1)
			}
		}
		return
	}
	i := addr >> 8
	e := t24[i]
	if !cplIsGroup(e) {
		return // no group: no prefix longer than /24 here, so not p
	}
	g := e & cplValueMask
	c.groupDeleteLocked(g, int(addr&0xff), 1<<(32-bits), bits, repl)
	c.collapseLocked(i, g)
}

// deleteEntryLocked returns what first-level entry e becomes when the prefix
// of length bits under it goes: repl if e is plain of exactly that length,
// else e. An extended e is updated inside its group and stays.
func (c *Compiled) deleteEntryLocked(e uint32, bits int, repl, low, lim uint32) uint32 {
	switch {
	case e-low < lim-low:
		return repl
	case cplIsGroup(e):
		c.groupDeleteLocked(e&cplValueMask, 0, cplGroupLen, bits, repl)
	}
	return e
}

// groupDeleteLocked writes repl over entries [lo, lo+n) of group g whose
// length is bits.
func (c *Compiled) groupDeleteLocked(g uint32, lo, n, bits int, repl uint32) {
	grp := c.groups.Load().entries[uint(g)*cplGroupLen:][:cplGroupLen]
	for j := lo; j < lo+n && j < len(grp); j++ {
		if e := grp[j]; cplDepth(e) == bits && e != repl {
			atomic.StoreUint32(&grp[j], repl)
		}
	}
}

// collapseLocked turns tbl24[i] back into a plain (or default) entry and
// frees its group g if no entry of the group comes from a prefix longer than
// /24 (then all come from the one longest prefix <= /24 covering the /24, or
// all are default, and are equal).
func (c *Compiled) collapseLocked(i, g uint32) {
	t := c.groups.Load()
	grp := t.entries[uint(g)*cplGroupLen:][:cplGroupLen]
	for _, e := range grp {
		if cplDepth(e) > 24 {
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

// cplStore2 stores two adjacent entries (p 8-byte aligned, the first of an
// even pair) with one 64-bit atomic store: a locked instruction costs ~9 ns
// here whatever its width, so wide rewrites (a /8 is 65,536 entries) take
// half the time. Readers load each half with a 32-bit atomic load and see it
// old or new, as with two stores: aligned 8-byte stores are single-copy
// atomic on every Go platform, and the race detector treats both as atomic.
func cplStore2(p *uint32, first, second uint32) {
	w := uint64(second)<<32 | uint64(first)
	if !cplLittleEndian {
		w = uint64(first)<<32 | uint64(second)
	}
	atomic.StoreUint64((*uint64)(unsafe.Pointer(p)), w)
}

var cplLittleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// cplMaxGroups bounds the second level: one group per /24 at most, plus the
// unused index 0.
const cplMaxGroups = cplTbl24Len

// allocGroupLocked hands out a group index and the table holding it: a freed
// one (safe at once, see lookupGroup) or the next never-used slot, growing
// the table if needed.
func (c *Compiled) allocGroupLocked() (uint32, *compiledGroups, error) {
	t := c.groups.Load()
	if n := len(c.free); n > 0 {
		g := c.free[n-1]
		c.free = c.free[:n-1]
		return g, t, nil
	}
	if int(c.used) == len(t.tags) {
		if len(t.tags) >= cplMaxGroups {
			return 0, nil, ErrCompiledTooLarge
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
func (c *Compiled) growLocked(t *compiledGroups) *compiledGroups {
	n := min(max(2*len(t.tags), cplInitialGroups), cplMaxGroups)
	nt := newCompiledGroups(n)
	copy(nt.entries, t.entries)
	copy(nt.tags, t.tags)
	c.groups.Store(nt)
	return nt
}
