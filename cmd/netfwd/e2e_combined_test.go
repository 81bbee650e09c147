package main

// The combined test (issue 19, D): the features of `netfwd run` where they
// meet, on one router, the way a router is run. The standard network (VLAN
// bridge br0 with SVIs vlan10/vlan20, hosts h1, h2, h3; routed uplink eth0
// to the isp) plus a second routed port eth6 to isp2; netfwd with
// --host-path (twins) and a routing daemon in band over the twin nf-eth0:
//   - TestCombinedFRR: FRR bgpd + zebra, routes over --fpm;
//   - TestCombinedBIRD: BIRD, routes through the kernel (--mirror-kernel).
//
// The daemon is the optimized (non-race) build: the RSS budget means
// something only there, and the forwarding it measures is the product's.
// Ping flows (10/s) cross every port during each step (h1 -> h3 across
// VLANs, isp2 -> h2, h3 -> a BGP prefix behind the isp). Steps, in
// sequence: restart (SIGTERM + start), hot restart (`netfwd restart`),
// kill -9 + start, SIGHUP with a changed route (198.51.100.0/24 moved to
// isp2), a flap of the BGP port (eth0 down 2 s), a burst of concurrent
// `ctl route add/del`, an MTU change on the BGP port, and last an access
// port (eth2) and the second routed port (eth6) deleted and re-created
// (last: a port that stops for good stops no other step). After each
// step, one
// check (combined.check): the BGP flaps counted by a watcher over the
// whole test (none allowed but in the port flap step: at most 1, as the
// twin loses its carrier), netfwd's FIB of the routing daemon's protocol
// equal to the kernel's (and to zebra's selected routes), pings across
// VLANs, bridged, out of eth6 and into both BGP prefixes delivered, the
// daemon's RSS within budget, and the flows' losses (none where the step
// promises none: hot restart, SIGHUP, ctl burst, MTU). The check watches
// the session for 10 s after the event (more than the 9 s hold time), so
// a flap a step causes is counted in that step. BIRD (both ends) runs
// with an error wait of 1-5 s: its default keeps a session down 60 s after
// "Link down".
//
// Locking: the flap watcher is one goroutine; its counts are atomics.

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/ctlsock"
	"github.com/netfwd/netfwd/internal/lab"
	"github.com/netfwd/netfwd/internal/routinglab"
	"github.com/netfwd/netfwd/internal/testenv"
	"github.com/netfwd/netfwd/internal/vethlab"
)

// The second routed port: eth6 to isp2, which holds lab.InternetIP too
// (the SIGHUP step moves 198.51.100.0/24 there).
var (
	isp2Addr   = netip.MustParsePrefix("192.0.2.1/24")
	isp2Router = netip.MustParsePrefix("192.0.2.2/24")
)

// combinedSpec is the standard network with isp2 on eth6.
func combinedSpec() lab.Spec {
	s := lab.Standard()
	s.Hosts = append(s.Hosts, lab.UplinkHost("isp2", "eth6", isp2Addr, isp2Router,
		mustMAC("02:00:00:00:e0:02"), "02:00:00:00:e0:fd", lab.InternetIP))
	return s
}

// shortErrorWait gives a BIRD bgp protocol an error wait of 1-5 s: after
// "Link down" (the port flap step) BIRD refuses the session for its
// default 60 s (up to 300), a choice of BIRD's, not something netfwd does.
// It also has the protocol log its states, events and packets, so a flap
// is explained in the log a failure prints.
func shortErrorWait(conf string) string {
	return strings.Replace(conf, "connect retry time 1;", "connect retry time 1;\n  error wait time 1, 5;\n  debug { states, events, packets };", 1)
}

// compiledTableKB is the compiled FIB's first-level table (dir24's tbl24,
// 2^24 entries of 4 bytes, docs/fib-compiled.md): the idle budget was
// measured with its pages untouched, but once a rebuild's new table is
// zeroed by the Go allocator (reused heap memory) all of it is resident
// (seen after the ctl burst: +54 MiB in one 64 MiB mapping).
const compiledTableKB = 64 * 1024

// combinedWatch is how long a step's check watches the BGP session after
// the step's event: more than the hold time (9 s).
const combinedWatch = 10 * time.Second

