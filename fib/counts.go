package fib

// Route counts per table and type, kept as lists are stored so that
// RouteCounts (every metrics scrape) costs the number of tables, not a walk
// of a full table (~50 ms for 900,000 routes).
//
// Flow: every change of a table's list goes through storeList or
// SetLearned's in-place Modify; both know the old and the new list and call
// countLists. The state's map is copied on the transaction's first change
// (states are immutable once published).
//
// Locking: writer side (the FIB's writer lock); readers load the published
// state's map, which is never written again.

import "maps"

// typeCounts are one table's routes by Type.
type typeCounts [len(typeNames)]int

// countLists accounts for table id's list at one prefix changing from old to
// next (either may be nil).
func (tx *Txn) countLists(id uint32, old, next *routeList) {
	if old == next {
		return
	}
	if !tx.countsCopied {
		tx.next.counts = maps.Clone(tx.base.counts)
		if tx.next.counts == nil {
			tx.next.counts = map[uint32]typeCounts{}
		}
		tx.countsCopied = true
	}
	c := tx.next.counts[id]
	if old != nil {
		for _, r := range old.routes {
			c[r.Type]--
		}
	}
	if next != nil {
		for _, r := range next.routes {
			c[r.Type]++
		}
	}
	tx.next.counts[id] = c
}
