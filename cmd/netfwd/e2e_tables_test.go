package main

// Learned routes in their own tables (issue 29), end to end with the real
// daemons: FRR's staticd puts routes into table 100 (`ip route ... table
// 100`, the default VRF: this kernel has no VRF driver, and none is
// needed), zebra streams them over FPM with RTA_TABLE; BIRD exports BGP
// routes into kernel table 100 (`kernel table 100`) and netfwd mirrors
// the kernel. Each time netfwd's table 100 must equal the kernel's, a
// rule of netfwd's config (`rule add from 10.1.0.0/24 lookup 100`) must
// send a flow through them, a resync must sweep what went away, and a
// hot restart must keep them: a lookup through the rule every 20 ms never
// misses, and the successor had them before it took over (its log).

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/ctlsock"
	"github.com/netfwd/netfwd/internal/routinglab"
)

// tablesRule is the config's rule: the host's subnet looks up table 100.
const tablesRule = "rule add from 10.1.0.0/24 lookup 100\n"

// tablesNetfwd is `netfwd run` logging into a file (a hot restart's
// successor writes on there; a pipe would keep Wait waiting for it).
type tablesNetfwd struct {
	t       *testing.T
	ctl     string
	logPath string
	pid     int
	exited  chan struct{}
}

func startTablesNetfwd(l *routingLab, args ...string) *tablesNetfwd {
	t := l.t
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &tablesNetfwd{t: t, ctl: l.Dir + "/netfwd.sock", logPath: filepath.Join(l.Dir, "netfwd.log"), exited: make(chan struct{})}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command("ip", append([]string{"netns", "exec", l.Rtr, exe, "run", "--config", l.Dir + "/router.conf",
		"--ctl", p.ctl, "--metrics", "off"}, args...)...)
	cmd.Env = append(os.Environ(), "NETFWD_TEST_MAIN=1")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.pid = cmd.Process.Pid // ip netns exec execs netfwd: the same pid
	go func() {
		cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		l.StopDaemons() // zebra before netfwd (zebra 8.4.4 can hang without its FPM peer)
		p.stop()
	})
	ok, why := eventually(20*time.Second, func() (bool, string) {
		_, err := ctlsock.Do(p.ctl, []string{"link show"}, false)
		return err == nil, fmt.Sprint(err)
	})
	if !ok {
		t.Fatalf("netfwd run: control socket not answering: %s\n%s", why, p.log())
	}
	return p
}

func (p *tablesNetfwd) log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// stop ends whichever process runs now (the first one or a successor).
func (p *tablesNetfwd) stop() {
	syscall.Kill(p.pid, syscall.SIGTERM)
	for deadline := time.Now().Add(10 * time.Second); processAlive(p.pid); {
		if time.Now().After(deadline) {
			syscall.Kill(p.pid, syscall.SIGKILL)
			p.t.Errorf("netfwd (pid %d) did not stop within 10 s of SIGTERM", p.pid)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	log := p.log()
	if strings.Contains(log, "DATA RACE") || strings.Contains(log, "panic:") {
		p.t.Errorf("netfwd reported a race or panic")
	}
	if p.t.Failed() {
		p.t.Logf("netfwd log:\n%s", lastBytes(log, 8000))
	}
}

// hotRestart runs `netfwd restart` and follows the new process.
func (p *tablesNetfwd) hotRestart() {
	t := p.t
	exe, _ := os.Executable()
	cmd := exec.Command(exe, "restart", "--ctl", p.ctl)
	cmd.Env = append(os.Environ(), "NETFWD_TEST_MAIN=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("netfwd restart: %v\n%s\nlog:\n%s", err, out, lastBytes(p.log(), 6000))
	}
	var newPid, oldPid int
	if _, err := fmt.Sscanf(strings.TrimSpace(string(out)), "netfwd restarted: pid %d took over from pid %d", &newPid, &oldPid); err != nil {
		t.Fatalf("netfwd restart said %q", out)
	}
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the old daemon still runs 10 s after the restart returned")
	}
	p.pid = newPid
}

// table100 returns the routes of proto in table 100, netfwd's or the
// kernel's, in canonical form.
func (l *routingLab) table100(p *tablesNetfwd, kernel bool, proto string) []string {
	if kernel {
		// table all: `show table 100` fails while the table is empty
		var all []map[string]any
		out := l.run(l.Rtr, "ip", "-4", "-j", "route", "show", "table", "all")
		if err := json.Unmarshal([]byte(out), &all); err != nil {
			l.t.Fatalf("ip -j route show table all: %v", err)
		}
		all = slices.DeleteFunc(all, func(r map[string]any) bool { return r["table"] != "100" })
		b, _ := json.Marshal(all)
		return canonical(l.t, string(b), proto)
	}
	out, err := ctlsock.Do(p.ctl, []string{"route show table 100"}, true)
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	return canonical(l.t, out, proto)
}

// sameTable100 waits until netfwd's table 100 equals the kernel's and holds
// want routes of proto.
func (l *routingLab) sameTable100(p *tablesNetfwd, kproto, proto string, want int) {
	t := l.t
	t.Helper()
	var k, n []string
	ok, why := eventually(60*time.Second, func() (bool, string) {
		k, n = l.table100(p, true, kproto), l.table100(p, false, proto)
		// iproute2 names FRR's protocols (rt_protos.d: 196 is "static"),
		// netfwd only the kernel's: compare without the protocol.
		strip := func(s []string) []string {
			out := make([]string, len(s))
			for i, r := range s {
				out[i] = strings.Replace(r, " proto "+kproto+" ", " ", 1)
				out[i] = strings.Replace(out[i], " proto "+proto+" ", " ", 1)
			}
			return out
		}
		if len(k) != want {
			return false, fmt.Sprintf("kernel table 100 has %d routes of proto %s, want %d", len(k), kproto, want)
		}
		return slices.Equal(strip(k), strip(n)), fmt.Sprintf("netfwd has %d, kernel %d", len(n), len(k))
	})
	if !ok {
		t.Fatalf("table 100 differs: %s\nkernel: %q\nnetfwd: %q", why, first(k, 5), first(n, 5))
	}
}

// ruleWatch asks netfwd for dst from the rule's source every 20 ms until
// stopped and counts the answers not from table 100 through gw.
func ruleWatch(p *tablesNetfwd, dst, gw string) (stop func() (lookups, misses int64, last string)) {
	var lookups, misses atomic.Int64
	var lastMiss atomic.Value
	lastMiss.Store("")
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
			out, err := ctlsock.Do(p.ctl, []string{"route get " + dst + " from 10.1.0.2 iif eth1"}, true)
			if err != nil {
				continue // between the old daemon and the new one
			}
			lookups.Add(1)
			var r struct{ Table, Gateway, Dev string }
			if json.Unmarshal([]byte(out), &r) != nil || r.Table != "100" || gw != "" && r.Gateway != gw {
				misses.Add(1)
				lastMiss.Store(out)
			}
		}
	}()
	return func() (int64, int64, string) {
		close(done)
		wg.Wait()
		return lookups.Load(), misses.Load(), lastMiss.Load().(string)
	}
}

