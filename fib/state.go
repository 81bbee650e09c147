package fib

// A published FIB version: the merged lookup trie, the per-table route
// tries it was computed from, and the addresses. Readers load one state with an
// atomic load and use only it, so everything they see belongs to one version.
//
// Locking: a state is immutable once published. The writer builds the next
// one inside a transaction, either by copy-on-write (bart's ...Persist
// operations: small changes) or on private clones (bulk loads), and publishes
// it with one atomic store.

import (
	"iter"
	"net/netip"

	"github.com/gaissmai/bart"
	"github.com/netfwd/netfwd/nexthop"
)

// TrieKind selects the bart structure of the merged trie.
type TrieKind uint8

const (
	// TrieFast is bart.Fast: more memory, faster lookups (the default).
	TrieFast TrieKind = iota
	// TrieTable is bart.Table: compact.
	TrieTable
)

func (k TrieKind) String() string {
	if k == TrieTable {
		return "table"
	}
	return "fast"
}

// routeList is the routes of one (table, prefix), best first: ascending
// metric, insertion order among equal metrics. Immutable.
type routeList struct {
	routes []*Route
}

type routeTrie = bart.Table[*routeList]

type state struct {
	version uint64
	merged  mtrie
	// fast or table is the merged trie itself (the other is nil): the lookup
	// calls the concrete type directly, no interface dispatch per packet.
	fast   *bart.Fast[*nexthop.Nexthop]
	table  *bart.Table[*nexthop.Nexthop]
	tables map[uint32]*routeTrie
	addrs  []Address
}

func (s *state) lookup(a netip.Addr) *nexthop.Nexthop {
	var nh *nexthop.Nexthop
	if s.fast != nil {
		nh, _ = s.fast.Lookup(a)
	} else {
		nh, _ = s.table.Lookup(a)
	}
	return nh
}

func (s *state) setMerged(m mtrie) {
	s.merged = m
	s.fast, s.table = nil, nil
	switch t := m.(type) {
	case fastTrie:
		s.fast = t.t
	case tableTrie:
		s.table = t.t
	}
}

// mtrie is the writer's view of the merged trie, over both bart kinds.
// Mutating methods return the trie to keep using: the same one when owned
// (in-place), a new version when persist is set (copy-on-write).
type mtrie interface {
	get(p netip.Prefix) (*nexthop.Nexthop, bool)
	set(p netip.Prefix, nh *nexthop.Nexthop, persist bool) mtrie
	del(p netip.Prefix, persist bool) mtrie
	subnets(p netip.Prefix) iter.Seq2[netip.Prefix, *nexthop.Nexthop]
	supernets(p netip.Prefix) iter.Seq2[netip.Prefix, *nexthop.Nexthop]
	all() iter.Seq2[netip.Prefix, *nexthop.Nexthop]
	clone() mtrie
	size() int
}

func newMtrie(k TrieKind) mtrie {
	if k == TrieTable {
		return tableTrie{new(bart.Table[*nexthop.Nexthop])}
	}
	return fastTrie{new(bart.Fast[*nexthop.Nexthop])}
}

type fastTrie struct{ t *bart.Fast[*nexthop.Nexthop] }

func (f fastTrie) get(p netip.Prefix) (*nexthop.Nexthop, bool) { return f.t.Get(p) }
func (f fastTrie) set(p netip.Prefix, nh *nexthop.Nexthop, persist bool) mtrie {
	if persist {
		return fastTrie{f.t.InsertPersist(p, nh)}
	}
	f.t.Insert(p, nh)
	return f
}
func (f fastTrie) del(p netip.Prefix, persist bool) mtrie {
	if persist {
		return fastTrie{f.t.DeletePersist(p)}
	}
	f.t.Delete(p)
	return f
}
func (f fastTrie) subnets(p netip.Prefix) iter.Seq2[netip.Prefix, *nexthop.Nexthop] {
	return f.t.Subnets(p)
}
func (f fastTrie) supernets(p netip.Prefix) iter.Seq2[netip.Prefix, *nexthop.Nexthop] {
	return f.t.Supernets(p)
}
func (f fastTrie) all() iter.Seq2[netip.Prefix, *nexthop.Nexthop] { return f.t.AllSorted4() }
func (f fastTrie) clone() mtrie                                   { return fastTrie{f.t.Clone()} }
func (f fastTrie) size() int                                      { return f.t.Size4() }

type tableTrie struct{ t *bart.Table[*nexthop.Nexthop] }

func (f tableTrie) get(p netip.Prefix) (*nexthop.Nexthop, bool) { return f.t.Get(p) }
func (f tableTrie) set(p netip.Prefix, nh *nexthop.Nexthop, persist bool) mtrie {
	if persist {
		return tableTrie{f.t.InsertPersist(p, nh)}
	}
	f.t.Insert(p, nh)
	return f
}
func (f tableTrie) del(p netip.Prefix, persist bool) mtrie {
	if persist {
		return tableTrie{f.t.DeletePersist(p)}
	}
	f.t.Delete(p)
	return f
}
func (f tableTrie) subnets(p netip.Prefix) iter.Seq2[netip.Prefix, *nexthop.Nexthop] {
	return f.t.Subnets(p)
}
func (f tableTrie) supernets(p netip.Prefix) iter.Seq2[netip.Prefix, *nexthop.Nexthop] {
	return f.t.Supernets(p)
}
func (f tableTrie) all() iter.Seq2[netip.Prefix, *nexthop.Nexthop] { return f.t.AllSorted4() }
func (f tableTrie) clone() mtrie                                   { return tableTrie{f.t.Clone()} }
func (f tableTrie) size() int                                      { return f.t.Size4() }
