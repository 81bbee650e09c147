package main

// Routes from the network, end to end with the real daemons: BIRD in a
// "feed" namespace announces prefixes of the full table over eBGP to a
// router namespace, where either FRR (zebra + bgpd, zebra streaming to
// netfwd over FPM) or BIRD with its kernel protocol (netfwd mirroring the
// kernel) learns them, and `netfwd run` runs as a process. The BGP session
// runs over a plain veth beside netfwd (out of band); the in-band variant
// needs the host path.
//
// Each step compares full tables: netfwd's learned routes (`ctl -j route
// show`) against the kernel's routes of the same protocol in the router
// namespace, which zebra (or BIRD) programs as well: 0 missing, 0 stale.
// Steps: first load, a withdrawal, a BGP session reset, a restart of zebra
// (new nexthop ids; a prefix of the table keeps resolving throughout), a
// restart of netfwd.
//
// The daemons are started directly (no systemd), as docs/routes.md shows;
// zebra 8.4.4 can hang on SIGTERM while its FPM peer is gone, so it is
// stopped before netfwd, and killed after a timeout.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/ctlsock"
	"github.com/netfwd/netfwd/internal/fulltable"
	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/routinglab"
	"github.com/netfwd/netfwd/internal/testenv"
)

// routesFeedSize prefixes of the full table are announced: feedA holds all
// but the last 100, feedB those (withdrawn by disabling it).
const routesFeedSize = 5000

// routingLab is the namespaces and daemons of one test
// (internal/routinglab), failing the test on errors, and netfwd.
type routingLab struct {
	*routinglab.Lab
	t  *testing.T
	nf *netfwdProc
}

func newRoutingLab(t *testing.T) *routingLab { return newRoutingLabN(t, routesFeedSize) }

// newRoutingLabN announces the first n prefixes of the full table (0: all).
func newRoutingLabN(t *testing.T, n int) *routingLab {
	testenv.RequireRoot(t, "bird", "birdc", "vtysh", routinglab.Zebra, routinglab.Bgpd)
	all, err := fulltable.Load()
	if err != nil {
		if os.Getenv("NETFWD_E2E") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	if n > 0 {
		all = all[:n]
	}
	rl, err := routinglab.New(all)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rl.Close() })
	l := &routingLab{Lab: rl, t: t}
	host, err := rl.AddNetns("host")
	if err != nil {
		t.Fatal(err)
	}
	// One netfwd port towards a host (the BGP session's veth, up0, is a
	// kernel interface of the router namespace, not a netfwd port).
	testenv.Run(t, "ip", "-n", l.Rtr, "link", "add", "eth1", "type", "veth", "peer", "name", "eth0", "netns", host)
	testenv.Run(t, "ip", "-n", l.Rtr, "link", "set", "eth1", "up")
	testenv.Run(t, "ip", "-n", host, "address", "add", "10.1.0.2/24", "dev", "eth0")
	testenv.Run(t, "ip", "-n", host, "link", "set", "eth0", "up")
	l.write("router.conf", "address add 10.1.0.1/24 dev eth1\n")
	t.Cleanup(l.stopAll)
	return l
}

func (l *routingLab) must(err error) {
	l.t.Helper()
	if err != nil {
		l.t.Fatal(err)
	}
}

func (l *routingLab) write(name, text string) { l.t.Helper(); l.must(l.Write(name, text)) }

func (l *routingLab) run(ns string, args ...string) string {
	l.t.Helper()
	return testenv.Run(l.t, "ip", append([]string{"netns", "exec", ns}, args...)...)
}

func (l *routingLab) startFRR()   { l.t.Helper(); l.must(l.StartFRR()) }
func (l *routingLab) startZebra() { l.t.Helper(); l.must(l.StartZebra()) }
func (l *routingLab) startBgpd()  { l.t.Helper(); l.must(l.StartBgpd()) }
func (l *routingLab) startBird(ns, name, conf string) {
	l.t.Helper()
	l.must(l.StartBird(ns, name, conf))
}

