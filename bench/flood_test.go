package bench

import (
	"fmt"
	"testing"
)

// BenchmarkFlood runs the flood suite's cases under go test -bench.
func BenchmarkFlood(b *testing.B) {
	for _, c := range FloodCases() {
		impl := "bridge"
		if c.Naive {
			impl = "naive"
		}
		b.Run(fmt.Sprintf("%s/vids=%d/ports=%d/members=%d", impl, c.VIDs, c.Ports, c.Members), func(b *testing.B) {
			s, err := NewFloodSetup(c)
			if err != nil {
				b.Fatal(err)
			}
			s.Run(64)
			b.ReportAllocs()
			b.ResetTimer()
			s.Run(b.N)
		})
	}
}

// TestFloodCasesFlood checks every case's topology floods M-1 copies (the
// suite checks it too before timing).
func TestFloodCasesFlood(t *testing.T) {
	for _, c := range FloodCases() {
		if c.VIDs == 1024 && testing.Short() {
			continue
		}
		s, err := NewFloodSetup(c)
		if err != nil {
			t.Fatal(err)
		}
		s.Run(10)
		if s.count != 10*(c.Members-1) {
			t.Fatalf("%+v: %d copies", c, s.count)
		}
	}
}
