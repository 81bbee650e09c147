package bench

import (
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/lab"
	"github.com/netfwd/netfwd/internal/testenv"
	"github.com/netfwd/netfwd/internal/vethlab"
)

// go test -bench Veth ./bench (root): the saturation cases of `netfwd
// bench veth`, each b.N measurements of 1.5 s on its own topology.
func BenchmarkVeth(b *testing.B) {
	testenv.RequireRoot(b)
	measure := func(b *testing.B, vb *vethlab.Topology) {
		var sum, best float64
		for range b.N {
			r, err := vb.Measure(vethlab.Run{Duration: 1500 * time.Millisecond})
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("%v", r)
			sum += r.DeliveredPPS
			best = max(best, r.DeliveredPPS)
		}
		b.ReportMetric(sum/float64(b.N)/1e6, "Mpps")
		b.ReportMetric(best/1e6, "best-Mpps")
		b.ReportMetric(0, "ns/op")
	}
	b.Run("linux", func(b *testing.B) {
		vb, err := vethlab.NewTopology(vethlab.LinuxForward)
		if err != nil {
			b.Fatal(err)
		}
		defer vb.Close()
		measure(b, vb)
	})
	b.Run("netfwd", func(b *testing.B) {
		n, err := NewNetfwdVeth(0)
		if err != nil {
			b.Fatal(err)
		}
		defer n.Close()
		measure(b, n.VB)
	})
}

// TestVethSuiteQuick runs `netfwd bench veth --quick` (root) and checks its
// records: every impl present, frames delivered by both forwarders, the
// loss check offered at half of netfwd's rate, RSS sampled.
func TestVethSuiteQuick(t *testing.T) {
	testenv.RequireRoot(t)
	if testing.Short() {
		t.Skip("runs for about 15 s")
	}
	s, ok := Lookup("veth")
	if !ok {
		t.Fatal("suite veth not registered")
	}
	opts := Options{Quick: true, Log: t.Logf}
	recs, err := s.Run(opts)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string][]Record{}
	for _, r := range recs {
		if r.Suite != "veth" {
			t.Errorf("record of suite %q", r.Suite)
		}
		by[r.Impl] = append(by[r.Impl], r)
	}
	want := map[string]int{"linux": 2, "netfwd": 2, "netfwd-soak": 1}
	if lab.HaveIperf3() {
		want["linux-tcp"], want["netfwd-tcp"] = 1, 1
	}
	for impl, n := range want {
		if len(by[impl]) != n {
			t.Errorf("%d %s records, want %d", len(by[impl]), impl, n)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	for _, r := range append(by["linux"], by["netfwd"]...) {
		if r.Mops <= 0 || r.NsOp <= 0 {
			t.Errorf("%s %v: delivered nothing: %+v", r.Impl, r.Params, r)
		}
	}
	sat := by["netfwd"][0]
	half := by["netfwd"][1]
	pps, _ := half.Params["pps"].(int)
	if half.Params["rate"] != "50pct" || abs(float64(pps)-sat.Mops*1e6/2) > sat.Mops*1e6/100 {
		t.Errorf("loss check params %v, want rate 50pct at half of %v Mpps", half.Params, sat.Mops)
	}
	if _, ok := half.Extra["lost"]; !ok {
		t.Errorf("loss check without lost frames: %v", half.Extra)
	}
	soak := by["netfwd-soak"][0]
	for _, k := range []string{"rss_start_mib", "rss_end_mib", "rss_growth_mib"} {
		if v, ok := soak.Extra[k].(float64); !ok || (k != "rss_growth_mib" && v <= 0) {
			t.Errorf("soak %s = %v", k, soak.Extra[k])
		}
	}
	for _, impl := range []string{"linux-tcp", "netfwd-tcp"} {
		for _, r := range by[impl] {
			if g, _ := r.Extra["gbps"].(float64); g <= 0 {
				t.Errorf("%s: %v Gbit/s", impl, r.Extra["gbps"])
			}
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