// combined is one run of the combined test.
type combined struct {
	t     *testing.T // the test (steps are subtests of it)
	e     *e2e
	l     *routingLab
	frr   bool
	proto string // netfwd's protocol of the learned routes: bgp (FPM), bird (mirror)
	spec  lab.Spec
	pid   int // the daemon now (a hot restart makes one that is not e.cmd)
	flaps atomic.Int64
	stop  chan struct{}
	done  chan struct{}
	steps []string // one line a step, logged at the end
}

// flowSpec is one ping flow of the background traffic.
type flowSpec struct {
	from string
	dst  netip.Addr
}

// combinedFlows cross every port: eth1 -> eth3 (VLAN 10 to 20), eth6 ->
// eth2, eth3 -> eth0 (a BGP prefix)
// (isp2 is the one that asks, so its kernel's echo count is the SIGHUP
// step's own).
var combinedFlows = []flowSpec{{"h1", h3IP}, {"isp2", h2IP}, {"h3", bgpProbe}}

// bgpProbe2 is an address of the isp in the second BGP prefix.
var bgpProbe2 = netip.MustParseAddr("198.18.6.1")

func TestCombinedFRR(t *testing.T) {
	testenv.RequireRoot(t, "ping", "bird", "birdc", "vtysh", routinglab.Zebra, routinglab.Bgpd)
	// The two variants run side by side: each is mostly waiting (its
	// steps watch 10 s for flaps), their labs share nothing, and CI's
	// time stays within its 20 minutes.
	t.Parallel()
	c := newCombined(t, true)
	c.run()
}

func TestCombinedBIRD(t *testing.T) {
	testenv.RequireRoot(t, "ping", "bird", "birdc")
	t.Parallel()
	c := newCombined(t, false)
	c.run()
}

// newCombined builds the network, starts netfwd and the routing daemons,
// and waits for the session and the routes.
func newCombined(t *testing.T, frr bool) *combined {
	if testIO() == "afxdp" {
		t.Skip("the hot restart step refuses AF_XDP ports (docs/reliability.md, Hot restart)")
	}
	start := time.Now()
	c := &combined{t: t, frr: frr, spec: combinedSpec(), stop: make(chan struct{}), done: make(chan struct{})}
	if frr {
		c.proto = "bgp"
		c.e = newE2EExe(t, c.spec, nil, optimizedNetfwd(t), "--host-path", "--fpm", "127.0.0.1:2620")
		c.l = startBGPPeerConf(t, c.e, shortErrorWait(lab.BGPPeerBirdConf(bgpPrefixes)))
		c.l.write("zebra.conf", c.l.Subst(routinglab.ZebraConf))
		c.l.write("bgpd.conf", c.l.Subst(lab.BGPBgpdConf))
		testenv.Run(t, "chown", "-R", "frr:frr", c.l.Dir)
		c.l.startZebra()
		c.l.startBgpd()
	} else {
		c.proto = "bird"
		c.e = newE2EExe(t, c.spec, nil, optimizedNetfwd(t), "--host-path", "--mirror-kernel")
		c.l = startBGPPeerConf(t, c.e, shortErrorWait(lab.BGPPeerBirdConf(bgpPrefixes)))
		c.l.startBird(c.e.net.Router, "bird-rtr", c.l.Subst(shortErrorWait(birdRtrConf)))
	}
	testenv.Run(t, "ip", "-n", c.e.host("isp").NS, "address", "add", bgpProbe2.String()+"/32", "dev", "lo")
	c.pid = c.e.daemonPid()
	ok, why := eventually(40*time.Second, func() (bool, string) {
		s, up := c.session()
		if got := netfwdBGPRoutes(c.e, c.proto); !up || len(got) != len(bgpPrefixes) {
			return false, fmt.Sprintf("session %s up %v; netfwd %v", s, up, got)
		}
		return true, ""
	})
	if !ok {
		t.Fatalf("BGP through the host path: %s", why)
	}
	t.Logf("set up (lab, netfwd, routing daemons, session, routes) in %v", time.Since(start).Round(100*time.Millisecond))
	go c.watch()
	t.Cleanup(func() { close(c.stop); <-c.done })
	t.Cleanup(func() {
		if t.Failed() { // the isp's side of the session (stopAll shows the router's)
			if b, err := os.ReadFile(filepath.Join(c.l.Dir, "bird.log")); err == nil {
				t.Logf("the isp's bird.log:\n%s", lastBytes(string(b), 3000))
			}
		}
	})
	return c
}