// restartFRR restarts zebra and bgpd as watchfrr does when zebra dies:
// zebra first (a clean bgpd shutdown would withdraw its routes first).
func (l *routingLab) restartFRR(between func()) {
	for _, d := range []string{"zebra", "bgpd"} {
		if err := l.Stop(d); err != nil {
			l.t.Log(err)
		}
	}
	if between != nil {
		between()
	}
	l.startZebra()
	l.startBgpd()
}

func (l *routingLab) birdc(ns, name string, args ...string) string {
	l.t.Helper()
	out, err := l.Birdc(ns, name, args...)
	l.must(err)
	return out
}

func (l *routingLab) stopAll() {
	// zebra before netfwd: zebra 8.4.4 can hang on SIGTERM without its
	// FPM peer.
	l.StopDaemons()
	if l.nf != nil {
		l.nf.stop()
	}
	if l.t.Failed() {
		for _, f := range []string{"zebra.log", "bgpd.log", "bird-feed.log", "bird-rtr.log"} {
			if b, err := os.ReadFile(filepath.Join(l.Dir, f)); err == nil {
				l.t.Logf("%s:\n%s", f, lastBytes(string(b), 3000))
			}
		}
	}
}

// netfwdProc is `netfwd run` in the router namespace.
type netfwdProc struct {
	t       *testing.T
	cmd     *exec.Cmd
	stderr  *syncBuffer
	exited  chan struct{}
	ctlPath string
}

func (l *routingLab) startNetfwd(args ...string) *netfwdProc {
	t := l.t
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &netfwdProc{t: t, stderr: &syncBuffer{}, exited: make(chan struct{}), ctlPath: l.Dir + "/netfwd.sock"}
	p.cmd = exec.Command("ip", append([]string{"netns", "exec", l.Rtr, exe, "run", "--config", l.Dir + "/router.conf",
		"--ctl", p.ctlPath, "--metrics", "off"}, args...)...)
	p.cmd.Env = append(os.Environ(), "NETFWD_TEST_MAIN=1")
	p.cmd.Stdout, p.cmd.Stderr = p.stderr, p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.cmd.Wait()
		close(p.exited)
	}()
	ok, why := eventually(20*time.Second, func() (bool, string) {
		_, err := ctlsock.Do(p.ctlPath, []string{"link show"}, false)
		select {
		case <-p.exited:
			t.Fatalf("netfwd run exited:\n%s", p.stderr)
		default:
		}
		return err == nil, fmt.Sprint(err)
	})
	if !ok {
		t.Fatalf("netfwd run: control socket not answering: %s\n%s", why, p.stderr)
	}
	l.nf = p
	return p
}

func (p *netfwdProc) stop() {
	select {
	case <-p.exited:
	default:
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Kill()
			<-p.exited
			p.t.Errorf("netfwd run did not stop within 10 s of SIGTERM")
		}
	}
	log := p.stderr.String()
	if st := p.cmd.ProcessState; st != nil && !st.Success() {
		p.t.Errorf("netfwd run exited with %v", st)
	}
	if strings.Contains(log, "DATA RACE") || strings.Contains(log, "panic:") {
		p.t.Errorf("netfwd run reported a race or panic")
	}
	if p.t.Failed() {
		p.t.Logf("netfwd run output:\n%s", lastBytes(log, 6000))
	}
}

// tableLine is one route in a canonical form for both sides (zebra's
// nexthop ids are left out: netfwd shares nexthops by content).
type tableRoute struct {
	Type, Dst, Gateway, Dev, Protocol string
	Metric                            uint32
	Nexthops                          []struct {
		Gateway, Dev string
		Weight       int
	}
}

func (r tableRoute) String() string {
	s := fmt.Sprintf("%s %s via %s dev %s proto %s metric %d", r.Type, r.Dst, r.Gateway, r.Dev, r.Protocol, r.Metric)
	for _, h := range r.Nexthops {
		s += fmt.Sprintf(" [%s %s %d]", h.Gateway, h.Dev, h.Weight)
	}
	return s
}

func canonical(t *testing.T, js, proto string) []string {
	var routes []tableRoute
	if err := json.Unmarshal([]byte(js), &routes); err != nil {
		t.Fatalf("route show -j: %v\n%s", err, lastBytes(js, 500))
	}
	var out []string
	for _, r := range routes {
		if r.Protocol == proto {
			out = append(out, r.String())
		}
	}
	slices.Sort(out)
	return out
}

