// Package fib is netfwd's forwarding information base: the routes of every
// table as configured (local 255, main 254 and numbered tables), the
// addresses and the routes Linux derives from them, nexthops, and ONE merged
// longest-prefix-match trie over local and main whose value at each prefix is
// the effective result: a lookup is one trie walk (or, with Options.Compiled,
// one or two memory reads) returning one *nexthop.Nexthop, with exactly the
// rule-order semantics of Linux's separate local and main tables (ip rule 0:
// local, 32766: main), overlaps included.
//
// Writers open a transaction (Begin), apply route, address, nexthop and link
// operations, and Commit (publish atomically) or Abort (nothing happened);
// one writer at a time. Readers (Lookup, LookupBatch4, LookupRoute, the
// dumps) take no locks and see one published version. docs/fib.md has the
// semantics and the deliberate differences from Linux.
package fib

import (
	"iter"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netfwd/netfwd/nexthop"
	"github.com/netfwd/netfwd/wire"
)

// Options configure a FIB.
type Options struct {
	// Trie selects the bart kind of the merged trie.
	Trie TrieKind
	// Now is the clock for nexthop index reuse (nil: time.Now).
	Now func() time.Time
	// DevIndex maps device names to the owner's interface indices, stored
	// in nexthops (nil: indices stay 0).
	DevIndex func(string) uint32
	// Compiled makes lookups go through a DIR-24-8 table (package dir24)
	// kept in step with the merged trie: faster, 64 MiB more memory.
	Compiled bool
}

// FIB is the forwarding information base.
type FIB struct {
	cur atomic.Pointer[state]

	mu  sync.Mutex         // writer lock
	nhs *nexthop.Registry  // guarded by mu (ByIndex is lock-free)
	obs []func(commitInfo) // guarded by mu

	compiled *compiledState // non-nil in compiled mode (immutable pointer)
	// customRules mirrors the published state's rules.custom for the
	// compiled lookup, which does not load the state otherwise.
	customRules atomic.Bool

	devIndex func(string) uint32 // Options.DevIndex, or names.index
	names    devNames
}

// commitInfo describes a published transaction to observers (the compiled
// table follows the merged trie with it).
type commitInfo struct {
	version uint64
	// changes are the merged trie's changes in order; nil when rebuild is set.
	changes []mergedChange
	// rebuild says the change set was too large to replay: rebuild from all.
	rebuild bool
	// all iterates the merged trie of the new version (sorted).
	all iter.Seq2[netip.Prefix, *nexthop.Nexthop]
	// parent returns the longest prefix of the new version strictly
	// containing p, with its value.
	parent func(p netip.Prefix) (netip.Prefix, *nexthop.Nexthop, bool)
}

// mergedChange is one change of the merged trie: the value at prefix is now
// nh (nil means "no route" but the prefix stays), or the prefix is gone.
type mergedChange struct {
	prefix  netip.Prefix
	nh      *nexthop.Nexthop
	deleted bool
}

// New returns an empty FIB.
func New(opts Options) *FIB {
	f := &FIB{nhs: nexthop.NewRegistryWithDevIndex(opts.Now, opts.DevIndex), devIndex: opts.DevIndex}
	if f.devIndex == nil {
		f.devIndex = f.names.index
	}
	s := &state{tables: map[uint32]*routeTrie{}, own: newOwnAddrs(nil), rules: defaultRuleSet}
	s.setMerged(newMtrie(opts.Trie))
	f.cur.Store(s)
	if opts.Compiled {
		f.enableCompiled()
	}
	return f
}

// Lookup returns the effective nexthop for dst: nil when there is no route
// (network unreachable). The nexthop's Kind says whether to forward, deliver
// locally or reject. Lock-free; one trie lookup.
//
// With custom rules it is LookupFlow for a flow that only has dst (no
// input interface, no source): the datapath passes whole flows instead.
func (f *FIB) Lookup(dst netip.Addr) *nexthop.Nexthop {
	if f.compiled != nil {
		return f.lookupCompiledRules(dst)
	}
	s := f.cur.Load() // the concrete trie is called directly: no dispatch per lookup
	if t := s.hotFast; t != nil {
		if nh, _ := t.Lookup(dst); nh != nil {
			return nh
		}
	} else if t := s.hotTable; t != nil {
		if nh, _ := t.Lookup(dst); nh != nil {
			return nh
		}
	} else {
		return f.lookupFlowDst(dst) // custom rules
	}
	if s.dflt != nil {
		return f.lookupDefaultTable(s, dst)
	}
	return nil
}

