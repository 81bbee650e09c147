package fib

// Compaction of the merged trie: after enough changes, the commit replaces
// the merged trie with a copy of itself, allocated in one walk.
//
// Why: a trie built or changed prefix by prefix has its nodes spread over the
// heap. The allocator groups objects by size class, not by owner, so the
// merged trie's nodes and item arrays sit between the per-table tries' nodes
// and the routes that were allocated at the same time, and copy-on-write
// updates put every new path somewhere else. Random lookups then touch more
// cache lines and pages than the structure needs: for the full table, the
// trie built by a bulk load took 660,000 cache lines over 68 MiB of pages,
// its copy 412,000 lines over 27 MiB, and lookups on the built one were
// 1.2-1.3x slower than a bare bart trie with the same content (docs/fib.md,
// "Memory layout"). A copy costs ~100 ms per million prefixes.
//
// When: once the changes since the last compaction reach a quarter of the
// trie (a bulk load reaches it by itself), so the copying stays a constant
// fraction of the writing however the table grows or churns. The clone an
// in-place transaction starts with is such a copy too (ownMerged): it
// restarts the count, so a stream of in-place batches (FPM) does not pay
// for a second copy at their commits.
//
// Locking: writer side, inside Commit, before the state is published.

// compactMinSize: smaller tries fit in the cache however they are laid out.
const compactMinSize = 4096

// compactFraction: compact when changes since the last compaction reach
// size/compactFraction.
const compactFraction = 4

// maybeCompact compacts the new state's merged trie if it is due.
func (tx *Txn) maybeCompact() {
	s := tx.next
	size := s.merged.size()
	if size < compactMinSize || s.sinceCompact < size/compactFraction {
		return
	}
	s.setMerged(s.merged.clone())
	s.sinceCompact = 0
}
