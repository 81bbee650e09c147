package bench

import (
	"testing"

	"github.com/netfwd/netfwd/internal/testenv"
)

// TestNDRSuiteQuick runs `netfwd-bench ndr --quick` (root, trafgen): every
// forwarder has its burst train, its loss curve and an NDR, and the
// counting holds together (a frame received that was never sent means the
// counters count something else). Rates and ratios are reported, not
// asserted: they depend on the machine.
func TestNDRSuiteQuick(t *testing.T) {
	testenv.RequireRoot(t, "trafgen")
	if testing.Short() {
		t.Skip("runs for about a minute")
	}
	buildNetfwd(t)
	s, ok := Lookup("ndr")
	if !ok {
		t.Fatal("suite ndr not registered")
	}
	recs, err := s.Run(Options{Quick: true, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	plan := ndrPlanFor(Options{Quick: true})
	type count struct{ curve, bursts, ndr int }
	got := map[string]*count{}
	for _, r := range recs {
		if r.Suite != "ndr" {
			t.Errorf("record of suite %q", r.Suite)
		}
		c := got[r.Impl]
		if c == nil {
			c = &count{}
			got[r.Impl] = c
		}
		sent, _ := r.Extra["sent"].(uint64)
		received, _ := r.Extra["received"].(uint64)
		switch p, _ := r.Params["point"].(string); p {
		case "curve":
			c.curve++
			if sent == 0 || received > sent {
				t.Errorf("%s curve at %v %%: sent %d, received %d", r.Impl, r.Params["offered_pct"], sent, received)
			}
		case "bursts":
			c.bursts++
			bursts, _ := r.Extra["bursts"].(int)
			if bursts == 0 || sent < uint64(bursts*ndrBurstFrames) || received > sent {
				t.Errorf("%s burst train: %d bursts, sent %d, received %d", r.Impl, bursts, sent, received)
			}
		case "ndr":
			c.ndr++
			gen, _ := r.Extra["generator_pps"].(float64)
			if gen <= 0 || r.Mops < 0 || r.Mops*1e6 > gen*1.001 {
				t.Errorf("%s: NDR %v Mpps outside [0, the generator's %v pps]", r.Impl, r.Mops, gen)
			}
			if r.Impl != "linux" && r.Extra["ratio_linux"] == nil && got["linux"] != nil {
				t.Errorf("%s: no ratio to Linux", r.Impl)
			}
		default:
			t.Errorf("%s: record with point %q", r.Impl, p)
		}
	}
	for _, impl := range []string{"linux", "netfwd-afpacket", "netfwd-afxdp"} {
		c := got[impl]
		if c == nil || c.curve != len(plan.curve) || c.bursts != 1 || c.ndr != 1 {
			t.Errorf("%s: records %+v, want %d curve points, 1 burst train, 1 NDR", impl, c, len(plan.curve))
		}
	}
}
