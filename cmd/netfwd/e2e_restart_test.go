package main

// End-to-end: a restart of netfwd (SIGTERM or kill -9, then `netfwd run`
// with the same flags, what `systemctl restart` does) is not seen by the
// routing daemons in the router namespace (docs/hostpath.md, "Restarts").
// The twins outlive the daemon with their ifindex, MAC, addresses and
// carrier (the twin keeper holds them), the next daemon adopts them, and
// the BGP session through netfwd's port never drops:
//   - TestHostPathRestartFRR: FRR's bgpd and zebra (FPM) in band over
//     nf-eth0 to BIRD on the isp, hold time 9 s; SIGTERM + start, then kill
//     -9 + start: 0 flaps, zebra still sees the twin with its address, the
//     BGP routes in netfwd's FIB within 1 s of its control socket (seeded
//     from the kernel's copy, fpm.SeedFromKernel, not 3 s later when zebra
//     reconnects) and kept by the first session's sweep, pings into a BGP
//     prefix delivered. The time from the start to the full FIB is logged.
//   - TestHostPathRestartBIRD: the same with BIRD in the router namespace
//     and --mirror-kernel.

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/lab"
	"github.com/netfwd/netfwd/internal/routinglab"
	"github.com/netfwd/netfwd/internal/testenv"
)

// bgpProbe is an address of the isp inside a prefix it announces.
var bgpProbe = netip.MustParseAddr("198.18.5.1")

// bgpPrefixes are what the isp's BIRD announces to the router.
var bgpPrefixes = []netip.Prefix{netip.MustParsePrefix("198.18.5.0/24"), netip.MustParsePrefix("198.18.6.0/24")}

// startBGPPeer starts BIRD on the isp announcing bgpPrefixes (keepalive 3
// s, hold 9 s) with bgpProbe on its loopback, and returns a routingLab
// over the router namespace for the router's own daemons.
func startBGPPeer(t *testing.T, e *e2e) *routingLab {
	t.Helper()
	return startBGPPeerConf(t, e, lab.BGPPeerBirdConf(bgpPrefixes))
}

// startBGPPeerConf is startBGPPeer with the isp's BIRD configuration.
func startBGPPeerConf(t *testing.T, e *e2e, conf string) *routingLab {
	t.Helper()
	dir, err := os.MkdirTemp("", "nfrestart")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	l := &routingLab{t: t, Lab: &routinglab.Lab{Rtr: e.net.Router, Dir: dir}}
	t.Cleanup(l.stopAll)
	isp := e.host("isp")
	l.startBird(isp.NS, "bird-isp", conf)
	testenv.Run(t, "ip", "-n", isp.NS, "address", "add", bgpProbe.String()+"/32", "dev", "lo")
	return l
}

// netfwdBGPRoutes returns the prefixes of netfwd's routes of protocol
// proto that leave through eth0.
func netfwdBGPRoutes(e *e2e, proto string) []string {
	out, err := e.ctlErr("-j", "route", "show")
	if err != nil {
		return nil
	}
	var rs []struct{ Dst, Dev, Protocol string }
	json.Unmarshal([]byte(out), &rs)
	var got []string
	for _, r := range rs {
		if r.Protocol == proto && r.Dev == "eth0" {
			got = append(got, r.Dst)
		}
	}
	return got
}

// twinState is what the routing daemons could notice of nf-eth0.
func twinState(t *testing.T, ns string) string {
	var ls []struct {
		Ifindex   int
		Address   string
		Operstate string
		Flags     []string
	}
	json.Unmarshal([]byte(testenv.Run(t, "ip", "-n", ns, "-j", "link", "show", "nf-eth0")), &ls)
	if len(ls) != 1 {
		return "no nf-eth0"
	}
	return fmt.Sprintf("ifindex %d mac %s flags %v addrs %v", ls[0].Ifindex, ls[0].Address, ls[0].Flags, twinAddrs(t, ns)["nf-eth0"])
}

// hotRestart, as restartCheck's signal, is `netfwd restart`.
const hotRestart = syscall.Signal(0)