// session is the routing daemon's view of the session with the isp: a
// state that changes when it flaps (FRR: established count; BIRD: since)
// and whether it is Established.
func (c *combined) session() (string, bool) {
	if c.frr {
		n, up, _ := bgpdPeer(c.l.Rtr, c.l.Dir, "203.0.113.1")
		return fmt.Sprintf("established %d times", n), up
	}
	return c.l.Lab.BirdSession(c.e.net.Router, "bird-rtr", "isp")
}

// watch counts the session's flaps until c.stop: a flap is the session
// seen leaving Established, or seen Established both times with another
// state between (FRR: a higher established count; BIRD: another "since",
// beyond BIRD's 1 ms jitter).
func (c *combined) watch() {
	defer close(c.done)
	same := func(a, b string) bool {
		if a == b {
			return true
		}
		if c.frr {
			return false
		}
		ta, err1 := routinglab.BirdSince(a, time.Now())
		tb, err2 := routinglab.BirdSince(b, time.Now())
		return err1 == nil && err2 == nil && ta.Sub(tb).Abs() < 50*time.Millisecond
	}
	last, lastUp := c.session()
	for {
		select {
		case <-c.stop:
			return
		case <-time.After(200 * time.Millisecond):
		}
		s, up := c.session()
		if s == "" || s == "established 0 times" {
			continue // the daemon did not answer this time
		}
		if (lastUp && !up) || (lastUp && up && !same(s, last)) {
			c.flaps.Add(1)
		}
		last, lastUp = s, up
	}
}

// flows is the background traffic of one step: ping processes.
type flows struct {
	cmds []*exec.Cmd
	outs []*syncBuffer
}

func (c *combined) startFlows(t *testing.T) *flows {
	f := &flows{}
	for _, fl := range combinedFlows {
		cmd := exec.Command("ip", "netns", "exec", c.e.host(fl.from).NS, "ping", "-i", "0.1", "-W", "1", fl.dst.String())
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		f.cmds = append(f.cmds, cmd)
		f.outs = append(f.outs, out)
	}
	return f
}

var pingSummary = regexp.MustCompile(`(\d+) packets transmitted, (\d+) received`)

// end stops the flows and returns "sent/received" a flow and the number lost.
func (f *flows) end() (string, int) {
	var parts []string
	lost := 0
	for i, cmd := range f.cmds {
		cmd.Process.Signal(syscall.SIGINT)
		cmd.Wait()
		fl := combinedFlows[i]
		m := pingSummary.FindStringSubmatch(f.outs[i].String())
		if m == nil {
			parts = append(parts, fmt.Sprintf("%s->%s ?", fl.from, fl.dst))
			lost++
			continue
		}
		s, _ := strconv.Atoi(m[1])
		r, _ := strconv.Atoi(m[2])
		// The last request may still be waiting for its reply: not lost.
		if s-r == 1 {
			s = r
		}
		lost += s - r
		parts = append(parts, fmt.Sprintf("%s->%s %d/%d", fl.from, fl.dst, r, s))
	}
	return strings.Join(parts, ", "), lost
}

// stepSpec says what a step may cost.
type stepSpec struct {
	name     string
	maxFlaps int64 // BGP flaps allowed
	noLoss   bool  // the flows must lose nothing
	do       func(t *testing.T)
}

func (c *combined) run() {
	t := c.t
	steps := []stepSpec{
		{"restart", 0, false, c.restart},
		{"hot restart", 0, true, c.hotRestart},
		{"kill -9 and start", 0, false, c.kill9},
		{"SIGHUP with a changed route", 0, true, c.sighupRoute},
		{"BGP port flap", 1, false, c.flapBGPPort},
		{"ctl route add/del burst", 0, true, c.ctlBurst},
		{"MTU change", 0, true, c.mtuChange},
		// Last: a port they break would stop the steps after them.
		{"access port re-created", 0, false, c.recreateAccessPort},
		{"routed port re-created", 0, false, c.recreateRoutedPort},
	}
	// NETFWD_COMBINED_REPEAT=N: the steps N times over (a debugging aid
	// for a step that fails now and then).
	if n, err := strconv.Atoi(os.Getenv("NETFWD_COMBINED_REPEAT")); err == nil && n > 1 {
		one := steps
		for range n - 1 {
			steps = append(steps, one...)
		}
	}
	total := time.Now()
	for _, s := range steps {
		// NETFWD_COMBINED_ONLY=WORD,...: only the steps whose names
		// contain one (a debugging aid; the checks run after each).
		if only := os.Getenv("NETFWD_COMBINED_ONLY"); only != "" && !slices.ContainsFunc(strings.Split(only, ","), func(w string) bool { return strings.Contains(s.name, w) }) {
			continue
		}
		ok := t.Run(s.name, func(t *testing.T) {
			// e's helpers fail the step; the daemon they start (and its
			// cleanup) belongs to the whole test: c.parent.
			c.e.t = t
			defer func() { c.e.t = c.t }()
			f0 := c.flaps.Load()
			fl := c.startFlows(t)
			time.Sleep(500 * time.Millisecond) // the flows running before the event
			event := time.Now()
			s.do(t)
			c.check(t, s, f0, event, fl)
		})
		if !ok {
			t.Fatalf("step %q failed; the steps after it were not run", s.name)
		}
	}
	t.Logf("%d steps in %v:\n%s", len(c.steps), time.Since(total).Round(100*time.Millisecond), strings.Join(c.steps, "\n"))
}

