package bench

import (
	"testing"

	"github.com/netfwd/netfwd/internal/fulltable"
)

// go test -bench Pipeline ./bench: the cases of `netfwd-bench pipeline`.
func BenchmarkPipeline(b *testing.B) {
	all, err := fulltable.Load()
	if err != nil {
		b.Skip(err)
	}
	dsts := fulltable.RandomProbes(all, 1<<20, 7)
	routed, err := NewRoutedCase(all, dsts, true)
	if err != nil {
		b.Fatal(err)
	}
	uni, err := NewBridgedUnicastCase()
	if err != nil {
		b.Fatal(err)
	}
	fl, err := NewBridgedFloodCase()
	if err != nil {
		b.Fatal(err)
	}
	for name, c := range map[string]*PipelineCase{"routed": routed, "bridged-unicast": uni, "bridged-flood": fl} {
		body := c.Body()
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			body(b.N)
		})
	}
}

func TestPipelineSuiteQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 50,000 routes")
	}
	recs, err := runPipeline(Options{Quick: true, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 6 {
		t.Fatalf("%d records", len(recs))
	}
	for _, r := range recs {
		if r.AllocsOp != 0 {
			t.Errorf("%s allocates %.2f per packet", r.Impl, r.AllocsOp)
		}
	}
}
