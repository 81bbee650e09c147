package bench

import (
	"os"
	"slices"
	"testing"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/fpm"
)

// go test -bench Routes ./bench: the loads of `netfwd bench routes`, one
// full table per iteration (-benchtime 1x is one load).
func BenchmarkRoutes(b *testing.B) {
	s, err := NewRoutesSetup(0)
	if err != nil {
		b.Skip(err)
	}
	for name, load := range s.RoutesCases() {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := load(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(s.Prefixes)), "ns/route")
		})
	}
	b.Run("fpm-replay", func(b *testing.B) {
		v, err := s.RoutesCases()["fpm-nhg"]()
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for b.Loop() {
			if _, _, err := s.replay(v.(*fib.FIB)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(s.Prefixes)), "ns/route")
	})
}

// The suite runs end to end in quick mode: every case loads the table, the
// FPM loads cost no more memory per route than the config file's, and the
// replay changes nothing; the churn records (routes_churn_test.go) make
// sense, the traffic ones where root and trafgen are here.
func TestRoutesSuiteQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 100,000 routes eight times, churns them for 30 s")
	}
	traffic := os.Geteuid() == 0 && haveTrafgen() == nil
	if traffic {
		buildNetfwd(t)
	} else if os.Getenv("NETFWD_E2E") == "1" {
		t.Error("NETFWD_E2E=1 but the traffic-churn case cannot run (root, trafgen)")
	}
	// bgp-e2e has its own test (routes_bgp_e2e_test.go).
	others := slices.DeleteFunc(slices.Clone(routesImpls), func(s string) bool { return s == "bgp-e2e" })
	recs, err := runRoutes(Options{Quick: true, Only: others, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	mem := map[string]float64{}
	for _, r := range recs {
		if r.Params["procs"] == 1 {
			if b, ok := r.Extra["bytes_per_route"].(float64); ok {
				mem[r.Impl] = b
			}
		}
	}
	// 1.04: the config load's merged trie is compacted at its commit
	// (fib/compact.go), which drops the spare capacity its in-place inserts
	// left, ~5 bytes per route (175 -> 170 for 100,000 routes); the FPM
	// loads' figures did not change (175).
	for _, impl := range []string{"fpm-nhg", "fpm-inline", "fpm-tcp"} {
		if mem[impl] == 0 || mem[impl] > mem["config-load"]*1.04 {
			t.Errorf("%s: %.0f bytes per route, config file %.0f", impl, mem[impl], mem["config-load"])
		}
	}
	_ = fpm.ApplyStream
	checkLookupChurnRecords(t, recs)
	if traffic {
		checkTrafficChurnRecords(t, recs)
	}
}
