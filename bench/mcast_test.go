package bench

import (
	"testing"

	"github.com/netfwd/netfwd/l2"
)

// BenchmarkMcast runs the mcast suite's impls under go test -bench.
func BenchmarkMcast(b *testing.B) {
	for _, impl := range []string{"nofilter", "filter"} {
		b.Run(impl, func(b *testing.B) {
			s, err := NewMcastSetup(impl == "filter")
			if err != nil {
				b.Fatal(err)
			}
			s.Run(1024)
			b.ReportAllocs()
			b.ResetTimer()
			s.Run(b.N)
		})
	}
}

// TestMcastFilterDropsEarly: with the filter the frames die at ingress
// (counted as filtered, nothing deferred); without it they go the flood
// path and die there. No allocations either way.
func TestMcastFilterDropsEarly(t *testing.T) {
	for _, filter := range []bool{false, true} {
		s, err := NewMcastSetup(filter)
		if err != nil {
			t.Fatal(err)
		}
		s.Run(64)
		if n := testing.AllocsPerRun(20, func() { s.Run(64) }); n != 0 {
			t.Fatalf("filter=%v: %v allocs per 64 frames", filter, n)
		}
		st := s.D.Stats()
		if filter && (st.Drops[l2.DropMcastFiltered] == 0 || st.FloodDeferred != 0) {
			t.Fatalf("filter: %+v", st)
		}
		if !filter && (st.Drops[l2.DropMcastFiltered] != 0 || st.Drops[l2.DropNoFloodTarget] == 0) {
			t.Fatalf("nofilter: %+v", st)
		}
	}
}
