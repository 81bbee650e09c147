package fib

// Learned routes: the write path of routing sources (FRR over FPM, the
// kernel mirror), which stream routes the source has already validated, at
// hundreds of thousands per second.
//
// Flow: SetLearned installs one route of an owner with the kernel's
// create/replace/append semantics restricted to that owner's routes, and
// DelLearned removes one. Neither validates gateways or preferred sources
// (the source did: zebra resolved the nexthop, the kernel accepted the
// route), and a route identical to the one it replaces only gets its mark
// refreshed in place: a replay of an unchanged table writes no trie. A new
// route on a prefix with a single route in table main and nothing of table
// local around it (the common case) updates the merged trie directly from
// its own list; everything else takes the general updateMerged.
//
// Merged-trie updates of deletions are deferred to flushLearned (called by
// Commit): a route deleted and added back in one transaction (zebra's
// RTM_DELROUTE + RTM_NEWROUTE update) then leaves at most one change of the
// merged trie, never a delete followed by a set, which the compiled
// structure would show to lookups one after the other.
//
// Mark-and-sweep: every SetLearned stamps the route with the caller's mark;
// SweepLearned removes the owner's routes whose mark is not the one to keep.
// Marks are written in place on stored routes (only the writer reads them);
// Abort restores the ones the transaction changed.
//
// Locking: inside a Txn (FIB writer lock).

import (
	"errors"
	"net/netip"
	"slices"

	"github.com/gaissmai/bart"
	"github.com/netfwd/netfwd/nexthop"
)

// LearnedRoute is a route as a routing source gives it.
type LearnedRoute struct {
	Table  uint32 // 0: main
	Prefix netip.Prefix
	Type   Type
	Proto  Proto
	Scope  Scope
	Metric uint32
	Src    netip.Addr
	// NH is the route's nexthop with one reference held for this route
	// (nexthop.Registry.Implicit, or Hold on a shared object); the FIB takes
	// the reference over, also when SetLearned fails. Nil only for throw.
	NH *nexthop.Nexthop
}

// LearnedMode is how SetLearned treats the owner's routes of the same
// table, prefix and metric (the kernel's NLM_F_* flags of RTM_NEWROUTE).
type LearnedMode uint8

const (
	// LearnedReplace replaces the first of them, or adds (CREATE|REPLACE:
	// what zebra sends).
	LearnedReplace LearnedMode = iota
	// LearnedAppend adds after them unless an identical one exists (APPEND,
	// and the routes of a dump in order).
	LearnedAppend
	// LearnedPrepend adds before them unless an identical one exists
	// (CREATE without REPLACE or APPEND).
	LearnedPrepend
)

// SetResult says what SetLearned did.
type SetResult uint8

const (
	// Unchanged: an identical route was there; only its mark was refreshed.
	Unchanged SetResult = iota
	Added
	Replaced
)

// ErrLearnedRoute is SetLearned's error for a route that cannot be stored.
var ErrLearnedRoute = errors.New("invalid learned route")

// learnedTxn is a transaction's state of learned-route writes.
type learnedTxn struct {
	pending []routeRef // (table, prefix) whose merged entries wait for flushLearned
	marks   []markUndo // marks changed in place, for Abort
}

type markUndo struct {
	r    *Route
	mark uint8
}

// routeList1 holds a one-route list and its route in one allocation: most
// prefixes of a learned table have exactly one route.
type routeList1 struct {
	rl  routeList
	one [1]*Route
	r   Route
}

func newSingle(table uint32, owner Owner, mark uint8, r *LearnedRoute) *routeList {
	b := &routeList1{r: Route{Table: table, Owner: owner, Mark: mark, Prefix: r.Prefix, Type: r.Type, Proto: r.Proto,
		Scope: r.Scope, Metric: r.Metric, Src: r.Src, NH: r.NH}}
	b.one[0] = &b.r
	b.rl.routes = b.one[:]
	return &b.rl
}

// sameLearned reports whether a stored route equals a learned one in
// everything lookups and dumps see.
func sameLearned(o *Route, r *LearnedRoute) bool {
	return o.Type == r.Type && o.Proto == r.Proto && o.Scope == r.Scope && o.Src == r.Src && o.NH == r.NH
}