// learnedBeforeTakeover checks the successor's log: the line that says
// its routes were read (what) comes between its start ("hot restart:
// taking over") and the takeover ("hot restart: took over").
func (p *tablesNetfwd) learnedBeforeTakeover(what string) {
	t := p.t
	log := p.log()
	start := strings.LastIndex(log, "hot restart: taking over")
	took := strings.LastIndex(log, "hot restart: took over")
	i := strings.Index(log[max(start, 0):], what)
	if start < 0 || took < 0 || i < 0 || start+i > took {
		t.Errorf("the successor did not have its learned routes (%q) before it took over:\n%s", what, lastBytes(log[max(start, 0):], 4000))
	}
}

func (p *tablesNetfwd) checkRule(t *testing.T, dst, gw string) {
	t.Helper()
	out, err := ctlsock.Do(p.ctl, []string{"route get " + dst + " from 10.1.0.2 iif eth1"}, true)
	if err != nil || !strings.Contains(out, `"table":"100"`) || !strings.Contains(out, gw) {
		t.Fatalf("route get %s from the rule's source: %s %v (want table 100 %s)", dst, out, err, gw)
	}
	// Without the rule's source: main, which does not have it.
	out, _ = ctlsock.Do(p.ctl, []string{"route get " + dst}, true)
	if strings.Contains(out, `"table":"100"`) {
		t.Fatalf("route get %s without the rule: %s (table 100 must be reached only through the rule)", dst, out)
	}
}

// tablesConfig is router.conf with the rule (skips until the config knows
// `rule`).
func (l *routingLab) tablesConfig() {
	t := l.t
	if _, _, err := config.ParseLine(config.Pos{}, strings.TrimSpace(tablesRule)); err != nil {
		t.Skipf("the config does not take %q yet: %v", strings.TrimSpace(tablesRule), err)
	}
	l.write("router.conf", "address add 10.1.0.1/24 dev eth1\n"+tablesRule)
}

// staticd's routes: three in table 100 and one in main.
const tablesStaticd = `hostname rtr-staticd
log file @DIR@/staticd.log
ip route 10.77.0.0/16 blackhole table 100
ip route 10.78.0.0/16 blackhole table 100
ip route 10.79.0.0/16 up0 table 100
ip route 10.80.0.0/16 blackhole
`

