// Package fdbbench gives the fdb benchmark suite (package bench) a bridge's
// forwarding database outside any bridge, driven through the datapath's own
// learn and lookup functions, which are no part of l2's API. Package l2
// installs the constructor when it is initialised.
package fdbbench

import "github.com/netfwd/netfwd/wire"

// Table is one FDB with one port-VLAN to learn on.
type Table interface {
	// Learn is ingress learning of source m in vid (a refresh, or a new
	// entry through the writer lock).
	Learn(m wire.MAC, vid uint16)
	// Lookup is a destination lookup; it reports a hit.
	Lookup(m wire.MAC, vid uint16) bool
	// Forget deletes m in vid, as ageing does.
	Forget(m wire.MAC, vid uint16)
	// Probes is how many buckets a lookup of m in vid reads (1: its home
	// bucket).
	Probes(m wire.MAC, vid uint16) int
	// Len is the number of entries.
	Len() int
}

var newTable func(maxLearned uint32) Table

// Install is called by package l2.
func Install(f func(maxLearned uint32) Table) { newTable = f }

// New returns an empty table with the bridge-wide learned-entry limit
// maxLearned (fdb_max_learned; 0 means the bridge's default limit,
// l2.DefaultFDBMaxLearned, not unlimited).
func New(maxLearned uint32) Table { return newTable(maxLearned) }
