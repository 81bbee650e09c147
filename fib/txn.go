package fib

// Transactions: every change to the FIB happens inside one, and readers see
// either none or all of it.
//
// Flow: Begin takes the writer lock and starts from the published state.
// Small transactions update the tries copy-on-write (bart ...Persist), so the
// published version is never touched; bulk transactions (a config file with
// many routes, or an empty FIB) clone each trie once on first touch and then
// update in place, which is several times faster per route. Commit publishes
// the new state with one atomic store, then lets the nexthop registry release
// what the old state used and tells observers; Abort drops the new state and
// rolls the registry back.
//
// Locking: the Txn owns the FIB writer lock until Commit or Abort.

import (
	"maps"
	"net/netip"

	"github.com/netfwd/netfwd/nexthop"
)

// Txn is an open transaction. Methods are not safe for concurrent use.
type Txn struct {
	f    *FIB
	base *state
	next *state
	bulk bool // clone-on-first-touch + in-place updates instead of persist

	tablesCopied bool            // next.tables is a private copy of base.tables
	ownedTables  map[uint32]bool // bulk: tries already cloned
	countsCopied bool            // next.counts is this transaction's copy
	mergedOwned  bool            // bulk: merged trie already cloned

	changes     []mergedChange // the merged trie's changes, for observers
	overflow    bool           // too many changes: observers rebuild instead
	changeLimit int            // 0: rebuildThreshold (learned.go may raise it)
	done        bool

	learned learnedTxn // learned.go
}

// rebuildThreshold: past this many merged changes, observers rebuild instead
// of replaying changes one by one.
const rebuildThreshold = 1 << 16

// InPlaceFraction: a transaction of at least Size()/InPlaceFraction
// operations (and more than 64) runs in place: each trie is cloned once and
// then changed in place, instead of copy-on-write per change. Measured on
// the full table (901,899 prefixes, random replaces, one core): the clones
// cost ~90-120 ms, a change ~6 us in place against ~20-35 us copy-on-write,
// so the break-even is near 4,000 changes, 1/225 of the table.
const InPlaceFraction = 200

// Begin opens a transaction. sizeHint is the expected number of operations;
// large ones run in place (InPlaceFraction).
func (f *FIB) Begin(sizeHint int) *Txn {
	f.mu.Lock()
	base := f.cur.Load()
	next := *base
	next.version = base.version + 1
	tx := &Txn{f: f, base: base, next: &next, ownedTables: map[uint32]bool{}}
	size := base.merged.size()
	tx.bulk = size == 0 || sizeHint > 64 && sizeHint >= size/InPlaceFraction
	f.nhs.Begin()
	return tx
}

// Commit publishes the transaction's changes.
func (tx *Txn) Commit() {
	tx.flushLearned()
	tx.finish()
	tx.maybeCompact()
	if tx.next.tables[TableLocal] != tx.base.tables[TableLocal] {
		tx.next.own = newOwnAddrs(tx.next.tables[TableLocal])
	}
	tx.next.dflt = nil
	if t := tx.next.tables[TableDefault]; t != nil && t.Size4() > 0 {
		tx.next.dflt = t
	}
	f := tx.f
	tx.next.custom = tx.next.rules.custom
	tx.next.hotFast, tx.next.hotTable = nil, nil
	if !tx.next.custom {
		tx.next.hotFast, tx.next.hotTable = tx.next.fast, tx.next.table
	}
	f.customRules.Store(tx.next.custom)
	f.cur.Store(tx.next)
	f.nhs.Commit()
	if len(f.obs) > 0 {
		c := commitInfo{version: tx.next.version, changes: tx.changes}
		if tx.overflow {
			c = rebuildCommit(tx.next)
		} else {
			m := tx.next.merged
			c.all = m.all()
			c.parent = func(p netip.Prefix) (netip.Prefix, *nexthop.Nexthop, bool) { return mergedParent(m, p) }
		}
		for _, fn := range f.obs {
			fn(c)
		}
	}
	f.mu.Unlock()
}

// Abort discards the transaction.
func (tx *Txn) Abort() {
	tx.finish()
	tx.abortLearned()
	tx.f.nhs.Rollback()
	tx.f.mu.Unlock()
}

func (tx *Txn) finish() {
	if tx.done {
		panic("fib: transaction already finished")
	}
	tx.done = true
}

// table returns the route trie of table id in the new state (nil if absent).
func (tx *Txn) table(id uint32) *routeTrie { return tx.next.tables[id] }

// getList returns the routes at (table, prefix).
func (tx *Txn) getList(id uint32, p netip.Prefix) []*Route {
	t := tx.next.tables[id]
	if t == nil {
		return nil
	}
	if rl, ok := t.Get(p); ok {
		return rl.routes
	}
	return nil
}

// setList stores the routes of (table, prefix); an empty list removes the
// prefix. It does not touch the merged trie (see updateMerged).
func (tx *Txn) setList(id uint32, p netip.Prefix, routes []*Route) {
	var rl *routeList
	if len(routes) > 0 {
		rl = &routeList{routes: routes}
	}
	tx.storeList(id, p, rl)
}

// storeList is setList for a list object (nil removes the prefix).
func (tx *Txn) storeList(id uint32, p netip.Prefix, rl *routeList) {
	if !tx.tablesCopied {
		tx.next.tables = maps.Clone(tx.base.tables)
		tx.tablesCopied = true
	}
	t := tx.next.tables[id]
	if t == nil {
		if rl == nil {
			return
		}
		t = new(routeTrie)
		tx.next.tables[id] = t
		tx.ownedTables[id] = true
	}
	// One walk finds the old list (for the counts) and stores the new one.
	var old *routeList
	store := func(o *routeList, ok bool) (*routeList, bool) {
		if ok {
			old = o
		}
		return rl, rl == nil
	}
	if tx.bulk {
		if !tx.ownedTables[id] {
			t = t.Clone()
			tx.next.tables[id] = t
			tx.ownedTables[id] = true
		}
		t.Modify(p, store)
	} else {
		tx.next.tables[id] = t.ModifyPersist(p, store)
	}
	tx.countLists(id, old, rl)
}

// mergedSet and mergedDelete are the only places the merged trie changes:
// the change log for observers is kept here.
func (tx *Txn) mergedSet(p netip.Prefix, nh *nexthop.Nexthop) {
	tx.ownMerged()
	tx.next.setMerged(tx.next.merged.set(p, nh, !tx.bulk))
	tx.next.sinceCompact++
	tx.logChange(mergedChange{prefix: p, nh: nh})
}

func (tx *Txn) mergedDelete(p netip.Prefix) {
	tx.ownMerged()
	tx.next.setMerged(tx.next.merged.del(p, !tx.bulk))
	tx.next.sinceCompact++
	tx.logChange(mergedChange{prefix: p, deleted: true})
}

func (tx *Txn) logChange(c mergedChange) {
	if tx.overflow {
		return
	}
	if len(tx.changes) >= max(rebuildThreshold, tx.changeLimit) {
		tx.overflow, tx.changes = true, nil
		return
	}
	tx.changes = append(tx.changes, c)
}

func (tx *Txn) ownMerged() {
	if tx.bulk && !tx.mergedOwned {
		// The clone is allocated in one walk: it is a compaction
		// (compact.go), so only this transaction's changes count towards
		// the next one.
		tx.next.setMerged(tx.next.merged.clone())
		tx.next.sinceCompact = 0
		tx.mergedOwned = true
	}
}