// restartCheck restarts netfwd by sig (SIGTERM or SIGKILL; hotRestart: a
// hot restart, the last one a test does: the new daemon is not the
// harness's child) and checks that
// the session, by session(), stays up through 12 s (more than the hold
// time), the twin is unchanged, the learned routes of proto come back and
// a host reaches bgpProbe. It returns the time from the new start to the
// full set of learned routes.
func restartCheck(t *testing.T, e *e2e, sig syscall.Signal, proto string, session func() (string, bool)) time.Duration {
	// BIRD prints the same "since" 1 ms apart from one `show protocols`
	// to the next: states within 50 ms are the same.
	same := func(a, b string) bool {
		if a == b {
			return true
		}
		ta, err1 := routinglab.BirdSince(a, time.Now())
		tb, err2 := routinglab.BirdSince(b, time.Now())
		return err1 == nil && err2 == nil && ta.Sub(tb).Abs() < 50*time.Millisecond
	}
	t.Helper()
	rtr := e.net.Router
	twin0 := twinState(t, rtr)
	sess0, up := session()
	if !up {
		t.Fatalf("session down before the restart: %s", sess0)
	}
	start := time.Now()
	if sig == hotRestart {
		e.hotRestart()
	} else {
		e.cmd.Process.Signal(sig)
		<-e.exited
		// No netfwd runs: the router namespace's kernel must not take
		// eth0's frames itself (the ports' guards stay with the twins'
		// keeper). It would answer a TCP segment of the session, which its
		// socket expects on nf-eth0, with a reset.
		echoes := kernelCounter(t, rtr, "Icmp", "InEchos")
		e.net.Exec(e.host("isp").NS, "ping", "-c", "2", "-i", "0.05", "-W", "0.1", lab.UplinkAddr.Addr().String())
		if n := kernelCounter(t, rtr, "Icmp", "InEchos") - echoes; n != 0 {
			t.Errorf("%v: with no netfwd running the router's kernel received %d pings on eth0, want 0", sig, n)
		}
		start = time.Now()
		e.start()
	}
	ctlUp := time.Since(start)
	how := fmt.Sprintf("%v + start", sig)
	if sig == hotRestart {
		how = "hot restart"
	}
	var full time.Duration // when the routes were all there (valid when gotFull)
	gotFull := false       // the routes counted, not full > 0: a time may read 0
	flapped := ""
	for time.Since(start) < 12*time.Second {
		if !gotFull && len(netfwdBGPRoutes(e, proto)) == len(bgpPrefixes) {
			full, gotFull = time.Since(start), true
		}
		if s, up := session(); (!same(s, sess0) || !up) && flapped == "" {
			flapped = fmt.Sprintf("%.1f s after the start: session %s up %v (was %s)", time.Since(start).Seconds(), s, up, sess0)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%s: control socket %v after the start, %d %s routes in netfwd's FIB %v after the start", how, ctlUp.Round(time.Millisecond),
		len(bgpPrefixes), proto, full.Round(time.Millisecond))
	if flapped != "" {
		t.Errorf("%s: the BGP session flapped: %s", how, flapped)
	}
	if !gotFull {
		t.Errorf("%s: netfwd's %s routes through eth0 after 12 s: %v", how, proto, netfwdBGPRoutes(e, proto))
	} else if full > ctlUp+time.Second {
		// FPM: seeded from the kernel before zebra reconnects (3 s);
		// the mirror: its first dump.
		t.Errorf("%s: the %s routes came %v after the control socket answered, want < 1 s", how, proto, (full - ctlUp).Round(time.Millisecond))
	}
	if twin := twinState(t, rtr); twin != twin0 {
		t.Errorf("%s: nf-eth0 changed:\n%s\nwas\n%s", how, twin, twin0)
	}
	if got := e.routeGet(bgpProbe); got["prefix"] != "198.18.5.0/24" || got["dev"] != "eth0" {
		t.Errorf("route get %s: %v", bgpProbe, got)
	}
	e.pingOK("h1", bgpProbe, 63)
	return full
}

func TestHostPathRestartFRR(t *testing.T) {
	testenv.RequireRoot(t, "bird", "birdc", "vtysh", routinglab.Zebra, routinglab.Bgpd)
	waitingTest(t)
	e := newE2EExe(t, lab.Standard(), nil, optimizedNetfwd(t), "--host-path", "--fpm", "127.0.0.1:2620")
	l := startBGPPeer(t, e)
	l.write("zebra.conf", l.Subst(routinglab.ZebraConf))
	l.write("bgpd.conf", l.Subst(lab.BGPBgpdConf))
	testenv.Run(t, "chown", "-R", "frr:frr", l.Dir)
	l.startZebra()
	l.startBgpd()
	ok, why := eventually(40*time.Second, func() (bool, string) {
		n, up, rcvd := bgpdPeer(l.Rtr, l.Dir, "203.0.113.1")
		if got := netfwdBGPRoutes(e, "bgp"); !up || rcvd != 2 || len(got) != 2 {
			return false, fmt.Sprintf("established %d times, up %v, %d prefixes; netfwd %v", n, up, rcvd, got)
		}
		return true, ""
	})
	if !ok {
		t.Fatalf("BGP through the host path: %s", why)
	}
	session := func() (string, bool) {
		n, up, _ := bgpdPeer(l.Rtr, l.Dir, "203.0.113.1")
		return fmt.Sprintf("established %d times", n), up
	}
	zebraSees := func() string { // zebra's view of the twin
		out, _ := l.Vtysh("show interface brief")
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "nf-eth0") {
				return strings.Join(strings.Fields(line), " ")
			}
		}
		return "no nf-eth0 in zebra"
	}
	zebra0 := zebraSees()
	if !strings.Contains(zebra0, "up") || !strings.Contains(zebra0, lab.UplinkAddr.String()) {
		t.Fatalf("zebra's nf-eth0: %s", zebra0)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL, hotRestart} {
		restartCheck(t, e, sig, "bgp", session)
		if z := zebraSees(); z != zebra0 {
			t.Errorf("%v + start: zebra's nf-eth0 is %q, was %q", sig, z, zebra0)
		}
		// The routes seeded from the kernel are zebra's replay: its
		// session's sweep removes none of them.
		ok, why := eventually(25*time.Second, func() (bool, string) {
			log := e.stderr.String()
			return strings.Contains(log, "fpm: swept"), "no sweep yet"
		})
		if !ok || !strings.Contains(e.stderr.String(), "removed=0") || len(netfwdBGPRoutes(e, "bgp")) != len(bgpPrefixes) {
			t.Errorf("%v + start: after the first session's sweep (%s): netfwd has %v", sig, why, netfwdBGPRoutes(e, "bgp"))
		}
	}
}

