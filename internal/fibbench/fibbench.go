// Package fibbench gives the fib benchmark suite (package bench) and tests
// of FIB writers read access to internals of a fib.FIB that are no part of
// its API: the merged trie (the floor a bare trie with the same content
// sets), the compiled DIR-24-8 table, and the merged trie's changes per
// commit (what a follower such as the compiled table sees). Package fib installs the hooks when it is initialised; the
// FIB arguments are *fib.FIB (this package cannot name the type: fib imports
// it).
package fibbench

import (
	"iter"
	"net/netip"
	"sync/atomic"

	"github.com/netfwd/netfwd/fib/dir24"
	"github.com/netfwd/netfwd/nexthop"
)

// Hooks are the functions package fib installs.
type Hooks struct {
	// Merged iterates the merged trie of the published state: every prefix
	// with its effective nexthop (nil: no route), sorted.
	Merged func(f any) iter.Seq2[netip.Prefix, *nexthop.Nexthop]
	// Compiled returns the pointer through which compiled-mode lookups load
	// the table (nil in trie mode).
	Compiled func(f any) *atomic.Pointer[dir24.Table]
	// Observe calls fn with every later change of the merged trie, in
	// commit order (Rebuild: a commit too large to list), after one
	// Rebuild for the current state.
	Observe func(f any, fn func(Change))
}

// Change is one change of the merged trie.
type Change struct {
	Prefix  netip.Prefix
	NH      *nexthop.Nexthop
	Deleted bool
	Rebuild bool
}

// Observe calls fn with f's merged-trie changes (f is a *fib.FIB).
func Observe(f any, fn func(Change)) { hooks.Observe(f, fn) }

var hooks Hooks

// Install is called by package fib.
func Install(h Hooks) { hooks = h }

// Merged iterates f's merged trie (f is a *fib.FIB).
func Merged(f any) iter.Seq2[netip.Prefix, *nexthop.Nexthop] { return hooks.Merged(f) }

// Compiled returns f's compiled table pointer, nil in trie mode.
func Compiled(f any) *atomic.Pointer[dir24.Table] { return hooks.Compiled(f) }
