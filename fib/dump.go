package fib

// Dumps: the routes of each table as configured (internal/show prints them
// as `ip route show` and `ip -j route show` do). The merged trie is never
// dumped; dumps read the per-table tries of one published state.
//
// Locking: lock-free (one published state).

import (
	"slices"
)

// TableAll asks Routes for every table.
const TableAll uint32 = 0

// Routes returns the routes of a table (TableAll: all tables, main first,
// then local, then numbered ones), in prefix order, best first within a
// prefix.
func (f *FIB) Routes(table uint32) []*Route {
	s := f.cur.Load()
	var ids []uint32
	if table != TableAll {
		ids = []uint32{table}
	} else {
		for id := range s.tables {
			ids = append(ids, id)
		}
		order := func(id uint32) int {
			switch id {
			case TableMain:
				return 0
			case TableLocal:
				return 1
			}
			return 2
		}
		slices.SortFunc(ids, func(a, b uint32) int {
			if d := order(a) - order(b); d != 0 {
				return d
			}
			return int(int64(a) - int64(b))
		})
	}
	var out []*Route
	for _, id := range ids {
		t := s.tables[id]
		if t == nil {
			continue
		}
		for _, rl := range t.AllSorted4() {
			out = append(out, rl.routes...)
		}
	}
	return out
}

// RouteCounts returns the number of routes per table and type (for metrics).
func (f *FIB) RouteCounts() map[uint32]map[Type]int {
	s := f.cur.Load()
	out := map[uint32]map[Type]int{}
	for id := range s.tables {
		m := map[Type]int{}
		for typ, n := range s.counts[id] {
			if n != 0 {
				m[Type(typ)] = n
			}
		}
		out[id] = m
	}
	return out
}

// Size returns the number of prefixes of the lookup structure (the merged
// trie of local and main): writers size their batches by it.
func (f *FIB) Size() int { return f.cur.Load().merged.size() }