// compare waits until netfwd's routes of proto equal the kernel's in the
// router namespace (and number want), and fails with the difference.
func (l *routingLab) compare(proto string, want int) {
	t := l.t
	t.Helper()
	var k, n []string
	ok, why := eventually(90*time.Second, func() (bool, string) {
		k = canonical(t, l.run(l.Rtr, "ip", "-4", "-j", "route", "show"), proto)
		out, err := ctlsock.Do(l.nf.ctlPath, []string{"route show"}, true)
		if err != nil {
			return false, err.Error()
		}
		n = canonical(t, out, proto)
		if len(k) != want {
			return false, fmt.Sprintf("kernel has %d routes of proto %s, want %d", len(k), proto, want)
		}
		if !slices.Equal(k, n) {
			return false, fmt.Sprintf("netfwd has %d routes, kernel %d", len(n), len(k))
		}
		return true, ""
	})
	if !ok {
		var missing, stale []string
		for _, r := range k {
			if !slices.Contains(n, r) {
				missing = append(missing, r)
			}
		}
		for _, r := range n {
			if !slices.Contains(k, r) {
				stale = append(stale, r)
			}
		}
		t.Fatalf("tables differ: %s\n%d missing (first: %q)\n%d stale (first: %q)", why, len(missing), first(missing, 3), len(stale), first(stale, 3))
	}
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

// watch resolves prefix p on netfwd every 20 ms until stop and counts the
// answers that had no route.
func (l *routingLab) watch(p netip.Prefix) (stop func() (lookups, misses int64)) {
	var lookups, misses atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			out, err := ctlsock.Do(l.nf.ctlPath, []string{"route get " + p.Addr().String()}, true)
			if err != nil {
				continue // the daemon is restarting
			}
			lookups.Add(1)
			if strings.Contains(out, "unreachable") || !strings.Contains(out, `"gateway"`) {
				misses.Add(1)
			}
		}
	}()
	return func() (int64, int64) {
		close(done)
		wg.Wait()
		return lookups.Load(), misses.Load()
	}
}

// sweeps returns the "removed=N" of the FPM server's sweep log lines.
func (p *netfwdProc) sweeps() []string {
	var out []string
	for _, line := range strings.Split(p.stderr.String(), "\n") {
		if strings.Contains(line, "fpm: swept") {
			for _, f := range strings.Fields(line) {
				if strings.HasPrefix(f, "removed=") {
					out = append(out, f)
				}
			}
		}
	}
	return out
}

// bgpSession returns bgpd's session with BIRD: the number of times it was
// established, whether it is now, and the prefixes received.
func (l *routingLab) bgpSession() (established int, up bool, received int) {
	p := l.BGPPeer(routinglab.FeedAddr)
	return p.Established, p.Up, p.Received
}

// birdSession returns when BIRD's BGP protocol name last changed state
// and whether it is established.
func (l *routingLab) birdSession(ns, daemon, name string) (since string, up bool) {
	return l.BirdSession(ns, daemon, name)
}

// resetBGP restarts the BGP session from the feed and waits until it is
// up again with every prefix (the withdrawals and announcements happened).
func (l *routingLab) resetBGP(frr bool, all int) {
	t := l.t
	t.Helper()
	var before int
	var since string
	if frr {
		before, _, _ = l.bgpSession()
	} else {
		since, _ = l.birdSession(l.Rtr, "bird-rtr", "dn")
	}
	l.birdc(l.Feed, "bird-feed", "restart", "up")
	ok, why := eventually(60*time.Second, func() (bool, string) {
		if frr {
			n, up, rcvd := l.bgpSession()
			return n > before && up && rcvd == all, fmt.Sprintf("established %d times (was %d), up %v, %d prefixes", n, before, up, rcvd)
		}
		s, up := l.birdSession(l.Rtr, "bird-rtr", "dn")
		return s != since && up, fmt.Sprintf("since %s (was %s), up %v", s, since, up)
	})
	if !ok {
		t.Fatalf("BGP session not back after its reset: %s", why)
	}
}

