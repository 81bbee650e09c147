package bench

import (
	"fmt"
	"testing"
)

// BenchmarkFDB runs the fdb suite's cases under go test -bench.
func BenchmarkFDB(b *testing.B) {
	for _, n := range FDBEntries {
		for _, impl := range []string{"hash256", "fdb"} {
			f := NewFDBBench(n, impl == "hash256")
			b.Run(fmt.Sprintf("%s/entries=%d/op=lookup", impl, n), func(b *testing.B) {
				b.ReportAllocs()
				f.Lookup(b.N, false)
			})
			b.Run(fmt.Sprintf("%s/entries=%d/op=learn", impl, n), func(b *testing.B) {
				b.ReportAllocs()
				f.Learn(b.N)
			})
		}
	}
}

// TestFDBBenchConsistent: both impls find every station after learning
// churn (the suite's lookups panic on a miss).
func TestFDBBenchConsistent(t *testing.T) {
	for _, impl := range []bool{true, false} {
		f := NewFDBBench(3000, impl)
		f.Learn(10000)
		for _, m := range f.macs {
			if !f.lookup(m) {
				t.Fatalf("hash256=%v: %s missing", impl, m)
			}
		}
		if !impl && f.fdb.Len() != 3000 {
			t.Fatalf("fdb has %d entries", f.fdb.Len())
		}
	}
}

// TestFDBBenchTableAboveDefaultLimit: a table larger than the bridge's
// default learned limit (l2.DefaultFDBMaxLearned) is filled whole and every
// station is found (the suite's 1M case panicked with "lookups missed" when
// the benchmark's bridge kept the default limit).
func TestFDBBenchTableAboveDefaultLimit(t *testing.T) {
	const n = 100000
	f := NewFDBBench(n, false)
	if got := f.fdb.Len(); got != n {
		t.Fatalf("fdb has %d entries, want %d", got, n)
	}
	f.Lookup(1<<16, true)
	f.Learn(1000)
	if got := f.fdb.Len(); got != n {
		t.Fatalf("after learning churn fdb has %d entries, want %d", got, n)
	}
}
