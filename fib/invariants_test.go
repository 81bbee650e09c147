package fib

import (
	"fmt"
	"net/netip"

	"github.com/netfwd/netfwd/nexthop"
)

// checkInvariants verifies the writer-side bookkeeping of the published
// state: every nexthop's reference count equals the routes and groups that
// use it, every referenced nexthop is reachable by its index, and the merged
// trie holds exactly the prefixes with a deciding route, each with its
// effective value.
func (f *FIB) checkInvariants() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.cur.Load()
	refs := map[*nexthop.Nexthop]int{}
	var visit func(nh *nexthop.Nexthop)
	seen := map[*nexthop.Nexthop]bool{}
	visit = func(nh *nexthop.Nexthop) {
		if seen[nh] {
			return
		}
		seen[nh] = true
		if nh.Group != nil {
			for _, m := range nh.Group.Members {
				refs[m.NH]++
				visit(m.NH)
			}
		}
	}
	for _, t := range s.tables {
		for _, rl := range t.All4() {
			for _, r := range rl.routes {
				if r.NH != nil {
					refs[r.NH]++
					visit(r.NH)
				}
			}
		}
	}
	for _, id := range f.nhs.IDs() {
		visit(f.nhs.ByID(id))
	}
	for nh, n := range refs {
		if nh.Refs() != n {
			return fmt.Errorf("nexthop %v (id %d, index %d): refs %d, used %d times", nh, nh.ID, nh.Index, nh.Refs(), n)
		}
		if f.nhs.ByIndex(nh.Index) != nh {
			return fmt.Errorf("nexthop %v: index %d maps to %v", nh, nh.Index, f.nhs.ByIndex(nh.Index))
		}
	}
	if live := f.nhs.Len(); live != len(seen) {
		return fmt.Errorf("registry holds %d live nexthops, %d are reachable", live, len(seen))
	}
	// The merged trie against a recomputation from the tables.
	tx := &Txn{f: f, base: s, next: s}
	want := map[netip.Prefix]*nexthop.Nexthop{}
	for _, id := range []uint32{TableLocal, TableMain} {
		if t := s.tables[id]; t != nil {
			for p := range t.All4() {
				if nh, ok := tx.effective(p); ok {
					want[p] = nh
				}
			}
		}
	}
	n := 0
	for p, nh := range s.merged.all() {
		n++
		if w, ok := want[p]; !ok || w != nh {
			return fmt.Errorf("merged trie has %s -> %v, want %v (present %t)", p, nh, w, ok)
		}
	}
	if n != len(want) {
		return fmt.Errorf("merged trie has %d prefixes, want %d", n, len(want))
	}
	// The kept route counts against a walk of every table.
	for id, t := range s.tables {
		var walked typeCounts
		for _, rl := range t.All4() {
			for _, r := range rl.routes {
				walked[r.Type]++
			}
		}
		if walked != s.counts[id] {
			return fmt.Errorf("table %d: route counts %v, a walk finds %v", id, s.counts[id], walked)
		}
	}
	return nil
}