// FRR's zebra streams to netfwd over FPM.
func TestRoutesFRRoverFPM(t *testing.T) {
	waitingTest(t)
	l := newRoutingLab(t)
	nf := l.startNetfwd("--fpm", "127.0.0.1:2620")
	l.startFRR()
	l.startBird(l.Feed, "bird-feed", routinglab.BirdFeedConf)
	all := len(l.Prefixes)
	start := time.Now()
	l.compare("bgp", all)
	t.Logf("first load: %d routes in %v", all, time.Since(start).Round(time.Millisecond))

	// A withdrawal takes the routes away.
	l.birdc(l.Feed, "bird-feed", "disable", "feedB")
	l.compare("bgp", all-100)
	l.birdc(l.Feed, "bird-feed", "enable", "feedB")
	l.compare("bgp", all)

	// A BGP session reset: everything withdrawn and learned again.
	l.resetBGP(true, all)
	l.compare("bgp", all)

	// zebra restarts (and bgpd with it): a new FPM session with new
	// nexthop ids replays the table once BGP is back; meanwhile netfwd
	// forwards with the old session's routes: a replayed prefix never
	// stops resolving and the sweep after the replay finds nothing to
	// remove.
	probe := l.Prefixes[all/2]
	stopWatch := l.watch(probe)
	sweeps := len(nf.sweeps())
	restarted := time.Now()
	l.restartFRR(nil)
	ok, why := eventually(60*time.Second, func() (bool, string) {
		s := nf.sweeps()
		return len(s) > sweeps, fmt.Sprintf("sweeps %v", s)
	})
	t.Logf("zebra restart: sweep %v after zebra started", time.Since(restarted).Round(time.Millisecond))
	if !ok {
		t.Fatalf("no sweep after zebra's restart: %s", why)
	}
	l.compare("bgp", all)
	lookups, misses := stopWatch()
	if misses != 0 || lookups < 20 {
		t.Fatalf("during zebra's restart %s had no route in %d of %d lookups", probe, misses, lookups)
	}
	if s := nf.sweeps(); s[len(s)-1] != "removed=0" {
		t.Errorf("the sweep after zebra's restart removed routes zebra replayed: %v", s)
	}

	// Routes withdrawn while zebra is away are swept after its replay.
	l.restartFRR(func() { l.birdc(l.Feed, "bird-feed", "disable", "feedB") })
	l.compare("bgp", all-100)
	l.birdc(l.Feed, "bird-feed", "enable", "feedB")
	l.compare("bgp", all)

	// netfwd restarts: zebra reconnects and replays everything.
	nf.stop()
	start = time.Now()
	nf = l.startNetfwd("--fpm", "127.0.0.1:2620")
	l.compare("bgp", all)
	t.Logf("netfwd restart: full table back %v after the start", time.Since(start).Round(time.Millisecond))
	// Before zebra reconnected, from the kernel's copy (fpm.SeedFromKernel).
	if i := strings.Index(nf.stderr.String(), "fpm: seeded"); i < 0 || !strings.Contains(nf.stderr.String()[i:], fmt.Sprintf("routes=%d ", all)) {
		t.Errorf("netfwd restart: zebra's %d routes not seeded from the kernel:\n%s", all, nf.stderr)
	} else {
		t.Logf("netfwd restart: %s", strings.SplitN(nf.stderr.String()[i:], "\n", 2)[0])
	}
	// The configured address and its connected route were there all along.
	if out, _ := ctlsock.Do(nf.ctlPath, []string{"route get 10.1.0.2"}, true); !strings.Contains(out, `"dev":"eth1"`) {
		t.Fatalf("config route: %s", out)
	}
}

// BIRD programs the kernel (kernel protocol); netfwd mirrors it.
func TestRoutesBIRDKernelMirror(t *testing.T) {
	waitingTest(t)
	l := newRoutingLab(t)
	l.startBird(l.Feed, "bird-feed", routinglab.BirdFeedConf)
	l.startBird(l.Rtr, "bird-rtr", routinglab.BirdRtrConf)
	l.startNetfwd("--mirror-kernel")
	all := len(l.Prefixes)
	l.compare("bird", all)

	l.birdc(l.Feed, "bird-feed", "disable", "feedB")
	l.compare("bird", all-100)
	l.birdc(l.Feed, "bird-feed", "enable", "feedB")
	l.compare("bird", all)

	l.resetBGP(false, all)
	l.compare("bird", all)

	// netfwd restarts while BIRD changes the table.
	l.nf.stop()
	l.birdc(l.Feed, "bird-feed", "disable", "feedB")
	l.startNetfwd("--mirror-kernel")
	l.compare("bird", all-100)
	l.birdc(l.Feed, "bird-feed", "enable", "feedB")
	l.compare("bird", all)
}