// lookupCompiledRules is Lookup in compiled mode.
func (f *FIB) lookupCompiledRules(dst netip.Addr) *nexthop.Nexthop {
	if f.customRules.Load() {
		return f.lookupFlowDst(dst)
	}
	if nh := f.lookupCompiled(dst); nh != nil {
		return nh
	}
	s := f.cur.Load()
	if s.dflt == nil {
		return nil
	}
	return f.lookupDefaultTable(s, dst)
}

// lookupFlowDst is the rule walk for a flow of dst alone. Out of line: the
// cold paths must not grow Lookup's hot one (bench fib saw 5-10 %).
//
//go:noinline
func (f *FIB) lookupFlowDst(dst netip.Addr) *nexthop.Nexthop {
	return f.LookupFlow(&Flow{Dst: wire.Addr4From(dst)})
}

// lookupDefaultTable is the default rules' last step, table default, after
// local and main (merged) had no route.
//
//go:noinline
func (f *FIB) lookupDefaultTable(s *state, dst netip.Addr) *nexthop.Nexthop {
	nh, _ := tableLookup(s.dflt, dst, -1)
	return nh
}

// Version returns the published version number (incremented per commit):
// the version Lookup answers from. In compiled mode that is the version the
// compiled structure holds in full; the next one may be partly visible.
func (f *FIB) Version() uint64 {
	if f.compiled != nil {
		return f.compiled.version.Load()
	}
	return f.cur.Load().version
}

// observe registers fn to be called (with the writer lock held) after every
// commit. The first call it gets describes a rebuild of the current state.
func (f *FIB) observe(fn func(commitInfo)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.obs = append(f.obs, fn)
	fn(rebuildCommit(f.cur.Load()))
}

func rebuildCommit(s *state) commitInfo {
	return commitInfo{
		version: s.version,
		rebuild: true,
		all:     s.merged.all(),
		parent:  func(p netip.Prefix) (netip.Prefix, *nexthop.Nexthop, bool) { return mergedParent(s.merged, p) },
	}
}

// mergedParent finds the longest prefix strictly containing p.
func mergedParent(m mtrie, p netip.Prefix) (netip.Prefix, *nexthop.Nexthop, bool) {
	for q, nh := range m.supernets(p) {
		if q.Bits() < p.Bits() {
			return q, nh, true
		}
	}
	return netip.Prefix{}, nil, false
}

// LookupBatch4 looks up a vector of IPv4 destinations on one published
// state: out[i] is Lookup's answer for dsts[i]. One atomic
// load per batch; the loop keeps independent lookups in flight.
// idx is scratch of len(dsts) for compiled mode (nil in trie mode is fine).
func (f *FIB) LookupBatch4(dsts []wire.Addr4, out []*nexthop.Nexthop, idx []uint32) {
	s := f.cur.Load()
	out = out[:len(dsts)]
	switch {
	case s.rules.custom:
		for i, d := range dsts {
			out[i], _ = f.walk(s, &Flow{Dst: d})
		}
		return
	case f.compiled != nil:
		f.lookupBatchCompiled(dsts, out, idx[:len(dsts)])
	case s.fast != nil:
		t := s.fast
		for i, d := range dsts {
			out[i], _ = t.Lookup(d.Netip())
		}
	default:
		t := s.table
		for i, d := range dsts {
			out[i], _ = t.Lookup(d.Netip())
		}
	}
	if s.dflt != nil {
		for i, d := range dsts {
			if out[i] == nil {
				out[i], _ = tableLookup(s.dflt, d.Netip(), -1)
			}
		}
	}
}
