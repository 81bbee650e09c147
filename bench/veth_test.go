package bench

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/netfwd/netfwd/internal/testenv"
	"github.com/netfwd/netfwd/wire"
)

// buildNetfwd builds cmd/netfwd and cmd/netfwd-bench for the suite's child
// processes and points NETFWD_BENCH_EXE (`run`) and NETFWD_BENCH_SELF
// (`bench-xdpfwd`) at them: the test binary has neither command.
func buildNetfwd(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	for _, c := range []struct{ name, env string }{{"netfwd", "NETFWD_BENCH_EXE"}, {"netfwd-bench", "NETFWD_BENCH_SELF"}} {
		exe := filepath.Join(dir, c.name)
		out, err := exec.Command("go", "build", "-o", exe, "github.com/netfwd/netfwd/cmd/"+c.name).CombinedOutput()
		if err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		t.Setenv(c.env, exe)
	}
}

// TestVethSuiteQuick runs `netfwd-bench veth --quick` (root, trafgen) and
// checks its records: every forwarder measured in both set-ups (or, for
// netfwd-afxdp on a daemon without --io, reported as not supported),
// delivering frames at ratios that make sense, the loss check offered at
// half of each forwarder's rate, TCP through each backend.
func TestVethSuiteQuick(t *testing.T) {
	testenv.RequireRoot(t, "trafgen")
	if testing.Short() {
		t.Skip("runs for about 40 s")
	}
	buildNetfwd(t)
	s, ok := Lookup("veth")
	if !ok {
		t.Fatal("suite veth not registered")
	}
	recs, err := s.Run(Options{Quick: true, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	type key struct{ impl, setup, rate string }
	by := map[key]Record{}
	for _, r := range recs {
		if r.Suite != "veth" {
			t.Errorf("record of suite %q", r.Suite)
		}
		setup, _ := r.Params["setup"].(string)
		rate, _ := r.Params["rate"].(string)
		by[key{r.Impl, setup, rate}] = r
	}
	for _, impl := range []string{"generator", "ceiling", "reflector", "reflector-generic", "minimal", "reflector-process", "linux", "netfwd-afpacket", "netfwd-afxdp", "netfwd-afxdp-generic"} {
		for _, setup := range []string{"unpinned", "onecore"} {
			r, ok := by[key{impl, setup, "max"}]
			switch {
			case !ok:
				t.Errorf("no %s %s record", impl, setup)
			case strings.HasPrefix(impl, "netfwd-afxdp") && r.Extra["error"] != nil:
				t.Logf("%s: %v", impl, r.Extra["error"])
			case r.Mops <= 0 || r.NsOp <= 0:
				t.Errorf("%s %s delivered nothing: %+v", impl, setup, r)
			case r.Extra["x_linux"] == nil || r.Extra["x_ceiling"] == nil || r.Extra["offered_mpps"].(float64) < r.Mops/2:
				t.Errorf("%s %s: ratios or offered rate missing or wrong: %+v", impl, setup, r)
			}
		}
		if impl == "ceiling" || impl == "generator" {
			continue
		}
		if r, ok := by[key{impl, "unpinned", "50pct"}]; ok {
			sat := by[key{impl, "unpinned", "max"}]
			if pps, _ := r.Params["pps"].(int); float64(pps) < sat.Mops*1e6/2*0.99 || float64(pps) > sat.Mops*1e6/2*1.01 {
				t.Errorf("%s loss check at %d pps, want half of %v Mpps", impl, pps, sat.Mops)
			}
			if _, ok := r.Extra["lost"]; !ok {
				t.Errorf("%s loss check without lost frames: %v", impl, r.Extra)
			}
		} else if by[key{impl, "unpinned", "max"}].Extra["error"] == nil {
			t.Errorf("no %s 50%% record", impl)
		}
	}
	if testenv.Have(t, "iperf3") {
		for _, impl := range []string{"linux-tcp", "netfwd-afpacket-tcp"} {
			r, ok := by[key{impl, "", ""}]
			if g, _ := r.Extra["gbps"].(float64); !ok || g <= 0 {
				t.Errorf("%s: %+v", impl, r)
			}
		}
	}
}

// TestReflectorRewrite: the reflector's TTL decrement keeps the IPv4
// header checksum valid (checked by recomputing it) on random headers.
func TestReflectorRewrite(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dst, src := net.HardwareAddr{2, 0, 0, 0, 0, 2}, net.HardwareAddr{2, 0, 0, 0, 0, 1}
	for i := range 10000 {
		f := make([]byte, 60)
		binary.BigEndian.PutUint16(f[12:], 0x0800)
		ip := f[14:34]
		for j := range ip {
			ip[j] = byte(rng.Uint32())
		}
		ip[0] = 0x45
		ip[8] = byte(2 + rng.IntN(254)) // TTL > 1
		binary.BigEndian.PutUint16(ip[10:], 0)
		binary.BigEndian.PutUint16(ip[10:], wire.Checksum(ip))
		ttl := ip[8]
		rewrite(f, dst, src)
		if ip[8] != ttl-1 || wire.Checksum(ip) != 0 {
			t.Fatalf("case %d: ttl %d -> %d, checksum sum %#x", i, ttl, ip[8], wire.Checksum(ip))
		}
		if string(f[0:6]) != string(dst) || string(f[6:12]) != string(src) {
			t.Fatalf("MACs %x", f[:12])
		}
	}
}

// TestVethOptions: --rounds and --frames override the plan (the warm-up
// shrinks with small runs), --only and --setup select by name.
func TestVethOptions(t *testing.T) {
	p, err := planFor(Options{Rounds: 2, Frames: 30_000})
	if err != nil {
		t.Fatal(err)
	}
	if p.rounds != 2 || p.frames != 30_000 || p.warmup != 3_000 {
		t.Errorf("plan %+v: want 2 rounds of 30000 frames, 3000 warm-up", p)
	}
	if p, _ := planFor(Options{Quick: true}); p.rounds != 1 || p.frames != 200_000 {
		t.Errorf("quick plan %+v", p)
	}
	o := Options{Only: []string{"", "linux"}, Setups: []string{""}}
	o.Normalize()
	if !slices.Equal(o.Only, []string{"linux"}) || len(o.Setups) != 0 {
		t.Errorf("normalized %q %q", o.Only, o.Setups)
	}
	if !selected(o.Only, "linux") || selected(o.Only, "reflector") || !selected(o.Setups, "onecore") {
		t.Error("selected() disagrees with the lists")
	}
}