// SetLearned installs a learned route of owner (see LearnedMode), stamped
// with mark.
func (tx *Txn) SetLearned(owner Owner, mark uint8, mode LearnedMode, r *LearnedRoute) (SetResult, error) {
	table := r.Table
	if table == 0 {
		table = TableMain
	}
	if !r.Prefix.Addr().Is4() || r.Prefix.Masked() != r.Prefix || (r.NH == nil) != (r.Type == Throw) {
		tx.releaseNH(r.NH)
		return 0, ErrLearnedRoute
	}
	var next *routeList
	var res SetResult
	if t := tx.ownedTable(table); t != nil {
		// In place: one walk of the trie finds the list and stores the
		// new one.
		t.Modify(r.Prefix, func(old *routeList, ok bool) (*routeList, bool) {
			var list []*Route
			if ok {
				list = old.routes
			}
			next, res = tx.learnedList(list, table, owner, mark, mode, r)
			if next == nil {
				return old, !ok
			}
			if ok {
				tx.countLists(table, old, next)
			} else {
				tx.countLists(table, nil, next)
			}
			return next, false
		})
	} else {
		next, res = tx.learnedList(tx.getList(table, r.Prefix), table, owner, mark, mode, r)
		if next != nil {
			tx.storeList(table, r.Prefix, next)
		}
	}
	if next != nil {
		tx.updateMergedLearned(table, r.Prefix, next.routes)
	}
	return res, nil
}

// ownedTable returns table id's trie if the transaction updates it in
// place (cloning it on first touch, as storeList does), else nil.
func (tx *Txn) ownedTable(id uint32) *routeTrie {
	if !tx.bulk || !tx.tablesCopied {
		return nil
	}
	t := tx.next.tables[id]
	if t == nil {
		return nil
	}
	if !tx.ownedTables[id] {
		t = t.Clone()
		tx.next.tables[id] = t
		tx.ownedTables[id] = true
	}
	return t
}

// learnedList computes the list of a prefix after SetLearned: nil when the
// route is there already (its mark refreshed).
func (tx *Txn) learnedList(list []*Route, table uint32, owner Owner, mark uint8, mode LearnedMode, r *LearnedRoute) (*routeList, SetResult) {
	first, last := -1, -1 // the owner's routes of this metric
	for i, o := range list {
		if o.Owner == owner && o.Metric == r.Metric {
			if first < 0 {
				first = i
			}
			last = i
			if mode != LearnedReplace && sameLearned(o, r) {
				tx.remark(o, mark)
				tx.releaseNH(r.NH)
				return nil, Unchanged
			}
		}
	}
	if mode == LearnedReplace && first >= 0 && sameLearned(list[first], r) {
		tx.remark(list[first], mark)
		tx.releaseNH(r.NH)
		return nil, Unchanged
	}
	if len(list) == 0 || len(list) == 1 && mode == LearnedReplace && first == 0 {
		next := newSingle(table, owner, mark, r)
		if first == 0 {
			tx.release(list[0])
			return next, Replaced
		}
		return next, Added
	}
	rp := &Route{Table: table, Owner: owner, Mark: mark, Prefix: r.Prefix, Type: r.Type, Proto: r.Proto,
		Scope: r.Scope, Metric: r.Metric, Src: r.Src, NH: r.NH}
	var routes []*Route
	res := Added
	switch {
	case mode == LearnedReplace && first >= 0:
		routes = slices.Clone(list)
		tx.release(routes[first])
		routes[first] = rp
		res = Replaced
	case mode == LearnedAppend && last >= 0:
		routes = slices.Insert(slices.Clone(list), last+1, rp)
	case mode == LearnedPrepend && first >= 0:
		routes = slices.Insert(slices.Clone(list), first, rp)
	default:
		routes = insertSorted(list, rp)
	}
	return &routeList{routes: routes}, res
}

// updateMergedLearned brings the merged trie up to date after a learned
// route was stored at (table, p), whose list is now routes.
func (tx *Txn) updateMergedLearned(table uint32, p netip.Prefix, routes []*Route) {
	if table != TableMain {
		tx.updateMerged(table, p)
		return
	}
	if lt := tx.table(TableLocal); lt != nil && lt.OverlapsPrefix(p) {
		tx.updateMerged(table, p)
		return
	}
	// Nothing of table local contains or lies inside p: p's merged value is
	// the deciding route of its own list.
	var d *Route
	for _, r := range routes {
		if !r.dead() {
			d = r
			break
		}
	}
	if d == nil || d.Type == Throw {
		tx.updateMerged(table, p)
		return
	}
	tx.mergedSetIfChanged(p, d.NH)
}

