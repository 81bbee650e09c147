package fib

// Compiled mode: the FIB keeps a DIR-24-8 table (package dir24) in step with
// the merged trie's effective values, and lookups go through it: one or two
// memory reads and a nexthop index, mapped back to the *Nexthop by the
// registry's index table.
//
// Flow: an observer of every commit replays the merged trie's changes into
// the table (Set, or Delete with the parent from the new state); a commit
// with too many changes, or any inconsistency, rebuilds it whole and swaps
// it in with one atomic store.
//
// Locking: the observer runs under the FIB writer lock; readers load the
// table pointer once per lookup or batch.

import (
	"iter"
	"net/netip"
	"sync/atomic"

	"github.com/netfwd/netfwd/fib/dir24"
	"github.com/netfwd/netfwd/nexthop"
	"github.com/netfwd/netfwd/wire"
)

// compiledState is the compiled mode's part of a FIB.
type compiledState struct {
	c atomic.Pointer[dir24.Table]
	// version is the FIB version whose changes the table holds in full;
	// while the next commit's changes are being stored, a lookup may already
	// see some of them (each address sees its old or its new value).
	version atomic.Uint64
}

// indices maps a sequence of merged-trie entries to what the table stores:
// each prefix with its nexthop's index.
func indices(all iter.Seq2[netip.Prefix, *nexthop.Nexthop]) iter.Seq2[netip.Prefix, uint32] {
	return func(yield func(netip.Prefix, uint32) bool) {
		for p, nh := range all {
			if !yield(p, nhIndex(nh)) {
				return
			}
		}
	}
}

func nhIndex(nh *nexthop.Nexthop) uint32 {
	if nh == nil {
		return 0
	}
	return nh.Index
}

func (f *FIB) enableCompiled() {
	f.compiled = new(compiledState)
	f.observe(func(c commitInfo) {
		cs := f.compiled
		defer cs.version.Store(c.version)
		cur := cs.c.Load()
		if !c.rebuild && cur != nil {
			ok := true
			for _, ch := range c.changes {
				var err error
				if ch.deleted {
					parent, pnh, has := c.parent(ch.prefix)
					err = cur.Delete(ch.prefix, parent, nhIndex(pnh), has)
				} else {
					err = cur.Set(ch.prefix, nhIndex(ch.nh))
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
		next, err := dir24.Build(indices(c.all))
		if err != nil {
			panic("fib: compiled build of a valid trie failed: " + err.Error())
		}
		cs.c.Store(next)
	})
}

// lookupCompiled is Lookup in compiled mode.
func (f *FIB) lookupCompiled(dst netip.Addr) *nexthop.Nexthop {
	return f.nhs.ByIndex(f.compiled.c.Load().LookupAddr(dst))
}

// lookupBatchCompiled is LookupBatch4 in compiled mode: the table's batch
// lookup, then the index to nexthop mapping.
func (f *FIB) lookupBatchCompiled(dsts []wire.Addr4, out []*nexthop.Nexthop, idx []uint32) {
	f.compiled.c.Load().LookupBatch(dsts, idx)
	for i, v := range idx {
		out[i] = f.nhs.ByIndex(v)
	}
}

// lookupIndex returns the compact answer for dst in compiled mode: the
// nexthop's Index (0: no route), without mapping it to the object. It
// returns 0 in trie mode.
func (f *FIB) lookupIndex(dst netip.Addr) uint32 {
	if f.compiled == nil {
		return 0
	}
	return f.compiled.c.Load().LookupAddr(dst)
}

// lookupIndex4 is lookupIndex for a destination in the datapath's form.
func (f *FIB) lookupIndex4(dst wire.Addr4) uint32 {
	if f.compiled == nil {
		return 0
	}
	return f.compiled.c.Load().Lookup(dst)
}
