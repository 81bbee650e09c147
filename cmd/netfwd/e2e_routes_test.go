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
	"errors"
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
	"github.com/netfwd/netfwd/internal/lab"
	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/rtnl"
	"github.com/netfwd/netfwd/internal/testenv"
)

const (
	frrZebra = "/usr/lib/frr/zebra"
	frrBgpd  = "/usr/lib/frr/bgpd"
)

// routesFeedSize prefixes of the full table are announced: feedA holds all
// but the last 100, feedB those (withdrawn by disabling it).
const routesFeedSize = 5000

// routingLab is the namespaces and daemons of one test.
type routingLab struct {
	t         *testing.T
	rtr, feed string // namespaces
	dir       string // configs, logs, sockets (traversable by user frr)
	prefixes  []netip.Prefix
	pids      []string // pid files of FRR and BIRD daemons, stopped in reverse order
	nf        *netfwdProc
}

func newRoutingLab(t *testing.T) *routingLab { return newRoutingLabN(t, routesFeedSize) }

// newRoutingLabN announces the first n prefixes of the full table (0: all).
func newRoutingLabN(t *testing.T, n int) *routingLab {
	testenv.RequireRoot(t, "bird", "birdc", frrZebra, frrBgpd)
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
	l := &routingLab{t: t, prefixes: all}
	l.dir, err = os.MkdirTemp("", "nfroutes")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(l.dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(l.dir) })
	l.rtr = testenv.Netns(t, "nfrr")
	l.feed = testenv.Netns(t, "nfrf")
	host := testenv.Netns(t, "nfrh")
	// The BGP session's veth (a kernel interface of the router namespace,
	// not a netfwd port) and one netfwd port towards a host.
	testenv.Run(t, "ip", "-n", l.rtr, "link", "add", "up0", "type", "veth", "peer", "name", "dn0", "netns", l.feed)
	testenv.Run(t, "ip", "-n", l.rtr, "address", "add", "10.99.0.1/30", "dev", "up0")
	testenv.Run(t, "ip", "-n", l.rtr, "link", "set", "up0", "up")
	testenv.Run(t, "ip", "-n", l.feed, "address", "add", "10.99.0.2/30", "dev", "dn0")
	testenv.Run(t, "ip", "-n", l.feed, "link", "set", "dn0", "up")
	testenv.Run(t, "ip", "-n", l.rtr, "link", "add", "eth1", "type", "veth", "peer", "name", "eth0", "netns", host)
	testenv.Run(t, "ip", "-n", l.rtr, "link", "set", "eth1", "up")
	testenv.Run(t, "ip", "-n", host, "address", "add", "10.1.0.2/24", "dev", "eth0")
	testenv.Run(t, "ip", "-n", host, "link", "set", "eth0", "up")
	l.write("router.conf", "address add 10.1.0.1/24 dev eth1\n")
	var a, b strings.Builder
	for i, p := range l.prefixes {
		w := &a
		if i >= len(l.prefixes)-100 {
			w = &b
		}
		fmt.Fprintf(w, "route %s blackhole;\n", p)
	}
	l.write("feedA.inc", a.String())
	l.write("feedB.inc", b.String())
	l.write("bird-feed.conf", l.subst(birdFeedConf))
	t.Cleanup(l.stopAll)
	return l
}

// Configurations (docs/routes.md has the same, for people).
const (
	zebraConf = `hostname rtr-zebra
log file @DIR@/zebra.log
log timestamp precision 3
debug zebra fpm
fpm address 127.0.0.1 port 2620
`
	bgpdConf = `hostname rtr-bgpd
log file @DIR@/bgpd.log
router bgp 65001
 bgp router-id 10.99.0.1
 no bgp ebgp-requires-policy
 neighbor 10.99.0.2 remote-as 65002
 neighbor 10.99.0.2 timers connect 1
 address-family ipv4 unicast
  neighbor 10.99.0.2 activate
 exit-address-family
`
	birdFeedConf = `log "@DIR@/bird-feed.log" all;
router id 10.99.0.2;
protocol device { }
protocol static feedA {
  ipv4;
  include "@DIR@/feedA.inc";
}
protocol static feedB {
  ipv4;
  include "@DIR@/feedB.inc";
}
protocol bgp up {
  local 10.99.0.2 as 65002;
  neighbor 10.99.0.1 as 65001;
  hold time 240;
  connect retry time 1;
  ipv4 { import none; export all; next hop self; };
}
`
	birdRtrConf = `log "@DIR@/bird-rtr.log" all;
router id 10.99.0.1;
protocol device { }
protocol kernel k4 {
  ipv4 { import none; export all; };
  learn off;
  scan time 600;
}
protocol bgp dn {
  local 10.99.0.1 as 65001;
  neighbor 10.99.0.2 as 65002;
  hold time 240;
  connect retry time 1;
  ipv4 { import all; export none; };
}
`
)