// mergedSetIfChanged stores nh at p unless it is there: in place with one
// walk of the trie when the transaction owns it.
func (tx *Txn) mergedSetIfChanged(p netip.Prefix, nh *nexthop.Nexthop) {
	if tx.bulk {
		tx.ownMerged()
		changed := false
		set := func(old *nexthop.Nexthop, ok bool) (*nexthop.Nexthop, bool) {
			changed = !ok || old != nh
			return nh, false
		}
		switch m := tx.next.merged.(type) {
		case trieOf[*bart.Fast[*nexthop.Nexthop]]:
			m.t.Modify(p, set)
		case trieOf[*bart.Table[*nexthop.Nexthop]]:
			m.t.Modify(p, set)
		default:
			tx.mergedSetSlow(p, nh)
			return
		}
		if changed {
			tx.next.sinceCompact++ // as mergedSet counts (compact.go)
			tx.logChange(mergedChange{prefix: p, nh: nh})
		}
		return
	}
	tx.mergedSetSlow(p, nh)
}

func (tx *Txn) mergedSetSlow(p netip.Prefix, nh *nexthop.Nexthop) {
	if old, had := tx.next.merged.get(p); !had || old != nh {
		tx.mergedSet(p, nh)
	}
}

// LearnedMatch selects the learned route DelLearned removes: the owner's
// first route at (Table, Prefix) that matches every field that is set.
type LearnedMatch struct {
	Table     uint32 // 0: main
	Prefix    netip.Prefix
	Metric    uint32
	MetricSet bool
	Type      Type
	TypeSet   bool
	Proto     Proto            // 0: any
	NH        *nexthop.Nexthop // nil: any
}

// DelLearned removes the owner's first route matching m. It reports whether
// one was found.
func (tx *Txn) DelLearned(owner Owner, m *LearnedMatch) bool {
	table := m.Table
	if table == 0 {
		table = TableMain
	}
	list := tx.getList(table, m.Prefix)
	for i, r := range list {
		if r.Owner != owner || m.MetricSet && r.Metric != m.Metric || m.TypeSet && r.Type != m.Type ||
			m.Proto != 0 && r.Proto != m.Proto || m.NH != nil && r.NH != m.NH {
			continue
		}
		tx.setList(table, m.Prefix, slices.Delete(slices.Clone(list), i, i+1))
		tx.release(r)
		tx.deferMerged(table, m.Prefix)
		return true
	}
	return false
}

// deferMerged queues a merged-trie update for flushLearned.
func (tx *Txn) deferMerged(table uint32, p netip.Prefix) {
	if table == TableMain || table == TableLocal {
		tx.learned.pending = append(tx.learned.pending, routeRef{table, p})
	}
}

// flushLearned applies the merged-trie updates deferred by deletions.
// Commit calls it; a caller may call it earlier.
func (tx *Txn) flushLearned() {
	pending := tx.learned.pending
	tx.learned.pending = tx.learned.pending[:0]
	for _, ref := range pending {
		tx.updateMerged(ref.table, ref.prefix)
	}
}

// SweepLearned removes the owner's routes whose mark is not keep (in every
// table) and returns how many it removed.
func (tx *Txn) SweepLearned(owner Owner, keep uint8) int {
	return tx.removeLearnedWhere(func(r *Route) bool { return r.Owner == owner && r.Mark != keep })
}

// SweepLearnedIn is SweepLearned limited to the tables in reports true for
// (a source whose replay covers only some tables sweeps only those).
func (tx *Txn) SweepLearnedIn(owner Owner, keep uint8, in func(table uint32) bool) int {
	return tx.removeLearnedWhere(func(r *Route) bool { return r.Owner == owner && r.Mark != keep && in(r.Table) })
}

// DropLearned removes all of the owner's routes and returns how many.
func (tx *Txn) DropLearned(owner Owner) int {
	return tx.removeLearnedWhere(func(r *Route) bool { return r.Owner == owner })
}

func (tx *Txn) removeLearnedWhere(stale func(*Route) bool) int {
	n := 0
	for _, ref := range tx.prefixesWhere(stale) {
		list := tx.getList(ref.table, ref.prefix)
		keepList := make([]*Route, 0, len(list))
		for _, r := range list {
			if stale(r) {
				tx.release(r)
				n++
			} else {
				keepList = append(keepList, r)
			}
		}
		tx.setList(ref.table, ref.prefix, keepList)
		tx.deferMerged(ref.table, ref.prefix)
	}
	return n
}

