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
	fast  *bart.Fast[*nexthop.Nexthop]
	table *bart.Table[*nexthop.Nexthop]
	// custom is rules.custom; hotFast and hotTable are fast and table
	// while custom is false (nil otherwise): Lookup's one nil check covers
	// both the trie kind and the rules (set by Txn.Commit).
	custom   bool
	hotFast  *bart.Fast[*nexthop.Nexthop]
	hotTable *bart.Table[*nexthop.Nexthop]
	tables   map[uint32]*routeTrie
	// rules is the policy rule list (rule.go, policy.go); dflt is table
	// default's trie when it has routes (the default rules' last lookup).
	rules *ruleSet
	dflt  *routeTrie
	addrs []Address
	// vrfs maps VRF names to tables, devVRF enslaved devices to their VRF
	// (vrf.go); both copy-on-write.
	vrfs   map[string]uint32
	devVRF map[string]string
	own    *ownAddrs // the local table's local and broadcast addresses
	// sinceCompact counts the merged trie's changes since it was last
	// compacted (compact.go).
	sinceCompact int
	// counts are the routes per table and type, kept by storeList and
	// SetLearned as lists change (counts.go): a metrics scrape must not
	// walk a full table.
	counts map[uint32]typeCounts
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
	case trieOf[*bart.Fast[*nexthop.Nexthop]]:
		s.fast = t.t
	case trieOf[*bart.Table[*nexthop.Nexthop]]:
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
		return trieOf[*bart.Table[*nexthop.Nexthop]]{new(bart.Table[*nexthop.Nexthop])}
	}
	return trieOf[*bart.Fast[*nexthop.Nexthop]]{new(bart.Fast[*nexthop.Nexthop])}
}

// bartTrie is the method set bart.Fast and bart.Table share (T is the
// pointer type itself, which ...Persist and Clone return).
type bartTrie[T any] interface {
	Get(netip.Prefix) (*nexthop.Nexthop, bool)
	Insert(netip.Prefix, *nexthop.Nexthop)
	InsertPersist(netip.Prefix, *nexthop.Nexthop) T
	Delete(netip.Prefix)
	DeletePersist(netip.Prefix) T
	Subnets(netip.Prefix) iter.Seq2[netip.Prefix, *nexthop.Nexthop]
	Supernets(netip.Prefix) iter.Seq2[netip.Prefix, *nexthop.Nexthop]
	AllSorted4() iter.Seq2[netip.Prefix, *nexthop.Nexthop]
	Clone() T
	Size4() int
}

// trieOf adapts either bart kind to mtrie (writer side only; the lookup
// path calls the concrete type, see state.lookup).
type trieOf[T bartTrie[T]] struct{ t T }

func (f trieOf[T]) get(p netip.Prefix) (*nexthop.Nexthop, bool) { return f.t.Get(p) }
func (f trieOf[T]) set(p netip.Prefix, nh *nexthop.Nexthop, persist bool) mtrie {
	if persist {
		return trieOf[T]{f.t.InsertPersist(p, nh)}
	}
	f.t.Insert(p, nh)
	return f
}
func (f trieOf[T]) del(p netip.Prefix, persist bool) mtrie {
	if persist {
		return trieOf[T]{f.t.DeletePersist(p)}
	}
	f.t.Delete(p)
	return f
}
func (f trieOf[T]) subnets(p netip.Prefix) iter.Seq2[netip.Prefix, *nexthop.Nexthop] {
	return f.t.Subnets(p)
}
func (f trieOf[T]) supernets(p netip.Prefix) iter.Seq2[netip.Prefix, *nexthop.Nexthop] {
	return f.t.Supernets(p)
}
func (f trieOf[T]) all() iter.Seq2[netip.Prefix, *nexthop.Nexthop] { return f.t.AllSorted4() }
func (f trieOf[T]) clone() mtrie                                   { return trieOf[T]{f.t.Clone()} }
func (f trieOf[T]) size() int                                      { return f.t.Size4() }
