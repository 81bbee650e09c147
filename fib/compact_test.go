package fib

import (
	"maps"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/gaissmai/bart"
	"github.com/netfwd/netfwd/internal/fulltable"
	"github.com/netfwd/netfwd/nexthop"
)

// trieLines counts the distinct 64-byte cache lines that a bart.Fast's IPv4
// nodes and item arrays occupy, by walking bart's unexported structure with
// reflection (ok false if bart's layout changed and the walk cannot tell).
func trieLines(t any) (lines int, ok bool) {
	seen := map[uintptr]bool{}
	add := func(p, size uintptr) {
		for a := p &^ 63; a < p+size; a += 64 {
			seen[a] = true
		}
	}
	var walk func(n reflect.Value) bool
	walk = func(n reflect.Value) bool {
		for _, f := range []string{"Prefixes", "Children"} {
			items := n.FieldByName(f).FieldByName("Items")
			if items.Kind() != reflect.Slice {
				return false
			}
			if items.Cap() > 0 {
				add(items.Pointer(), uintptr(items.Cap())*items.Type().Elem().Size())
			}
			if f != "Children" {
				continue
			}
			for i := range items.Len() {
				kid := items.Index(i).Elem()
				if kid.Kind() != reflect.Pointer {
					return false
				}
				add(kid.Pointer(), kid.Type().Elem().Size())
				if strings.Contains(kid.Type().String(), "FastNode") && !walk(kid.Elem()) {
					return false
				}
			}
		}
		return true
	}
	root := reflect.ValueOf(t).Elem().FieldByName("root4")
	if !root.IsValid() || !walk(root) {
		return 0, false
	}
	return len(seen), true
}

func loadTable(t *testing.T, n int) (*FIB, []netip.Prefix) {
	return loadTableVia(t, n, false)
}

// loadTableVia is loadTable with learned routes (SetLearned: the FPM's and
// the kernel mirror's path) when learned is set.
func loadTableVia(t *testing.T, n int, learned bool) (*FIB, []netip.Prefix) {
	t.Helper()
	all, err := fulltable.Load()
	if err != nil {
		t.Skip(err)
	}
	all = all[:min(n, len(all))]
	f := New(Options{})
	tx := f.Begin(len(all))
	if err := tx.AddAddress("eth0", netip.MustParsePrefix("192.0.2.1/24")); err != nil {
		t.Fatal(err)
	}
	var nh *nexthop.Nexthop
	if learned {
		if nh, err = tx.Nexthops().Implicit(nexthop.Spec{Gateway: netip.MustParseAddr("192.0.2.254"), Dev: "eth0"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range all {
		if learned {
			tx.Nexthops().Hold(nh)
			_, err = tx.SetLearned(OwnerFPM, 1, LearnedReplace, &LearnedRoute{Prefix: p, Proto: ProtoBGP, Metric: 20, NH: nh})
		} else {
			err = tx.AddRoute(benchRoute(p))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if learned {
		tx.releaseNH(nh)
	}
	tx.Commit()
	return f, all
}

func benchRoute(p netip.Prefix) RouteSpec {
	return RouteSpec{Prefix: p, Gateway: netip.MustParseAddr("192.0.2.254"), Dev: "eth0", Proto: ProtoBGP, Metric: 20, MetricSet: true}
}

// After a bulk load the merged trie is as compact as a fresh copy of it:
// built in place between the per-table tries' allocations it took 1.5x (100,000
// routes) to 1.6x (the full table) the cache lines (compact.go).
func TestBulkLoadLeavesMergedTrieCompact(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 100,000 routes")
	}
	for _, learned := range []bool{false, true} {
		t.Run(map[bool]string{false: "config", true: "learned"}[learned], func(t *testing.T) {
			testBulkLoadCompact(t, learned)
		})
	}
}

func testBulkLoadCompact(t *testing.T, learned bool) {
	f, _ := loadTableVia(t, 100_000, learned)
	if err := f.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	s := f.cur.Load()
	got, ok := trieLines(s.fast)
	if !ok {
		t.Skip("bart's node layout changed: the line count needs updating")
	}
	want, _ := trieLines(s.fast.Clone())
	t.Logf("merged trie: %d cache lines, a fresh copy: %d", got, want)
	if float64(got) > 1.1*float64(want) {
		t.Errorf("merged trie spans %d cache lines, a copy of it %d: not compacted", got, want)
	}
	if s.sinceCompact != 0 {
		t.Errorf("sinceCompact = %d after a compacting commit", s.sinceCompact)
	}
}

// Copy-on-write changes count towards the next compaction, which happens
// at a quarter of the trie and changes nothing that lookups see.
func TestChurnCompactsWithoutChangingContent(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 20,000 routes")
	}
	f, all := loadTable(t, 20_000)
	before := f.cur.Load().merged
	size := before.size()
	want := maps.Collect(before.all())
	compacted := false
	for i := 0; i < size/compactFraction+10 && !compacted; i++ {
		p := all[(i*7919)%len(all)]
		for _, add := range []bool{false, true} {
			tx := f.Begin(1)
			var err error
			if add {
				err = tx.AddRoute(benchRoute(p))
			} else {
				err = tx.DelRoute(benchRoute(p))
			}
			if err != nil {
				t.Fatal(err)
			}
			prev := f.cur.Load().sinceCompact
			tx.Commit()
			if f.cur.Load().sinceCompact < prev {
				compacted = true
			}
		}
	}
	if !compacted {
		t.Fatalf("no compaction after %d changes of a %d-prefix trie", 2*(size/compactFraction+10), size)
	}
	got := maps.Collect(f.cur.Load().merged.all())
	if !maps.EqualFunc(got, want, func(a, b *nexthop.Nexthop) bool { return a == b }) {
		t.Errorf("merged trie after churn and compaction: %d prefixes, want %d (or values differ)", len(got), len(want))
	}
	ref := new(bart.Fast[*nexthop.Nexthop])
	for p, nh := range want {
		ref.Insert(p, nh)
	}
	for _, a := range fulltable.RandomProbes(all, 4096, 1) {
		if got, _ := ref.Lookup(a); f.Lookup(a) != got {
			t.Fatalf("Lookup(%s) = %v after compaction, want %v", a, f.Lookup(a), got)
		}
	}
}