// TestRoutesTablesFRR: staticd's table-100 routes over FPM. zebra 8.4.4
// sends a route of table 100 when it changes, but its replay after a
// (re)connect walks only the VRF's own table: staticd starts once zebra's
// FPM session is up, and the hot restart's successor keeps table 100 from
// the kernel's copy (the seed) through zebra's replay without it.
func TestRoutesTablesFRR(t *testing.T) {
	waitingTest(t)
	if _, err := os.Stat(routinglab.Staticd); err != nil {
		t.Skip("no staticd")
	}
	l := newRoutingLabN(t, 10)
	l.tablesConfig()
	nf := startTablesNetfwd(l, "--fpm", routinglab.FPMAddr)
	l.must(l.WriteFRR(routinglab.ZebraConf, routinglab.BgpdConf))
	l.startZebra()
	ok, _ := eventually(20*time.Second, func() (bool, string) { return strings.Contains(nf.log(), "fpm: zebra connected"), "" })
	if !ok {
		t.Fatal("zebra did not connect")
	}
	l.must(l.StartStaticd(tablesStaticd))
	l.sameTable100(nf, "static", "196", 3)
	nf.checkRule(t, "10.79.0.1", `"dev":"up0"`)

	// A hot restart of netfwd keeps table 100 throughout, and after the
	// new session's sweep.
	stopWatch := ruleWatch(nf, "10.77.0.1", "")
	sweeps := strings.Count(nf.log(), "fpm: swept")
	nf.hotRestart()
	ok, why := eventually(60*time.Second, func() (bool, string) {
		n := strings.Count(nf.log(), "fpm: swept")
		return n > sweeps, fmt.Sprintf("%d sweeps", n)
	})
	if !ok {
		t.Fatalf("no sweep by the new process's session: %s", why)
	}
	l.sameTable100(nf, "static", "196", 3)
	lookups, misses, last := stopWatch()
	t.Logf("hot restart: %d lookups through the rule, %d missed", lookups, misses)
	if misses != 0 || lookups < 10 {
		t.Fatalf("during the hot restart 10.77.0.1 through the rule missed %d of %d lookups (last %s)", misses, lookups, last)
	}
	nf.learnedBeforeTakeover("fpm: seeded")
	nf.checkRule(t, "10.79.0.1", `"dev":"up0"`)

	// staticd's end withdraws its routes, table 100's too.
	l.must(l.Stop("staticd"))
	l.sameTable100(nf, "static", "196", 0)
}

// BIRD's router: BGP into its table t100, exported to kernel table 100.
const tablesBirdRtr = `log "@DIR@/bird-rtr.log" all;
router id 10.99.0.1;
ipv4 table t100;
protocol device { }
protocol kernel k100 {
  kernel table 100;
  ipv4 { table t100; import none; export all; };
  learn off;
  scan time 600;
}
protocol bgp dn {
  local 10.99.0.1 as 65001;
  neighbor 10.99.0.2 as 65002;
  hold time 240;
  connect retry time 1;
  ipv4 { table t100; import all; export none; };
}
`

// TestRoutesTablesBIRDMirror: BIRD's BGP routes in kernel table 100,
// mirrored into netfwd's table 100.
func TestRoutesTablesBIRDMirror(t *testing.T) {
	waitingTest(t)
	l := newRoutingLabN(t, 300)
	l.tablesConfig()
	l.startBird(l.Feed, "bird-feed", routinglab.BirdFeedConf)
	l.startBird(l.Rtr, "bird-rtr", tablesBirdRtr)
	nf := startTablesNetfwd(l, "--mirror-kernel")
	all := len(l.Prefixes)
	l.sameTable100(nf, "bird", "bird", all)
	if n := len(canonical(t, l.run(l.Rtr, "ip", "-4", "-j", "route", "show"), "bird")); n != 0 {
		t.Fatalf("kernel main has %d BIRD routes: the test wants them in table 100 only", n)
	}
	probe := l.Prefixes[all/2].Addr().Next().String()
	nf.checkRule(t, probe, `"gateway":"10.99.0.2"`)

	// A withdrawal reaches table 100.
	l.birdc(l.Feed, "bird-feed", "disable", "feedB")
	l.sameTable100(nf, "bird", "bird", all-routinglab.FeedBSize)
	l.birdc(l.Feed, "bird-feed", "enable", "feedB")
	l.sameTable100(nf, "bird", "bird", all)

	// A hot restart keeps table 100 throughout.
	stopWatch := ruleWatch(nf, probe, "10.99.0.2")
	nf.hotRestart()
	time.Sleep(time.Second)
	l.sameTable100(nf, "bird", "bird", all)
	lookups, misses, last := stopWatch()
	t.Logf("hot restart: %d lookups through the rule, %d missed", lookups, misses)
	if misses != 0 || lookups < 10 {
		t.Fatalf("during the hot restart %s through the rule missed %d of %d lookups (last %s)", probe, misses, lookups, last)
	}
	nf.learnedBeforeTakeover("kmirror: following the kernel")

	// netfwd's restart while BIRD withdraws: the new process's table 100
	// follows (the first cycle reads the kernel's tables).
	l.birdc(l.Feed, "bird-feed", "disable", "feedB")
	l.sameTable100(nf, "bird", "bird", all-routinglab.FeedBSize)
	nf.checkRule(t, probe, `"gateway":"10.99.0.2"`)
}
