package fib

// Prepared clones: the copying an in-place transaction starts with, done
// before the transaction and outside the writer lock.
//
// Why: an in-place transaction clones the merged trie and each table it
// touches (~100-250 ms on the full table) under the writer lock, on the
// critical path of the batch: the last batch of an FPM stream becomes
// visible that much later. The published state is immutable, so a writer
// that expects another batch (FPM: its stream goes on after a commit) can
// clone it while it waits; BeginPrepared takes the clones over when
// nothing was committed in between, and ignores them otherwise.
//
// Locking: PrepareInPlace reads the published state only (no lock);
// BeginPrepared takes the writer lock as Begin does.

import "maps"

// Prepared holds clones of one published state for BeginPrepared.
type Prepared struct {
	version uint64
	merged  mtrie
	tables  map[uint32]*routeTrie
}

// PrepareInPlace clones the published merged trie and the given tables
// (absent ones are skipped) for a later in-place transaction.
func (f *FIB) PrepareInPlace(tables ...uint32) *Prepared {
	s := f.cur.Load()
	p := &Prepared{version: s.version, merged: s.merged.clone(), tables: map[uint32]*routeTrie{}}
	for _, id := range tables {
		if t := s.tables[id]; t != nil {
			p.tables[id] = t.Clone()
		}
	}
	return p
}

// BeginPrepared is Begin(sizeHint), except that when p was made from the
// state the transaction starts from, the transaction is in place, whatever
// its size, on p's clones instead of cloning again: the copying is paid, and
// an in-place change costs a few microseconds where a copy-on-write one
// costs tens (a stream's pause that commits a small batch). p (may be nil)
// must not be used again.
func (f *FIB) BeginPrepared(sizeHint int, p *Prepared) *Txn {
	tx := f.Begin(sizeHint)
	if p == nil || p.version != tx.base.version {
		return tx
	}
	tx.bulk = true
	tx.next.setMerged(p.merged)
	tx.next.sinceCompact = 0 // a clone is a compaction (ownMerged)
	tx.mergedOwned = true
	if len(p.tables) > 0 {
		tx.next.tables = maps.Clone(tx.base.tables)
		tx.tablesCopied = true
		for id, t := range p.tables {
			tx.next.tables[id] = t
			tx.ownedTables[id] = true
		}
	}
	return tx
}