func (l *routingLab) subst(s string) string { return strings.ReplaceAll(s, "@DIR@", l.dir) }

func (l *routingLab) write(name, text string) {
	if err := os.WriteFile(filepath.Join(l.dir, name), []byte(text), 0o644); err != nil {
		l.t.Fatal(err)
	}
}

func (l *routingLab) run(ns string, args ...string) string {
	l.t.Helper()
	return testenv.Run(l.t, "ip", append([]string{"netns", "exec", ns}, args...)...)
}

// startFRR starts zebra (with the FPM module) and bgpd in the router
// namespace, as user frr.
func (l *routingLab) startFRR() {
	l.write("zebra.conf", l.subst(zebraConf))
	l.write("bgpd.conf", l.subst(bgpdConf))
	testenv.Run(l.t, "chown", "-R", "frr:frr", l.dir)
	l.startZebra()
	l.startBgpd()
}

func (l *routingLab) startBgpd() {
	l.run(l.rtr, frrBgpd, "-d", "-f", l.dir+"/bgpd.conf", "-i", l.dir+"/bgpd.pid", "-z", l.dir+"/zserv.api",
		"--vty_socket", l.dir, "-P", "0")
	if !slices.Contains(l.pids, l.dir+"/bgpd.pid") {
		l.pids = append(l.pids, l.dir+"/bgpd.pid")
	}
}

// restartFRR restarts zebra and bgpd as watchfrr does when zebra dies:
// zebra first (a clean bgpd shutdown would withdraw its routes first).
func (l *routingLab) restartFRR(between func()) {
	for _, d := range []string{"zebra", "bgpd"} {
		if err := stopPid(l.dir + "/" + d + ".pid"); err != nil {
			l.t.Log(err)
		}
	}
	if between != nil {
		between()
	}
	l.startZebra()
	l.startBgpd()
}

func (l *routingLab) startZebra() {
	l.run(l.rtr, frrZebra, "-d", "-M", "dplane_fpm_nl", "-f", l.dir+"/zebra.conf", "-i", l.dir+"/zebra.pid",
		"-z", l.dir+"/zserv.api", "--vty_socket", l.dir, "-P", "0", "-s", "90000000")
	if !slices.Contains(l.pids, l.dir+"/zebra.pid") {
		l.pids = append(l.pids, l.dir+"/zebra.pid")
	}
}

func (l *routingLab) startBird(ns, name, conf string) {
	l.write(name+".conf", l.subst(conf))
	l.run(ns, "bird", "-c", l.dir+"/"+name+".conf", "-s", l.dir+"/"+name+".ctl", "-P", l.dir+"/"+name+".pid")
	l.pids = append(l.pids, l.dir+"/"+name+".pid")
}

func (l *routingLab) birdc(ns, name string, args ...string) string {
	l.t.Helper()
	return l.run(ns, append([]string{"birdc", "-s", l.dir + "/" + name + ".ctl"}, args...)...)
}

// stopPid stops a daemon by its pid file: SIGTERM, SIGKILL after 10 s.
func stopPid(file string) error { return lab.StopDaemon(file, 10*time.Second) }

