package routinglab

import (
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/testenv"
)

func TestBirdSince(t *testing.T) {
	loc := time.FixedZone("X", 3600)
	now := time.Date(2026, 12, 1, 21, 30, 0, 0, loc)
	for _, c := range []struct {
		since string
		want  time.Time
	}{
		{"21:29:58.481", time.Date(2026, 12, 1, 21, 29, 58, 481e6, loc)},
		{"21:30:00.000", now},
		{"23:59:59.999", time.Date(2026, 11, 30, 23, 59, 59, 999e6, loc)}, // before midnight
	} {
		got, err := BirdSince(c.since, now)
		if err != nil || !got.Equal(c.want) {
			t.Errorf("BirdSince(%q) = %v, %v; want %v", c.since, got, err, c.want)
		}
	}
	for _, bad := range []string{"21:29:58", "2026-12-01 21:29:58", ""} {
		if _, err := BirdSince(bad, now); err == nil {
			t.Errorf("BirdSince(%q): no error", bad)
		}
	}
}

// The lab end to end without netfwd: BIRD announces 150 prefixes to FRR,
// bgpd reports the session, zebra installs them in the kernel (the
// watcher and the dump see all 150) and streams them to a plain TCP
// listener at FPMAddr, whose last receive FPMLastReceive dates; Close
// removes the namespaces and stops the daemons.
func TestLabFRR(t *testing.T) {
	testenv.RequireRoot(t, "bird", "birdc", "vtysh", "ss", "pgrep", Zebra, Bgpd)
	var prefixes []netip.Prefix
	for i := range 150 {
		prefixes = append(prefixes, netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(i), 0}), 24))
	}
	l, err := New(prefixes)
	if err != nil {
		t.Fatal(err)
	}
	rtr, dir := l.Rtr, l.Dir
	defer func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
		if exec.Command("ip", "netns", "pids", rtr).Run() == nil {
			t.Errorf("namespace %s still there after Close", rtr)
		}
		if pids, _ := exec.Command("pgrep", "-f", dir).Output(); len(pids) > 0 {
			t.Errorf("daemons of %s still running after Close: %s", dir, pids)
		}
	}()

	// The FPM listener: reads what zebra sends, noting when.
	var ln net.Listener
	if err := pktio.InNetns(l.Rtr, func() (err error) { ln, err = net.Listen("tcp", FPMAddr); return }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var lastReadNs atomic.Int64
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 64<<10)
		for {
			k, err := c.Read(buf)
			if k > 0 {
				lastReadNs.Store(time.Now().UnixNano())
			}
			if err != nil {
				return
			}
		}
	}()

	done, stop, err := WatchKernelRoutes(l.Rtr, ProtoBGP, len(prefixes), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := l.StartFRR(); err != nil {
		t.Fatal(err)
	}
	if err := l.StartBird(l.Feed, "bird-feed", BirdFeedConf); err != nil {
		t.Fatal(err)
	}
	var at time.Time
	select {
	case at = <-done:
	case <-time.After(time.Minute):
	}
	if at.IsZero() {
		t.Fatalf("the kernel never held %d bgp routes; bgpd: %+v", len(prefixes), l.BGPPeer(FeedAddr))
	}
	if p := l.BGPPeer(FeedAddr); !p.Up || p.Received != len(prefixes) || p.Established != 1 {
		t.Errorf("bgpd's session: %+v", p)
	}
	since, up := l.BirdSession(l.Feed, "bird-feed", "up")
	est, err := BirdSince(since, time.Now())
	if !up || err != nil || est.After(at) || at.Sub(est) > 30*time.Second {
		t.Errorf("BIRD's session: since %q (%v, %v), up %v; the kernel's table full at %v", since, est, err, up, at)
	}
	if n, err := CountKernelRoutes(l.Rtr, ProtoBGP); n != len(prefixes) || err != nil {
		t.Errorf("kernel dump: %d bgp routes (%v), want %d", n, err, len(prefixes))
	}
	time.Sleep(time.Second) // zebra's FPM stream is done
	last, err := l.FPMLastReceive()
	if err != nil {
		t.Fatal(err)
	}
	lastRead := time.Unix(0, lastReadNs.Load())
	if lastReadNs.Load() == 0 || last.Sub(lastRead).Abs() > 100*time.Millisecond {
		t.Errorf("FPMLastReceive %v, the listener last read at %v", last.Format("15:04:05.000"), lastRead.Format("15:04:05.000"))
	}
	// A withdrawal reaches the kernel: the dump counts it.
	if _, err := l.Birdc(l.Feed, "bird-feed", "disable", "feedB"); err != nil {
		t.Fatal(err)
	}
	var n int
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if n, _ = CountKernelRoutes(l.Rtr, ProtoBGP); n == len(prefixes)-min(FeedBSize, len(prefixes)) {
			break
		}
	}
	if want := len(prefixes) - min(FeedBSize, len(prefixes)); n != want {
		t.Errorf("after disabling feedB the kernel holds %d bgp routes, want %d", n, want)
	}
	if out, _ := l.Exec(l.Rtr, "ip", "route", "show", "proto", "bgp"); strings.Count(out, "\n") != n {
		t.Errorf("ip route show proto bgp: %d lines, the dump %d\n%s", strings.Count(out, "\n"), n, fmt.Sprint(out))
	}
}