// LearnedCount returns the number of the owner's routes in the
// transaction's state, and how many of them carry mark.
func (tx *Txn) LearnedCount(owner Owner, mark uint8) (all, marked int) {
	for _, t := range tx.next.tables {
		for _, rl := range t.All4() {
			for _, r := range rl.routes {
				if r.Owner == owner {
					all++
					if r.Mark == mark {
						marked++
					}
				}
			}
		}
	}
	return all, marked
}

// RemarkLearned gives the owner's routes that carry mark from the mark to
// instead (in place, undone by Abort) and returns how many it changed. A
// source whose marks wrap around calls it when it reuses a mark, so that
// routes last confirmed a full cycle ago do not pass for confirmed ones.
func (tx *Txn) RemarkLearned(owner Owner, from, to uint8) int {
	n := 0
	for _, t := range tx.next.tables {
		for _, rl := range t.All4() {
			for _, r := range rl.routes {
				if r.Owner == owner && r.Mark == from {
					tx.remark(r, to)
					n++
				}
			}
		}
	}
	return n
}

// StaleProtos returns the protocols of the owner's routes whose mark is not
// keep.
func (tx *Txn) StaleProtos(owner Owner, keep uint8) []Proto {
	var seen [256]bool
	var out []Proto
	for _, ref := range tx.prefixesWhere(func(r *Route) bool { return r.Owner == owner && r.Mark != keep }) {
		for _, r := range tx.getList(ref.table, ref.prefix) {
			if r.Owner == owner && r.Mark != keep && !seen[r.Proto] {
				seen[r.Proto] = true
				out = append(out, r.Proto)
			}
		}
	}
	slices.Sort(out)
	return out
}

// RoutesOf returns the owner's routes of the published state (all tables).
func (f *FIB) RoutesOf(owner Owner) []*Route {
	var out []*Route
	for _, r := range f.Routes(TableAll) {
		if r.Owner == owner {
			out = append(out, r)
		}
	}
	return out
}

func (tx *Txn) remark(r *Route, mark uint8) {
	if r.Mark == mark {
		return
	}
	tx.learned.marks = append(tx.learned.marks, markUndo{r, r.Mark})
	r.Mark = mark
}

func (tx *Txn) releaseNH(nh *nexthop.Nexthop) {
	if nh != nil {
		tx.f.nhs.Release(nh)
	}
}

// abortLearned restores the marks the transaction changed.
func (tx *Txn) abortLearned() {
	for i := len(tx.learned.marks) - 1; i >= 0; i-- {
		m := tx.learned.marks[i]
		m.r.Mark = m.mark
	}
}

// RepointLearned moves the owner's routes from nexthop old to new (the
// kernel's `ip nexthop replace`: routes follow their nexthop id) and
// returns how many moved. It walks the tables.
func (tx *Txn) RepointLearned(owner Owner, old, new *nexthop.Nexthop) int {
	uses := func(r *Route) bool { return r.Owner == owner && r.NH == old }
	n := 0
	for _, ref := range tx.prefixesWhere(uses) {
		list := tx.getList(ref.table, ref.prefix)
		next := make([]*Route, len(list))
		for i, r := range list {
			next[i] = r
			if uses(r) {
				c := *r
				c.NH = new
				tx.f.nhs.Hold(new)
				tx.release(r)
				next[i] = &c
				n++
			}
		}
		tx.setList(ref.table, ref.prefix, next)
		tx.updateMerged(ref.table, ref.prefix)
	}
	return n
}

// DelLearnedUsing deletes the owner's routes through nexthop nh (the
// kernel's `ip nexthop del`: routes using it go) and returns how many.
func (tx *Txn) DelLearnedUsing(owner Owner, nh *nexthop.Nexthop) int {
	return tx.removeLearnedWhere(func(r *Route) bool { return r.Owner == owner && r.NH == nh })
}

// Bulk reports whether the transaction updates its tries in place (a large
// transaction, see Begin) rather than copy-on-write.
func (tx *Txn) Bulk() bool { return tx.bulk }

// AllowChanges lets observers replay up to n merged-trie changes of this
// transaction one by one (the compiled FIB stores a /24 in ~100 ns) before
// they rebuild from the whole trie instead (a quarter of a second for the
// full table): learned batches of a few hundred thousand routes are
// cheaper to replay.
func (tx *Txn) AllowChanges(n int) { tx.changeLimit = n }

// Nexthops is the nexthop registry of the transaction: learned-route
// writers make and share their nexthop objects through it.
func (tx *Txn) Nexthops() *nexthop.Registry { return tx.f.nhs }
