package afxdp

import (
	"net"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/pktio/pktiotest"
	"github.com/netfwd/netfwd/internal/testenv"
)

// napiOf reads the NAPI deferral of iface in namespace ns.
func napiOf(t *testing.T, ns, iface string) []napiSetting {
	t.Helper()
	var out []napiSetting
	err := pktio.InNetns(ns, func() error {
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		fam, err := genlFamily(netdevFamilyName)
		if err != nil {
			return err
		}
		out, err = napiSettings(fam, ifi.Index)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestXDPNAPIDefer: Open with NAPIDefer sets every NAPI instance of the
// interface to the deferral asked for, a port without it leaves its
// interface alone, and Close puts the old values back where the instance
// outlives the program (veth with GRO on keeps its NAPI).
func TestXDPNAPIDefer(t *testing.T) {
	testenv.RequireRoot(t, "ethtool")
	p := pktiotest.NewPair(t)
	testenv.Run(t, "ip", "netns", "exec", p.NsB, "ethtool", "-K", p.B, "gro", "on")
	before := napiOf(t, p.NsB, p.B)
	if len(before) == 0 {
		t.Fatal("veth with GRO on has no NAPI instance")
	}
	var port *Port
	err := pktio.InNetns(p.NsB, func() error {
		var err error
		port, err = Open(p.B, PortConfig{NAPIDefer: NAPIDefer{HardIRQs: 3, FlushTimeout: 150 * time.Microsecond}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	during := napiOf(t, p.NsB, p.B)
	if len(during) == 0 {
		t.Fatal("no NAPI instance while the port is open")
	}
	for _, s := range during {
		if s.hardIRQs != 3 || s.timeout != 150_000 {
			t.Errorf("NAPI %d: defer %d, timeout %d ns; want 3, 150000", s.id, s.hardIRQs, s.timeout)
		}
	}
	// The peer's port, opened without NAPIDefer, keeps its values.
	openXDPIn(t, p.NsA, p.A, PortConfig{})
	for _, s := range napiOf(t, p.NsA, p.A) {
		if s.hardIRQs != 0 || s.timeout != 0 {
			t.Errorf("peer NAPI %d changed: %+v", s.id, s)
		}
	}
	if err := port.Close(); err != nil {
		t.Fatal(err)
	}
	after := napiOf(t, p.NsB, p.B)
	if len(after) == 0 {
		t.Fatal("NAPI gone after Close although GRO is on")
	}
	for _, s := range after {
		if s.hardIRQs != before[0].hardIRQs || s.timeout != before[0].timeout {
			t.Errorf("after Close NAPI %d: %+v, want back to %+v", s.id, s, before[0])
		}
	}
}

// TestXDPNAPIDeferNoNAPI: an interface without NAPI instances (a bridge,
// generic XDP) opens with NAPIDefer all the same: nothing to defer.
func TestXDPNAPIDeferNoNAPI(t *testing.T) {
	ns := pktiotest.Netns(t, "pkN")
	pktiotest.IP(t, ns, "link", "add", "d0", "type", "bridge")
	pktiotest.IP(t, ns, "link", "set", "d0", "up")
	if got := napiOf(t, ns, "d0"); len(got) != 0 {
		t.Fatalf("bridge has NAPI instances %+v", got)
	}
	port := openXDPIn(t, ns, "d0", PortConfig{Attach: AttachGeneric, NAPIDefer: NAPIDefer{HardIRQs: 2}})
	if port.napiOld != nil {
		t.Errorf("remembered %+v for an interface without NAPI", port.napiOld)
	}
}

// TestXDPNAPIBusyPoll: a worker that busy-polls NAPI (with the deferral
// on its port) receives every frame, and its Waits asked the kernel to
// poll.
func TestXDPNAPIBusyPoll(t *testing.T) {
	c := newXDPChainPorts(t, PortConfig{NAPIDefer: NAPIDefer{HardIRQs: 2}},
		WorkerConfig{NAPIBusyPoll: 20 * time.Microsecond, Spin: 5 * time.Millisecond})
	if got := c.w.Config().NAPIBudget; got != defaultNAPIBudget {
		t.Errorf("NAPIBudget default %d, want %d", got, defaultNAPIBudget)
	}
	gen := newUDPSender(t, c.nsA, "a", c.fa.MAC, 4)
	frames, meta := make([][]byte, 256), make([]pktio.Meta, 256)
	const want = 2000
	got := 0
	deadline := time.Now().Add(5 * time.Second)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range want / 100 {
			gen.Send(t, 100)
			time.Sleep(time.Millisecond)
		}
	}()
	for got < want && time.Now().Before(deadline) {
		if err := c.w.Wait(); err != nil {
			t.Fatal(err)
		}
		n, err := c.sa.TryRecv(frames, meta)
		if err != nil {
			t.Fatal(err)
		}
		got += n
	}
	<-done
	if got != want {
		t.Errorf("received %d of %d", got, want)
	}
	if ws := c.w.WaitStats(); ws.NAPIPolls == 0 {
		t.Errorf("no busy polls: %+v", ws)
	}
	c.sa.Release()
	c.w.checkFrames(t)
}

// TestXDPNAPIConfig: out-of-range busy-poll and deferral settings are
// errors, not silently clamped.
func TestXDPNAPIConfig(t *testing.T) {
	for _, cfg := range []WorkerConfig{
		{NAPIBusyPoll: -time.Microsecond}, {NAPIBusyPoll: 500 * time.Nanosecond},
		{NAPIBusyPoll: 2 * time.Second}, {NAPIBusyPoll: time.Millisecond, NAPIBudget: -1},
	} {
		if _, err := cfg.withDefaults(); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
	if c, err := (WorkerConfig{}).withDefaults(); err != nil || c.NAPIBudget != 0 {
		t.Errorf("no busy polling: budget %d, %v", c.NAPIBudget, err)
	}
	for _, d := range []NAPIDefer{{HardIRQs: -1}, {HardIRQs: 1, FlushTimeout: -1}} {
		if _, err := d.withDefaults(); err == nil {
			t.Errorf("%+v: no error", d)
		}
	}
	if d, err := (NAPIDefer{HardIRQs: 2}).withDefaults(); err != nil || d.FlushTimeout != defaultNAPIFlushTimeout {
		t.Errorf("default flush timeout: %+v, %v", d, err)
	}
}
