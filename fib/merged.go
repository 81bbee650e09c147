package fib

// The merged trie: one bart trie over the prefixes of tables local and main
// whose value at prefix P is the effective result for every address whose
// longest match in the union of both tables is P.
//
// Why that is well defined: for such an address, the prefixes of either
// table that contain it are exactly P's ancestors-or-self, so the rule-order
// answer (longest usable local route, unless it is a throw; else longest
// usable main route; else no route) depends only on P.
//
// A prefix is in the merged trie iff it has a usable ("deciding") route in
// local or main: the first route of its metric-ordered list whose nexthop is
// not dead. A prefix whose routes are all dead is left out, so lookups fall
// back to shorter prefixes exactly as the kernel skips dead routes.
//
// What a change at prefix Q of a table affects (recomputed by updateMerged):
//   - local: every merged prefix inside Q (their local answer may come from
//     Q), plus Q itself;
//   - main: Q itself, plus the local prefixes inside Q: those are the only
//     merged prefixes below Q whose answer can fall through to a main
//     ancestor (they have no main route of their own or a local throw).
//     Main-only prefixes below Q answer from their own main route.
// So a change of the main default route costs a few lookups, not a walk of
// 900,000 prefixes.
//
// Locking: writer side only (inside a Txn).

import (
	"net/netip"

	"github.com/netfwd/netfwd/nexthop"
)

// deciding returns the route that decides lookups at exactly (table, p):
// the first usable route of its list, or nil.
func (tx *Txn) deciding(id uint32, p netip.Prefix) *Route {
	for _, r := range tx.getList(id, p) {
		if !r.dead() {
			return r
		}
	}
	return nil
}

// decidingAbove returns the deciding route of the longest prefix of table id
// that strictly contains p.
func (tx *Txn) decidingAbove(id uint32, p netip.Prefix) *Route {
	t := tx.table(id)
	if t == nil {
		return nil
	}
	for q, rl := range t.Supernets(p) {
		if q.Bits() >= p.Bits() {
			continue
		}
		for _, r := range rl.routes {
			if !r.dead() {
				return r
			}
		}
	}
	return nil
}

// effective computes the merged trie's entry for p.
func (tx *Txn) effective(p netip.Prefix) (nh *nexthop.Nexthop, present bool) {
	lr := tx.deciding(TableLocal, p)
	mr := tx.deciding(TableMain, p)
	if lr == nil && mr == nil {
		return nil, false
	}
	if lr == nil {
		lr = tx.decidingAbove(TableLocal, p)
	}
	if lr != nil && lr.Type != Throw {
		return lr.NH, true
	}
	if mr == nil {
		mr = tx.decidingAbove(TableMain, p)
	}
	if mr != nil && mr.Type != Throw {
		return mr.NH, true
	}
	return nil, true // a throw with nothing behind it: no route
}

// recompute brings the merged trie's entry for p up to date.
func (tx *Txn) recompute(p netip.Prefix) {
	nh, present := tx.effective(p)
	old, had := tx.next.merged.get(p)
	switch {
	case present && (!had || old != nh):
		tx.mergedSet(p, nh)
	case !present && had:
		tx.mergedDelete(p)
	}
}

// updateMerged recomputes what a change of table id at prefix q affects.
func (tx *Txn) updateMerged(id uint32, q netip.Prefix) {
	var affected []netip.Prefix
	switch id {
	case TableLocal:
		for p := range tx.next.merged.subnets(q) {
			affected = append(affected, p)
		}
	case TableMain:
		if t := tx.table(TableLocal); t != nil {
			for p := range t.Subnets(q) {
				affected = append(affected, p)
			}
		}
	default:
		return
	}
	tx.recompute(q)
	for _, p := range affected {
		if p != q {
			tx.recompute(p)
		}
	}
}