func (l *routingLab) stopAll() {
	// zebra before netfwd: zebra 8.4.4 can hang on SIGTERM without its
	// FPM peer.
	for i := len(l.pids) - 1; i >= 0; i-- {
		stopPid(l.pids[i])
	}
	if l.nf != nil {
		l.nf.stop()
	}
	if l.t.Failed() {
		for _, f := range []string{"zebra.log", "bgpd.log", "bird-feed.log", "bird-rtr.log"} {
			if b, err := os.ReadFile(filepath.Join(l.dir, f)); err == nil {
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
	p := &netfwdProc{t: t, stderr: &syncBuffer{}, exited: make(chan struct{}), ctlPath: l.dir + "/netfwd.sock"}
	p.cmd = exec.Command("ip", append([]string{"netns", "exec", l.rtr, exe, "run", "--config", l.dir + "/router.conf",
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
		k = canonical(t, l.run(l.rtr, "ip", "-4", "-j", "route", "show"), proto)
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
	out, err := testenv.Output("ip", "netns", "exec", l.rtr, "vtysh", "--vty_socket", l.dir, "-c", "show bgp summary json")
	if err != nil {
		return 0, false, 0
	}
	var sum map[string]struct {
		Peers map[string]struct {
			State                  string
			ConnectionsEstablished int
			PfxRcd                 int
		}
	}
	if json.Unmarshal([]byte(out), &sum) != nil {
		return 0, false, 0
	}
	p := sum["ipv4Unicast"].Peers["10.99.0.2"]
	return p.ConnectionsEstablished, p.State == "Established", p.PfxRcd
}

// birdSession returns when BIRD's BGP protocol name last changed state
// and whether it is established.
func (l *routingLab) birdSession(ns, daemon, name string) (since string, up bool) {
	out, err := testenv.Output("ip", "netns", "exec", ns, "birdc", "-s", l.dir+"/"+daemon+".ctl", "show", "protocols", name)
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && f[0] == name {
			return f[4], f[5] == "Established"
		}
	}
	return "", false
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
		since, _ = l.birdSession(l.rtr, "bird-rtr", "dn")
	}
	l.birdc(l.feed, "bird-feed", "restart", "up")
	ok, why := eventually(60*time.Second, func() (bool, string) {
		if frr {
			n, up, rcvd := l.bgpSession()
			return n > before && up && rcvd == all, fmt.Sprintf("established %d times (was %d), up %v, %d prefixes", n, before, up, rcvd)
		}
		s, up := l.birdSession(l.rtr, "bird-rtr", "dn")
		return s != since && up, fmt.Sprintf("since %s (was %s), up %v", s, since, up)
	})
	if !ok {
		t.Fatalf("BGP session not back after its reset: %s", why)
	}
}

// FRR's zebra streams to netfwd over FPM.
func TestRoutesFRRoverFPM(t *testing.T) {
	l := newRoutingLab(t)
	nf := l.startNetfwd("--fpm", "127.0.0.1:2620")
	l.startFRR()
	l.startBird(l.feed, "bird-feed", birdFeedConf)
	all := len(l.prefixes)
	start := time.Now()
	l.compare("bgp", all)
	t.Logf("first load: %d routes in %v", all, time.Since(start).Round(time.Millisecond))

	// A withdrawal takes the routes away.
	l.birdc(l.feed, "bird-feed", "disable", "feedB")
	l.compare("bgp", all-100)
	l.birdc(l.feed, "bird-feed", "enable", "feedB")
	l.compare("bgp", all)

	// A BGP session reset: everything withdrawn and learned again.
	l.resetBGP(true, all)
	l.compare("bgp", all)

	// zebra restarts (and bgpd with it): a new FPM session with new
	// nexthop ids replays the table once BGP is back; meanwhile netfwd
	// forwards with the old session's routes: a replayed prefix never
	// stops resolving and the sweep after the replay finds nothing to
	// remove.
	probe := l.prefixes[all/2]
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
	l.restartFRR(func() { l.birdc(l.feed, "bird-feed", "disable", "feedB") })
	l.compare("bgp", all-100)
	l.birdc(l.feed, "bird-feed", "enable", "feedB")
	l.compare("bgp", all)

	// netfwd restarts: zebra reconnects and replays everything.
	nf.stop()
	start = time.Now()
	nf = l.startNetfwd("--fpm", "127.0.0.1:2620")
	l.compare("bgp", all)
	t.Logf("netfwd restart: full table back %v after the start", time.Since(start).Round(time.Millisecond))
	// The configured address and its connected route were there all along.
	if out, _ := ctlsock.Do(nf.ctlPath, []string{"route get 10.1.0.2"}, true); !strings.Contains(out, `"dev":"eth1"`) {
		t.Fatalf("config route: %s", out)
	}
}

// BIRD programs the kernel (kernel protocol); netfwd mirrors it.
func TestRoutesBIRDKernelMirror(t *testing.T) {
	l := newRoutingLab(t)
	l.startBird(l.feed, "bird-feed", birdFeedConf)
	l.startBird(l.rtr, "bird-rtr", birdRtrConf)
	l.startNetfwd("--mirror-kernel")
	all := len(l.prefixes)
	l.compare("bird", all)

	l.birdc(l.feed, "bird-feed", "disable", "feedB")
	l.compare("bird", all-100)
	l.birdc(l.feed, "bird-feed", "enable", "feedB")
	l.compare("bird", all)

	l.resetBGP(false, all)
	l.compare("bird", all)

	// netfwd restarts while BIRD changes the table.
	l.nf.stop()
	l.birdc(l.feed, "bird-feed", "disable", "feedB")
	l.startNetfwd("--mirror-kernel")
	l.compare("bird", all-100)
	l.birdc(l.feed, "bird-feed", "enable", "feedB")
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
	all := len(l.prefixes)
	nf := l.startNetfwd("--fpm", "127.0.0.1:2620")
	l.startFRR()
	l.startBird(l.feed, "bird-feed", strings.Replace(birdFeedConf, "protocol bgp up {", "protocol bgp up {\n  disabled;", 1))
	time.Sleep(5 * time.Second) // BIRD loads its static routes
	zebra0 := cpuSeconds(pidOf(l.dir + "/zebra.pid"))
	nf0 := cpuSeconds(nf.cmd.Process.Pid)
	l.birdc(l.feed, "bird-feed", "enable", "up")
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
	t.Logf("CPU seconds until then: zebra %.1f, netfwd %.1f", cpuSeconds(pidOf(l.dir+"/zebra.pid"))-zebra0, cpuSeconds(nf.cmd.Process.Pid)-nf0)
	l.compare("bgp", all)
	nf.stop()
	start := time.Now()
	zebra0 = cpuSeconds(pidOf(l.dir + "/zebra.pid"))
	nf = l.startNetfwd("--fpm", "127.0.0.1:2620")
	nf0 = cpuSeconds(nf.cmd.Process.Pid)
	done("netfwd restart, from its start", 1, start)
	t.Logf("CPU seconds for the replay (and the 10 s after it): zebra %.1f, netfwd %.1f",
		cpuSeconds(pidOf(l.dir+"/zebra.pid"))-zebra0, cpuSeconds(nf.cmd.Process.Pid)-nf0)
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
			err := pktio.InNetns(l.rtr, func() (err error) {
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
	all := len(l.prefixes)
	const metrics = "127.0.0.1:9479"
	l.startBird(l.feed, "bird-feed", strings.Replace(birdFeedConf, "protocol bgp up {", "protocol bgp up {\n  disabled;", 1))
	l.startBird(l.rtr, "bird-rtr", birdRtrConf)
	nf := l.startNetfwd("--mirror-kernel", "--metrics", metrics)
	base := l.fibRoutes(metrics)
	time.Sleep(5 * time.Second) // BIRD loads its static routes
	nf0 := cpuSeconds(nf.cmd.Process.Pid)
	kernelDone := l.countKernelRoutes(all)
	l.birdc(l.feed, "bird-feed", "enable", "up")
	var established time.Time
	ok, why := eventually(60*time.Second, func() (bool, string) {
		if _, up := l.birdSession(l.rtr, "bird-rtr", "dn"); up {
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

// countKernelRoutes listens to the router namespace's route notifications
// (its own 256 MiB buffer) and sends the time of the n-th RTM_NEWROUTE of
// protocol bird: when the kernel held the whole table.
func (l *routingLab) countKernelRoutes(n int) <-chan time.Time {
	var c *rtnl.Conn
	if err := pktio.InNetns(l.rtr, func() (err error) { c, err = rtnl.Open(rtnl.RTNLGRP_IPV4_ROUTE); return }); err != nil {
		l.t.Fatal(err)
	}
	c.SetReceiveBuffer(256 << 20)
	c.SetReadTimeout(time.Second)
	done := make(chan time.Time, 1)
	go func() {
		defer c.Close()
		seen := 0
		deadline := time.Now().Add(10 * time.Minute)
		for time.Now().Before(deadline) {
			b, err := c.Receive()
			if err != nil && !errors.Is(err, rtnl.ErrTimeout) {
				break // an overrun: no figure
			}
			for len(b) > 0 {
				h, body, rest, err := rtnl.NextMessage(b)
				if err != nil {
					break
				}
				b = rest
				if h.Type == rtnl.RTM_NEWROUTE && len(body) > 5 && body[5] == 12 {
					if seen++; seen == n {
						done <- time.Now()
						return
					}
				}
			}
		}
		done <- time.Time{}
	}()
	return done
}