// asTest runs f with e's test set to the whole test's: what it starts
// and registers for cleanup outlives the step.
func (c *combined) asTest(t *testing.T, f func()) {
	c.e.t = c.t
	defer func() { c.e.t = t }()
	f()
}

func (c *combined) restart(t *testing.T) {
	c.e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.e.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("netfwd did not stop within 10 s of SIGTERM")
	}
	if st := c.e.cmd.ProcessState; !st.Success() {
		t.Errorf("netfwd exited with %v on SIGTERM", st)
	}
	c.asTest(t, c.e.start)
	c.pid = c.e.daemonPid()
}

func (c *combined) hotRestart(t *testing.T) {
	old := c.pid
	c.asTest(t, func() { c.pid = c.e.hotRestart() })
	if st := c.e.cmd.ProcessState; st == nil || !st.Success() {
		t.Errorf("the old daemon (pid %d) after the hot restart: %v", old, st)
	}
	if !processAlive(c.pid) {
		t.Fatalf("the new daemon (pid %d) is not running", c.pid)
	}
}

func (c *combined) kill9(t *testing.T) {
	syscall.Kill(c.pid, syscall.SIGKILL)
	for deadline := time.Now().Add(5 * time.Second); processAlive(c.pid); {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still runs 5 s after kill -9", c.pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.asTest(t, c.e.start)
	c.pid = c.e.daemonPid()
}

// sighupRoute moves 198.51.100.0/24 from the default route (isp) to isp2
// by a reload: route get says eth6 and the pings reach isp2's kernel.
func (c *combined) sighupRoute(t *testing.T) {
	c.e.writeConfig(c.spec.Config() + "route add 198.51.100.0/24 via 192.0.2.1 dev eth6\n")
	c.e.sighup()
	ok, why := eventually(5*time.Second, func() (bool, string) {
		r := c.e.routeGet(lab.InternetIP)
		return r["dev"] == "eth6", fmt.Sprintf("route get %s: %v", lab.InternetIP, r)
	})
	if !ok {
		t.Fatalf("5 s after SIGHUP: %s\n%s", why, lastBytes(c.e.stderr.String(), 2000))
	}
	isp2 := c.e.host("isp2").NS
	a0 := kernelCounter(t, isp2, "Icmp", "InEchos")
	c.pingAll(t, "after the reload", flowSpec{"h1", lab.InternetIP})
	if a1 := kernelCounter(t, isp2, "Icmp", "InEchos"); a1-a0 != 3 {
		t.Errorf("after the reload, pings to %s: isp2 got %d echo requests, want 3", lab.InternetIP, a1-a0)
	}
}

// flapBGPPort takes the router's eth0 (the BGP port) down for 2 s and up
// again: the twin loses its carrier, so the routing daemon may reset the
// session once; it must come back with the routes.
func (c *combined) flapBGPPort(t *testing.T) {
	rtr := c.e.net.Router
	if err := c.e.net.IP(rtr, "link", "set", "eth0", "down"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if err := c.e.net.IP(rtr, "link", "set", "eth0", "up"); err != nil {
		t.Fatal(err)
	}
}

// recreate deletes a port (both ends of the veth) and makes it again with
// its host configured as before, and waits until the host is reached
// through it again; the daemon re-opens it by name with its configuration.
func (c *combined) recreate(t *testing.T, host string, hostArgs [][]string, probe flowSpec) {
	n := c.e.net
	h := c.e.host(host)
	// NETFWD_COMBINED_CAPTURE=1: ARP and ICMP on every interface of the
	// router namespace (the re-created one included) from before the
	// deletion on (a debugging aid, printed with the diagnostics below).
	var capture *syncBuffer
	if os.Getenv("NETFWD_COMBINED_CAPTURE") != "" {
		capture = &syncBuffer{}
		td := exec.Command("ip", "netns", "exec", n.Router, "tcpdump", "-i", "any", "-nn", "-e", "-l", "-tt", "arp or icmp")
		td.Stdout, td.Stderr = capture, capture
		if err := td.Start(); err == nil {
			t.Cleanup(func() { td.Process.Kill(); td.Wait() })
			time.Sleep(300 * time.Millisecond) // listening
		}
	}
	if err := n.IP(n.Router, "link", "del", h.Port); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if err := n.Veth(n.Router, h.Port, nil, h.NS, h.Iface, h.MAC); err != nil {
		t.Fatal(err)
	}
	if n.Spec.HostTxChecksumOff {
		if err := vethlab.TxChecksumOff(h.NS, h.Iface); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range hostArgs {
		if err := n.IP(h.NS, args...); err != nil {
			t.Fatal(err)
		}
	}
	back := time.Now()
	ok, why := eventually(10*time.Second, func() (bool, string) {
		r := c.e.ping(probe.from, probe.dst, lab.PingOptions{Count: 1, Wait: time.Second})
		return r.Received == 1, r.Output
	})
	// Slow (it takes ~1 s) or failed: what netfwd and the kernel hold.
	if took := time.Since(back); !ok || took > 3*time.Second {
		k := c.recreateDiagnostics(h.Port)
		if capture != nil {
			var lines []string
			for _, l := range strings.Split(capture.String(), "\n") {
				if strings.Contains(l, h.Port+" ") {
					lines = append(lines, l)
				}
			}
			k += "\ncapture, frames of " + h.Port + " and its twin:\n" + lastBytes(strings.Join(lines, "\n"), 20000)
		}
		if !ok {
			// Does a frame from the host (learning its MAC on the new
			// port) bring it back?
			hr := c.e.ping(host, gw10, lab.PingOptions{Count: 1, Wait: time.Second})
			again := c.e.ping(probe.from, probe.dst, lab.PingOptions{Count: 1, Wait: time.Second})
			k += fmt.Sprintf("\nafter %s pinged %s (%d replies): %s -> %s %d of 1 replies", host, gw10, hr.Received, probe.from, probe.dst, again.Received)
			t.Fatalf("%s -> %s: no reply 10 s after %s came back:\n%s\n%s\nlog:\n%s", probe.from, probe.dst, h.Port, why, k, lastBytes(c.e.stderr.String(), 1500))
		}
		t.Logf("%s -> %s: first reply %.1f s after %s came back:\n%s", probe.from, probe.dst, took.Seconds(), h.Port, k)
	}
	if !strings.Contains(c.e.stderr.String(), "port re-opened") {
		t.Errorf("the log does not say the port was re-opened")
	}
}

// recreateDiagnostics is what netfwd and the router namespace's kernel
// hold about a re-created port: routes, FDB, VLANs, neighbours, counters,
// drops by reason.
func (c *combined) recreateDiagnostics(port string) string {
	n := c.e.net
	nf, _ := c.e.ctlErr("route show")
	k := "netfwd's routes:\n" + nf
	kr, _ := n.Exec(n.Router, "ip", "route", "show")
	k += "\nthe kernel's:\n" + kr
	for _, what := range []string{"fdb show", "bridge vlan show", "neigh show", "-s link show " + port} {
		out, _ := c.e.ctlErr(what)
		k += "\nnetfwd's " + what + ":\n" + out
	}
	kn, _ := n.Exec(n.Router, "ip", "neigh", "show")
	kl, _ := n.Exec(n.Router, "ip", "-s", "link", "show", port)
	k += "\nthe kernel's neighbours:\n" + kn + "\nthe kernel's link:\n" + kl
	if m, err := lab.Scrape(c.e.metrics, "http://"+metricsAddr+"/metrics"); err == nil {
		k += fmt.Sprintf("\ndrops: l2 %v l3 %v; by reason:", m.Sum("netfwd_l2_drops_total"), m.Sum("netfwd_l3_drops_total"))
		for _, s := range m.Samples {
			if strings.HasSuffix(s.Name, "_drops_total") && s.Value > 0 {
				k += fmt.Sprintf("\n  %s %v", s.Key(), s.Value)
			}
		}
	}
	return k
}

// recreateAccessPort deletes and re-creates eth2, h2's access port of
// VLAN 10: bridge membership and VLAN come back, h1 (bridged) and isp2
// (routed) reach h2 again.
func (c *combined) recreateAccessPort(t *testing.T) {
	c.recreate(t, "h2", [][]string{
		{"addr", "add", "10.0.10.12/24", "dev", c.e.host("h2").Iface},
		{"route", "add", "default", "via", gw10.String()},
	}, flowSpec{"h1", h2IP})
}

// recreateRoutedPort deletes and re-creates eth6: its twin has its
// address again and the route to lab.InternetIP is back where it was
// (through eth6 once the SIGHUP step moved it there; run alone, with
// NETFWD_COMBINED_ONLY, through eth0).
func (c *combined) recreateRoutedPort(t *testing.T) {
	isp2 := c.e.host("isp2")
	wantDev := c.e.routeGet(lab.InternetIP)["dev"]
	c.recreate(t, "isp2", [][]string{
		{"addr", "add", isp2.Addr.String(), "dev", isp2.Iface},
		{"route", "add", "10.0.0.0/8", "via", isp2Router.Addr().String()},
	}, flowSpec{"h2", isp2Addr.Addr()})
	ok, why := eventually(5*time.Second, func() (bool, string) {
		a := twinAddrs(t, c.e.net.Router)["nf-eth6"]
		r := c.e.routeGet(lab.InternetIP)
		return slices.Contains(a, isp2Router.String()) && r["dev"] == wantDev,
			fmt.Sprintf("nf-eth6 has %v; route get %s: %v", a, lab.InternetIP, r)
	})
	if !ok {
		t.Errorf("after eth6 came back (want the route through %s): %s", wantDev, why)
	}
}

// ctlBurst: 4 concurrent writers each add 100 routes (one ctl connection a
// route, through eth0 and eth6) and delete them again; a more specific
// route inside a BGP prefix is added and removed meanwhile. After it, none
// of them is left and the BGP routes are as they were.
func (c *combined) ctlBurst(t *testing.T) {
	const writers, each = 4, 100
	sock := c.e.CtlPath
	via := []string{"via 203.0.113.1 dev eth0", "via 192.0.2.1 dev eth6"}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	began := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, op := range []string{"add", "del"} {
				for i := range each {
					line := fmt.Sprintf("route %s 10.150.%d.%d/32 %s", op, w, i, via[i%2])
					if _, err := ctlsock.Do(sock, []string{line}, false); err != nil {
						errs <- fmt.Errorf("%s: %v", line, err)
						return
					}
				}
			}
		}()
	}
	specific := "198.18.5.128/25 via 192.0.2.1 dev eth6"
	c.e.ctl("route add " + specific)
	if r := c.e.routeGet(netip.MustParseAddr("198.18.5.200")); r["dev"] != "eth6" {
		t.Errorf("route get 198.18.5.200 with %s added: %v", specific, r)
	}
	c.e.ctl("route del " + specific)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d routes added and deleted by %d concurrent writers in %v", 2*writers*each, writers, time.Since(began).Round(time.Millisecond))
	if out := c.e.ctl("route show"); strings.Contains(out, "10.150.") || strings.Contains(out, "198.18.5.128") {
		t.Errorf("routes of the burst left behind:\n%s", out)
	}
	if r := c.e.routeGet(bgpProbe); r["prefix"] != "198.18.5.0/24" || r["dev"] != "eth0" {
		t.Errorf("route get %s after the burst: %v", bgpProbe, r)
	}
}

// mtuChange sets the BGP port's MTU to 1400 through ctl (the isp's end
// too): the kernel's eth0 and the twin follow, DF packets of 1500 bytes
// into the BGP prefix get "fragmentation needed" with 1400, others are
// fragmented and answered; the session stays up.
func (c *combined) mtuChange(t *testing.T) {
	n := c.e.net
	isp := c.e.host("isp")
	if err := n.IP(isp.NS, "link", "set", isp.Iface, "mtu", "1400"); err != nil {
		t.Fatal(err)
	}
	c.e.ctl("link set eth0 mtu 1400")
	ok, why := eventually(3*time.Second, func() (bool, string) {
		k, _ := n.Exec(n.Router, "ip", "-o", "link", "show", "eth0")
		tw, _ := n.Exec(n.Router, "ip", "-o", "link", "show", "nf-eth0")
		return strings.Contains(k, "mtu 1400") && strings.Contains(tw, "mtu 1400"), "eth0: " + k + "nf-eth0: " + tw
	})
	if !ok {
		t.Errorf("after ctl link set eth0 mtu 1400: %s", why)
	}
	h3 := c.e.host("h3").NS
	out, _ := n.Exec(h3, "ping", "-c", "1", "-W", "2", "-M", "do", "-s", "1472", bgpProbe.String())
	if !strings.Contains(out, "mtu = 1400") && !strings.Contains(out, "mtu=1400") {
		t.Errorf("DF ping of 1500 bytes to %s: want fragmentation needed with mtu 1400:\n%s", bgpProbe, out)
	}
	out, err := n.Exec(h3, "ping", "-c", "3", "-i", "0.2", "-W", "2", "-M", "dont", "-s", "1472", bgpProbe.String())
	if err != nil || !strings.Contains(out, "3 received") {
		t.Errorf("1500-byte pings without DF to %s through the 1400-byte port: %v\n%s", bgpProbe, err, out)
	}
}

// pingAll pings each flow's destination 3 times and requires 3 replies.
func (c *combined) pingAll(t *testing.T, when string, fs ...flowSpec) {
	t.Helper()
	var wg sync.WaitGroup
	res := make([]lab.PingResult, len(fs))
	errs := make([]error, len(fs))
	for i, f := range fs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = lab.Ping(c.e.host(f.from).NS, f.dst, lab.PingOptions{Count: 3, Tool: "ping"})
		}()
	}
	wg.Wait()
	for i, f := range fs {
		if errs[i] != nil {
			t.Errorf("%s: ping %s -> %s: %v", when, f.from, f.dst, errs[i])
		} else if r := res[i]; r.Received != 3 || r.ReplyFrom != f.dst {
			t.Errorf("%s: ping %s -> %s: %d of 3 replies (from %v), errors %v\n%s", when, f.from, f.dst, r.Received, r.ReplyFrom, r.Errors, r.Output)
		}
	}
}