// birdRtrConf is BIRD in the router namespace: eBGP to the isp over
// nf-eth0 (keepalive 3 s, hold 9 s), its routes into the kernel, which
// netfwd mirrors.
const birdRtrConf = `log "@DIR@/bird-rtr.log" all;
router id 203.0.113.2;
protocol device { }
protocol kernel k4 {
  ipv4 { import none; export all; };
  learn off;
}
protocol bgp isp {
  local 203.0.113.2 as 65001;
  neighbor 203.0.113.1 as 65002;
  hold time 9;
  keepalive time 3;
  connect retry time 1;
  ipv4 { import all; export none; };
}
`

func TestHostPathRestartBIRD(t *testing.T) {
	testenv.RequireRoot(t, "bird", "birdc")
	waitingTest(t)
	e := newE2EExe(t, lab.Standard(), nil, optimizedNetfwd(t), "--host-path", "--mirror-kernel")
	l := startBGPPeer(t, e)
	l.startBird(e.net.Router, "bird-rtr", l.Subst(birdRtrConf))
	session := func() (string, bool) { return l.Lab.BirdSession(e.net.Router, "bird-rtr", "isp") }
	ok, why := eventually(40*time.Second, func() (bool, string) {
		since, up := session()
		if got := netfwdBGPRoutes(e, "bird"); !up || len(got) != 2 {
			return false, fmt.Sprintf("since %s up %v; netfwd %v", since, up, got)
		}
		return true, ""
	})
	if !ok {
		t.Fatalf("BGP through the host path: %s", why)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL, hotRestart} {
		restartCheck(t, e, sig, "bird", session)
	}
}