// cpuSeconds returns the CPU time of the process in a pid file (or of pid).
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

func pidOf(file string) int {
	b, _ := os.ReadFile(file)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// sweptAt returns the time of the n-th sweep log line (1-based) and
// whether there is one: the FPM server sweeps SweepQuiet (10 s) after the
// last transaction of a replay committed, so the sweep time minus 10 s is
// when the last route was in the FIB, measured at no cost.
func (p *netfwdProc) sweptAt(n int) (time.Time, bool) {
	i := 0
	for _, line := range strings.Split(p.stderr.String(), "\n") {
		if !strings.Contains(line, "fpm: swept") {
			continue
		}
		if i++; i < n {
			continue
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "time="); ok {
				t, err := time.Parse(time.RFC3339Nano, v)
				return t, err == nil
			}
		}
	}
	return time.Time{}, false
}

// The full table (901,899 prefixes) end to end, measured: BIRD announces
// it to FRR, zebra streams it to netfwd. Time from the BGP session's
// Established to the last route in netfwd's FIB, and after a netfwd
// restart, from the start to the full FIB again. Minutes and a few GB:
// only with NETFWD_ROUTES_FULL=1.
func TestRoutesFullTableFPM(t *testing.T) {
	if os.Getenv("NETFWD_ROUTES_FULL") != "1" {
		t.Skip("set NETFWD_ROUTES_FULL=1 to measure the full table end to end")
	}
	l := newRoutingLabN(t, 0)
	all := len(l.Prefixes)
	nf := l.startNetfwd("--fpm", "127.0.0.1:2620")
	l.startFRR()
	l.startBird(l.Feed, "bird-feed", routinglab.BirdFeedDisabled)
	time.Sleep(5 * time.Second) // BIRD loads its static routes
	zebra0 := cpuSeconds(pidOf(l.Dir + "/zebra.pid"))
	nf0 := cpuSeconds(nf.cmd.Process.Pid)
	l.birdc(l.Feed, "bird-feed", "enable", "up")
	var established time.Time
	ok, why := eventually(60*time.Second, func() (bool, string) {
		_, up, _ := l.bgpSession()
		if up {
			established = time.Now()
		}
		return up, "session not established"
	})
	if !ok {
		t.Fatal(why)
	}
	done := func(what string, n int, from time.Time) {
		var at time.Time
		ok, why := eventually(10*time.Minute, func() (bool, string) {
			var ok bool
			at, ok = nf.sweptAt(n)
			return ok, "no sweep"
		})
		if !ok {
			t.Fatalf("%s: %s", what, why)
		}
		t.Logf("%s: last route in netfwd's FIB %v after %s", what, at.Add(-10*time.Second).Sub(from).Round(10*time.Millisecond), "it")
	}
	done("first load, from BGP Established", 1, established)
	t.Logf("CPU seconds until then: zebra %.1f, netfwd %.1f", cpuSeconds(pidOf(l.Dir+"/zebra.pid"))-zebra0, cpuSeconds(nf.cmd.Process.Pid)-nf0)
	l.compare("bgp", all)
	nf.stop()
	start := time.Now()
	zebra0 = cpuSeconds(pidOf(l.Dir + "/zebra.pid"))
	nf = l.startNetfwd("--fpm", "127.0.0.1:2620")
	nf0 = cpuSeconds(nf.cmd.Process.Pid)
	done("netfwd restart, from its start", 1, start)
	t.Logf("CPU seconds for the replay (and the 10 s after it): zebra %.1f, netfwd %.1f",
		cpuSeconds(pidOf(l.Dir+"/zebra.pid"))-zebra0, cpuSeconds(nf.cmd.Process.Pid)-nf0)
	for _, line := range strings.Split(nf.stderr.String(), "\n") {
		if strings.Contains(line, "fpm:") {
			t.Log(line)
		}
	}
	l.compare("bgp", all)
}

