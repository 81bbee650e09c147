package bench

import (
	"runtime"
	"slices"
	"testing"

	"github.com/netfwd/netfwd/internal/testenv"
)

// TestMinimalForwards: the minimal AF_XDP forwarder delivers trafgen's
// frames from ra to H2 (the tc counter there), busy-polling in user space,
// blocking in poll(2), and busy-polling veth's NAPI; its counters agree.
func TestMinimalForwards(t *testing.T) {
	testenv.RequireRoot(t, "trafgen")
	n, err := newVethNet(countAtH2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.close()
	for _, cfg := range []minimalConfig{{}, {batch: 16, poll: true}, {napiBusyPoll: 20}} {
		f, err := startMinimalIn(n.r, n.ra, n.rb, n.h2MAC, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ended := make(chan error, 1)
		go func() {
			runtime.LockOSThread()
			ended <- f.run()
		}()
		r, err := n.measure(genSpec{frames: 5000, procs: 1, pps: 20_000}, nil)
		d := f.diag()
		f.stop()
		if rerr := <-ended; rerr != nil {
			t.Error(rerr)
		}
		if cerr := f.close(); cerr != nil {
			t.Error(cerr)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%+v: %v, %+v", cfg, r, d)
		// Every frame forwarded or counted as dropped by the socket (an
		// empty fill ring when the loop was off the CPU: -race, a loaded
		// machine), and most of them forwarded.
		if r.offered < 5000 || r.delivered+d.drops < r.offered || r.delivered < r.offered/2 {
			t.Errorf("%+v: delivered %d of %d, socket dropped %d", cfg, r.delivered, r.offered, d.drops)
		}
		if d.sent < r.delivered || d.kicks == 0 {
			t.Errorf("%+v: counters %+v, delivered %d", cfg, d, r.delivered)
		}
	}
}

// TestXDPFwdVariants: NETFWD_BENCH_XDPFWD names extra forwarders; a bad
// definition is an error.
func TestXDPFwdVariants(t *testing.T) {
	vs, err := xdpfwdVariants(" a=minimal --poll ; b=reflector --spin -1ns --ring 4096;")
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || vs[0].impl != "a" || vs[0].kind != "minimal" || !slices.Equal(vs[0].args, []string{"--poll"}) ||
		vs[1].impl != "b" || vs[1].kind != "reflector" || !slices.Equal(vs[1].args, []string{"--spin", "-1ns", "--ring", "4096"}) {
		t.Errorf("parsed %+v", vs)
	}
	for _, bad := range []string{"a", "=minimal", "a=", "a=netfwd --x"} {
		if _, err := xdpfwdVariants(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if vs, err := xdpfwdVariants(""); err != nil || len(vs) != 0 {
		t.Errorf("empty: %v %v", vs, err)
	}
}