// fibs returns netfwd's routes of c.proto and the kernel's (the twins'
// names mapped to their ports'), canonical and sorted; for FRR also
// zebra's selected BGP routes.
func (c *combined) fibs(t *testing.T) (nf, kernel, zebra []string) {
	out, err := ctlsock.Do(c.e.CtlPath, []string{"route show"}, true)
	if err != nil {
		t.Errorf("route show: %v", err)
		return
	}
	var rs []tableRoute
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Errorf("route show -j: %v", err)
		return
	}
	line := func(dst, gw, dev string) string {
		return fmt.Sprintf("%s via %s dev %s", dst, gw, strings.TrimPrefix(dev, "nf-"))
	}
	for _, r := range rs {
		if r.Protocol == c.proto {
			nf = append(nf, line(r.Dst, r.Gateway, r.Dev))
		}
	}
	kout, _ := c.e.net.Exec(c.e.net.Router, "ip", "-4", "-j", "route", "show", "proto", c.proto)
	var ks []tableRoute
	json.Unmarshal([]byte(kout), &ks)
	for _, r := range ks {
		kernel = append(kernel, line(r.Dst, r.Gateway, r.Dev))
	}
	if c.frr {
		zout, _ := c.l.Vtysh("show ip route bgp json")
		var zs map[string][]struct {
			Selected bool
			Nexthops []struct {
				IP            string
				InterfaceName string
				Active        bool
			}
		}
		json.Unmarshal([]byte(zout), &zs)
		for p, entries := range zs {
			for _, en := range entries {
				if !en.Selected {
					continue
				}
				for _, h := range en.Nexthops {
					if h.Active {
						zebra = append(zebra, line(p, h.IP, h.InterfaceName))
					}
				}
			}
		}
	}
	slices.Sort(nf)
	slices.Sort(kernel)
	slices.Sort(zebra)
	return
}

