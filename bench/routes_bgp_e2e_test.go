package bench

import (
	"math"
	"os"
	"testing"

	"github.com/netfwd/netfwd/internal/routinglab"
	"github.com/netfwd/netfwd/internal/testenv"
)

// bgpE2ETestRoutes keeps the test within a minute: FRR's first load runs
// at tens of thousands of routes per second here.
const bgpE2ETestRoutes = 20_000

// `netfwd-bench routes --quick --only bgp-e2e --routes 20000` (root, FRR,
// BIRD): one record whose times are all measured and ordered as they must
// be, with netfwd's FIB and the kernel's table each holding every prefix
// at the end, after netfwd's restart.
func TestRoutesBGPE2EQuick(t *testing.T) {
	testenv.RequireRoot(t, "bird", "birdc", "vtysh", "ss", routinglab.Zebra, routinglab.Bgpd)
	if testing.Short() {
		t.Skip("runs FRR and BIRD for about 30 s")
	}
	if _, err := routesPrefixes(bgpE2ETestRoutes); err != nil {
		if os.Getenv("NETFWD_E2E") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	buildNetfwd(t)
	recs, err := runRoutes(Options{Quick: true, Only: []string{"bgp-e2e"}, Routes: bgpE2ETestRoutes, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Impl != "bgp-e2e" {
		t.Fatalf("want one bgp-e2e record, got %+v", recs)
	}
	r := recs[0]
	t.Logf("record: params %v ns_op %.1f mops %.4f extra %v", r.Params, r.NsOp, r.Mops, r.Extra)
	if e, ok := r.Extra["error"]; ok {
		t.Fatalf("bgp-e2e did not run: %v", e)
	}
	if r.Params["routes"] != bgpE2ETestRoutes {
		t.Errorf("params.routes = %v, want %d", r.Params["routes"], bgpE2ETestRoutes)
	}
	num := func(key string) float64 {
		t.Helper()
		v, ok := r.Extra[key].(float64)
		if !ok {
			if i, isInt := r.Extra[key].(int); isInt {
				return float64(i)
			}
			t.Errorf("extra.%s missing or not a number: %v", key, r.Extra[key])
		}
		return v
	}
	for _, k := range []string{"established_to_netfwd_s", "established_to_kernel_s", "established_to_last_fpm_s",
		"restart_to_connect_s", "restart_to_full_s", "restart_to_last_fpm_s", "replay_s", "zebra_cpu_s", "netfwd_cpu_s", "restart_netfwd_cpu_s"} {
		// 0 is a time too: a fast machine finishes a step within one
		// poll, and CPU times come in 10 ms ticks. The route counts
		// below are what says the step happened.
		if v := num(k); !(v >= 0 && v < 120) {
			t.Errorf("extra.%s = %v, want a time in [0, 120) s", k, v)
		}
	}
	if r.NsOp < 0 || r.Mops < 0 || math.IsInf(r.Mops, 0) {
		t.Errorf("ns_op %v, mops %v: want the first load's rate (0 when it took less than a poll)", r.NsOp, r.Mops)
	}
	for _, k := range []string{"netfwd_routes", "kernel_routes"} {
		if v := num(k); v != bgpE2ETestRoutes {
			t.Errorf("extra.%s = %v, want all %d prefixes", k, v, bgpE2ETestRoutes)
		}
	}
	if m := num("fpm_messages"); m < bgpE2ETestRoutes {
		t.Errorf("netfwd counted %v FPM messages for %d routes", m, bgpE2ETestRoutes)
	}
	// A restarted netfwd seeds zebra's routes from the kernel at start
	// (internal/fpm/seed.go): its FIB is full before zebra reconnects (on
	// its own ~3 s timer), whose replay then confirms them.
	if c, f := num("restart_to_connect_s"), num("restart_to_full_s"); f >= c {
		t.Errorf("restart: full FIB after %v s, not before zebra connected (after %v s)", f, c)
	}
	if c := r.Extra["kernel_clock"]; c != "notifications" && c != "dump-1s" {
		t.Errorf("kernel_clock %v", c)
	}
	// ss (iproute2, like ip) dates zebra's last message.
	if c := r.Extra["last_fpm_clock"]; c != "tcp_info" {
		t.Errorf("last_fpm_clock %v, want tcp_info", c)
	}
}