// fibRoutes scrapes netfwd's metrics (inside the router namespace) for the
// number of routes in table main.
func (l *routingLab) fibRoutes(addr string) int {
	c := http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
			var conn net.Conn
			err := pktio.InNetns(l.Rtr, func() (err error) {
				conn, err = (&net.Dialer{}).DialContext(ctx, network, a)
				return err
			})
			return conn, err
		}}}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "netfwd_fib_routes{") && strings.Contains(line, `table="main"`) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			n += int(v)
		}
	}
	return n
}

// The full table through BIRD's kernel protocol and the mirror, measured
// (NETFWD_ROUTES_FULL=1): time from the BGP session's Established to the
// full table in netfwd's FIB, the mirror's overruns (from its log), and a
// full comparison.
func TestRoutesFullTableMirror(t *testing.T) {
	if os.Getenv("NETFWD_ROUTES_FULL") != "1" {
		t.Skip("set NETFWD_ROUTES_FULL=1 to measure the full table end to end")
	}
	l := newRoutingLabN(t, 0)
	all := len(l.Prefixes)
	const metrics = "127.0.0.1:9479"
	l.startBird(l.Feed, "bird-feed", routinglab.BirdFeedDisabled)
	l.startBird(l.Rtr, "bird-rtr", routinglab.BirdRtrConf)
	nf := l.startNetfwd("--mirror-kernel", "--metrics", metrics)
	base := l.fibRoutes(metrics)
	time.Sleep(5 * time.Second) // BIRD loads its static routes
	nf0 := cpuSeconds(nf.cmd.Process.Pid)
	kernelDone := l.countKernelRoutes(all)
	l.birdc(l.Feed, "bird-feed", "enable", "up")
	var established time.Time
	ok, why := eventually(60*time.Second, func() (bool, string) {
		if _, up := l.birdSession(l.Rtr, "bird-rtr", "dn"); up {
			established = time.Now()
			return true, ""
		}
		return false, "session not established"
	})
	if !ok {
		t.Fatal(why)
	}
	// The mirror logs a large burst once the socket has been idle for a
	// second, with the time of its last transaction: no polling of the
	// daemon needed.
	var last time.Time
	ok, why = eventually(10*time.Minute, func() (bool, string) {
		for _, line := range strings.Split(nf.stderr.String(), "\n") {
			if !strings.Contains(line, "kmirror: applied a burst") {
				continue
			}
			for _, f := range strings.Fields(line) {
				if v, ok := strings.CutPrefix(f, "to="); ok {
					last, _ = time.Parse(time.RFC3339Nano, v)
				}
			}
		}
		if last.IsZero() || time.Since(last) < 2*time.Second {
			return false, "no burst logged"
		}
		if n := l.fibRoutes(metrics) - base; n < all { // a burst ended, but not the last
			time.Sleep(2 * time.Second)
			return false, fmt.Sprintf("%d of %d routes", n, all)
		}
		return true, ""
	})
	if !ok {
		t.Fatal(why)
	}
	t.Logf("last transaction of the full table %v after BGP Established (the kernel's last route: %v); netfwd CPU %.1f s",
		last.Sub(established).Round(10*time.Millisecond), (<-kernelDone).Sub(established).Round(10*time.Millisecond),
		cpuSeconds(nf.cmd.Process.Pid)-nf0)

	for _, line := range strings.Split(nf.stderr.String(), "\n") {
		if strings.Contains(line, "kmirror") {
			t.Log(line)
		}
	}
	l.compare("bird", all)
}

// countKernelRoutes sends the time the router namespace's kernel held n
// routes of protocol bird (routinglab.WatchKernelRoutes).
func (l *routingLab) countKernelRoutes(n int) <-chan time.Time {
	done, stop, err := routinglab.WatchKernelRoutes(l.Rtr, routinglab.ProtoBird, n, 10*time.Minute)
	l.must(err)
	l.t.Cleanup(stop)
	return done
}
