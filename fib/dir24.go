package fib

// The compiled FIB follows the merged trie: in compiled mode the FIB keeps
// a Compiled (DIR-24-8) structure in step with the merged trie's effective
// values, and lookups go through it: one or two memory reads and a nexthop
// index, mapped back to the *Nexthop by the registry's index table.
//
// Flow: an observer of every commit replays the merged trie's changes into
// the structure (Set, or Delete with the parent from the new state); a
// commit with too many changes, or any inconsistency, rebuilds it whole and
// swaps it in with one atomic store.
//
// Locking: the observer runs under the FIB writer lock; readers load the
// structure pointer once per lookup or batch.

import (
	"net/netip"
	"sync/atomic"

	"github.com/netfwd/netfwd/nexthop"
)

// compiledState is the compiled mode's part of a FIB.
type compiledState struct {
	c        atomic.Pointer[Compiled]
	rebuilds atomic.Uint64
	// version is the FIB version whose changes the structure holds in full;
	// while the next commit's changes are being stored, a lookup may already
	// see some of them (each address sees its old or its new value).
	version atomic.Uint64
}

// indices maps a sequence of merged-trie entries to what the compiled
// structure stores: each prefix with its nexthop's index.
func indices(all func(yield func(netip.Prefix, *nexthop.Nexthop) bool)) func(yield func(netip.Prefix, uint32) bool) {
	return func(yield func(netip.Prefix, uint32) bool) {
		for p, nh := range all {
			if !yield(p, nhIndex(nh)) {
				return
			}
		}
	}
}

// MergedIndices is Merged as BuildCompiled takes it: each prefix of the
// published merged trie with its nexthop index.
func (f *FIB) MergedIndices() func(yield func(netip.Prefix, uint32) bool) {
	return indices(f.Merged())
}

func nhIndex(nh *nexthop.Nexthop) uint32 {
	if nh == nil {
		return 0
	}
	return nh.Index
}

func (f *FIB) enableCompiled() {
	f.compiled = new(compiledState)
	f.Observe(func(c Commit) {
		cs := f.compiled
		defer cs.version.Store(c.Version)
		cur := cs.c.Load()
		if !c.Rebuild && cur != nil {
			ok := true
			for _, ch := range c.Changes {
				var err error
				if ch.Deleted {
					parent, pnh, has := c.Parent(ch.Prefix)
					err = cur.Delete(ch.Prefix, parent, nhIndex(pnh), has)
				} else {
					err = cur.Set(ch.Prefix, nhIndex(ch.NH))
				}
				if err != nil {
					ok = false
					break
				}
			}
			if ok {
				return
			}
		}
		next, err := BuildCompiled(indices(c.All))
		if err != nil {
			panic("fib: compiled build of a valid trie failed: " + err.Error())
		}
		cs.c.Store(next)
		cs.rebuilds.Add(1)
	})
}

// Compiled reports whether lookups go through the compiled structure.
func (f *FIB) Compiled() bool { return f.compiled != nil }

// CompiledStats returns the compiled structure's statistics (zero in trie
// mode) and how often it was rebuilt whole.
func (f *FIB) CompiledStats() (CompiledStats, uint64) {
	if f.compiled == nil {
		return CompiledStats{}, 0
	}
	return f.compiled.c.Load().Stats(), f.compiled.rebuilds.Load()
}

// lookupCompiled is Lookup in compiled mode.
func (f *FIB) lookupCompiled(dst netip.Addr) *nexthop.Nexthop {
	return f.nhs.ByIndex(f.compiled.c.Load().LookupAddr(dst))
}

// lookupBatchCompiled is LookupBatch4 in compiled mode: the structure's
// batch lookup, then the index to nexthop mapping.
func (f *FIB) lookupBatchCompiled(dsts []uint32, out []*nexthop.Nexthop, idx []uint32) {
	f.compiled.c.Load().LookupBatch(dsts, idx)
	for i, v := range idx {
		out[i] = f.nhs.ByIndex(v)
	}
}

// LookupIndex returns the compact nexthop reference of dst in compiled mode:
// the nexthop's Index (0: no route), without mapping it to the object
// (NexthopByIndex does). It returns 0 in trie mode.
func (f *FIB) LookupIndex(dst netip.Addr) uint32 {
	if f.compiled == nil {
		return 0
	}
	return f.compiled.c.Load().LookupAddr(dst)
}

// LookupIndex4 is LookupIndex for a destination already in host order as
// the datapath parses it from the IPv4 header (a uint32, as LookupBatch4
// takes). It inlines into the caller whole: the netip.Addr form cannot,
// because As4's checks push it over the inliner's budget.
func (f *FIB) LookupIndex4(dst uint32) uint32 {
	if f.compiled == nil {
		return 0
	}
	return f.compiled.c.Load().Lookup(dst)
}