// check is what every step must leave: see the file's comment.
func (c *combined) check(t *testing.T, s stepSpec, flaps0 int64, event time.Time, fl *flows) {
	t.Helper()
	done := time.Now()
	// The session Established (after a flap it comes back).
	ok, why := eventually(40*time.Second, func() (bool, string) {
		st, up := c.session()
		return up, fmt.Sprintf("session %s up %v", st, up)
	})
	if !ok {
		isp, _ := c.l.Birdc(c.e.host("isp").NS, "bird-isp", "show", "protocols", "all", "rtr")
		ss, _ := c.e.net.Exec(c.e.net.Router, "ss", "-tn")
		t.Errorf("%s: the BGP session is not Established 40 s after the step: %s\nthe isp's BIRD:\n%s\nthe router's TCP sockets:\n%s", s.name, why, isp, ss)
	}
	// netfwd's FIB equal to the kernel's (and zebra's), with every prefix.
	var nf, kernel, zebra []string
	ok, _ = eventually(10*time.Second, func() (bool, string) {
		nf, kernel, zebra = c.fibs(t)
		return len(nf) == len(bgpPrefixes) && slices.Equal(nf, kernel) && (!c.frr || slices.Equal(nf, zebra)), ""
	})
	fibEqual := time.Since(event)
	if !ok {
		t.Errorf("%s: FIBs differ 10 s after the session was up:\nnetfwd %q\nkernel %q\nzebra  %q", s.name, nf, kernel, zebra)
	}
	// Pings across VLANs, out of both routed ports, into the BGP prefixes.
	c.pingAll(t, s.name, append(slices.Clone(combinedFlows), flowSpec{"h1", h2IP}, flowSpec{"h2", isp2Addr.Addr()}, flowSpec{"h2", bgpProbe2})...)
	// The session watched for combinedWatch after the event.
	time.Sleep(time.Until(event.Add(combinedWatch)))
	if _, up := c.session(); !up {
		t.Errorf("%s: the BGP session is down %v after the step", s.name, combinedWatch)
	}
	flaps := c.flaps.Load() - flaps0
	if flaps > s.maxFlaps {
		t.Errorf("%s: the BGP session flapped %d times, want at most %d", s.name, flaps, s.maxFlaps)
	}
	traffic, lost := fl.end()
	if s.noLoss && lost > 0 {
		t.Errorf("%s: the flows lost %d echoes: %s", s.name, lost, traffic)
	}
	// RSS: 64 MB for 2 idle ports, 16 MiB for each further port, and the
	// compiled FIB's table, which the idle figure holds untouched.
	ports := len(c.spec.RouterPorts())
	budget := idleTwoPortsLimitKB + (ports-2)*perPortLimitKB + compiledTableKB
	var rss, anon, file int
	if processAlive(c.pid) {
		rss = settledRSS(t, c.pid)
		anon, file = procStatusKB(t, c.pid, "RssAnon"), procStatusKB(t, c.pid, "RssFile")
		if rss > budget {
			t.Errorf("%s: netfwd (pid %d) holds %d KiB resident, budget %d KiB (%d ports); RssAnon %d, RssFile %d, RssShmem %d KiB; largest mappings:\n%s",
				s.name, c.pid, rss, budget, ports, procStatusKB(t, c.pid, "RssAnon"), procStatusKB(t, c.pid, "RssFile"), procStatusKB(t, c.pid, "RssShmem"), largestMappings(c.pid, 12))
		}
	} else {
		t.Errorf("%s: netfwd (pid %d) is not running", s.name, c.pid)
	}
	line := fmt.Sprintf("%-28s step %5.1f s, FIB equal %5.1f s after the event, flaps %d, RSS %5.1f MiB (anon %.1f, file %.1f), echoes %s",
		s.name, done.Sub(event).Seconds(), fibEqual.Seconds(), flaps, float64(rss)/1024, float64(anon)/1024, float64(file)/1024, traffic)
	c.steps = append(c.steps, line)
	t.Log(line)
}

// largestMappings lists the n mappings of pid with the most resident
// memory (from /proc/PID/smaps): where a budget went.
func largestMappings(pid, n int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return err.Error()
	}
	type mapping struct {
		head string
		rss  int
	}
	var ms []mapping
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":"):
			ms = append(ms, mapping{head: line})
		case len(f) >= 2 && f[0] == "Rss:" && len(ms) > 0:
			ms[len(ms)-1].rss, _ = strconv.Atoi(f[1])
		}
	}
	slices.SortFunc(ms, func(a, b mapping) int { return b.rss - a.rss })
	var out []string
	for _, m := range ms[:min(n, len(ms))] {
		out = append(out, fmt.Sprintf("%8d KiB  %s", m.rss, m.head))
	}
	return strings.Join(out, "\n")
}
