package main

// The ctl commands an ip/bridge user types, against the daemon's real
// state in the standard lab network: `-s link`, `-br link|address`, route
// show selectors, route get from/iif/oif, route and neigh flush, help,
// the argument forms of `netfwd ctl` itself, and `monitor` receiving a
// route add and delete, a neighbour, a link going down and up and an FDB
// entry being learned.

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/lab"
)

// ctlArgs runs `netfwd ctl --ctl SOCK ARGS...` in-process with exactly
// these arguments (ctl() joins lines).
func (e *e2e) ctlArgs(args ...string) string {
	e.t.Helper()
	var out, errb bytes.Buffer
	if code := dispatch(append([]string{"ctl", "--ctl", e.CtlPath}, args...), strings.NewReader(""), &out, &errb); code != 0 {
		e.t.Fatalf("netfwd ctl %q: exit %d: %s", args, code, errb.String())
	}
	return out.String()
}

// checkLinkMissed checks that every interface's RX missed in `-j -s link`
// is its receive rings' drops as /metrics counts them
// (netfwd_pktio_ring_drops_total; 0 for interfaces that are not ports),
// read between two scrapes; it returns the sum.
func (e *e2e) checkLinkMissed() uint64 {
	e.t.Helper()
	const ringDrops = "netfwd_pktio_ring_drops_total"
	before := e.scrape()
	var links []struct {
		Ifname  string
		Stats64 struct {
			RX struct {
				Missed *uint64 `json:"missed_errors"`
			}
		}
	}
	if err := json.Unmarshal([]byte(e.ctlArgs("-j", "-s", "link")), &links); err != nil || len(links) == 0 {
		e.t.Fatalf("-j -s link: %v %+v", err, links)
	}
	after := e.scrape()
	var sum uint64
	for _, l := range links {
		lo, hi := before.Sum(ringDrops, "port", l.Ifname), after.Sum(ringDrops, "port", l.Ifname)
		m := l.Stats64.RX.Missed
		switch {
		case m == nil:
			e.t.Errorf("%s: -j -s link has no RX missed_errors", l.Ifname)
		case float64(*m) < lo || float64(*m) > hi:
			e.t.Errorf("%s: -j -s link RX missed_errors %d, %s between %.0f and %.0f", l.Ifname, *m, ringDrops, lo, hi)
		default:
			sum += *m
		}
	}
	return sum
}

func wantLines(t *testing.T, what, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !regexp.MustCompile(w).MatchString(out) {
			t.Errorf("%s: no line matching %q in\n%s", what, w, out)
		}
	}
}

func TestE2ECtlShow(t *testing.T) {
	e := newE2E(t, lab.Standard(), nil)
	if testIO() == "auto" {
		// AF_PACKET is --io auto's documented choice on veth: information,
		// not a warning on every start.
		log := e.stderr.String()
		if strings.Contains(log, `level=WARN msg="port opened`) || !strings.Contains(log, `level=INFO msg="port opened with AF_PACKET, the default on veth"`) {
			t.Errorf("port opening log:\n%s", log)
		}
	}
	e.pingOK("h1", h3IP, 63)

	// ip -s link: iproute2's columns, the port's counters.
	out := e.ctlArgs("-s", "link", "show", "dev", "eth1")
	wantLines(t, "-s link", out,
		`(?m)^    RX:  bytes packets errors dropped  missed   mcast           $`,
		`(?m)^    TX:  bytes packets errors dropped carrier collsns           $`)
	m := regexp.MustCompile(`RX:.*\n +(\d+) +(\d+) +(\d+) +(\d+) +(\d+) `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("-s link: no RX numbers:\n%s", out)
	}
	textPackets, _ := strconv.ParseUint(m[2], 10, 64)
	textMissed, _ := strconv.ParseUint(m[5], 10, 64)
	var links []struct {
		Ifname  string
		Stats64 struct {
			RX struct {
				Bytes, Packets uint64
				Missed         *uint64 `json:"missed_errors"`
			}
			TX struct{ Packets uint64 }
		}
	}
	if err := json.Unmarshal([]byte(e.ctlArgs("-j", "-s", "link", "show", "dev", "eth1")), &links); err != nil || len(links) != 1 || links[0].Stats64.RX.Missed == nil {
		t.Fatalf("-j -s link: %v %+v", err, links)
	}
	rx := links[0].Stats64.RX
	if textPackets == 0 || rx.Packets < textPackets || rx.Bytes < 60*rx.Packets || links[0].Stats64.TX.Packets == 0 {
		t.Errorf("eth1 counters: text rx packets %d, JSON %+v", textPackets, links[0].Stats64)
	}
	// RX missed is the port's ring drops.
	if textMissed > *rx.Missed {
		t.Errorf("eth1 RX missed: text %d, then JSON %d", textMissed, *rx.Missed)
	}
	e.checkLinkMissed()
	if !strings.Contains(e.ctl("ip -j -s link"), `"stats64":{"rx":{"bytes":`) {
		t.Errorf("-j -s link has no stats64 object")
	}

	// ip -br link / -br addr, in every argument form netfwd ctl takes.
	wantBrLink := `(?m)^eth0             UP             02:00:00:00:e0:01 <BROADCAST,MULTICAST,UP,LOWER_UP> $`
	for _, args := range [][]string{{"-br", "link", "show"}, {"-br link"}, {"ip", "-br", "l"}} {
		wantLines(t, strings.Join(args, " "), e.ctlArgs(args...), wantBrLink)
	}
	wantLines(t, "-br addr", e.ctlArgs("-br", "addr"),
		`(?m)^vlan10           UP             10\.0\.10\.1/24 $`, `(?m)^eth0             UP             203\.0\.113\.2/24 $`)
	var br []map[string]any
	if err := json.Unmarshal([]byte(e.ctlArgs("-j", "-br", "addr", "show", "dev", "vlan20")), &br); err != nil || len(br) != 1 {
		t.Fatalf("-j -br addr: %v %v", err, br)
	}
	if ai := br[0]["addr_info"].([]any); len(ai) != 1 || ai[0].(map[string]any)["local"] != "10.0.20.1" || br[0]["operstate"] != "UP" {
		t.Errorf("-j -br addr: %v", br)
	}

	// route show selectors: what the selector fixes is not repeated.
	out = e.ctl("route show dev eth0")
	wantLines(t, "route show dev eth0", out, `(?m)^default via 203\.0\.113\.1$`,
		`(?m)^203\.0\.113\.0/24 proto kernel scope link src 203\.0\.113\.2$`)
	if strings.Contains(out, "dev ") || strings.Contains(out, "10.0.10.0") {
		t.Errorf("route show dev eth0:\n%s", out)
	}
	out = e.ctl("route show proto kernel")
	wantLines(t, "route show proto kernel", out, `(?m)^10\.0\.10\.0/24 dev vlan10 scope link src 10\.0\.10\.1$`)
	if strings.Contains(out, "default") || strings.Contains(out, "proto") {
		t.Errorf("route show proto kernel:\n%s", out)
	}
	if out := e.ctl("route show 10.66.0.0/16"); out != "blackhole 10.66.0.0/16\n" {
		t.Errorf("route show 10.66.0.0/16: %q", out)
	}
	if out := e.ctl("route show root 10.64.0.0/10"); strings.Count(out, "\n") != 3 {
		t.Errorf("route show root 10.64.0.0/10:\n%s", out)
	}
	wantLines(t, "route show match", e.ctl("route show match 10.66.1.1"), `(?m)^default via`, `(?m)^blackhole 10\.66\.0\.0/16$`)
	var routes []map[string]any
	if err := json.Unmarshal([]byte(e.ctlArgs("-j", "route", "show", "dev", "eth0")), &routes); err != nil || len(routes) != 2 {
		t.Fatalf("-j route show dev eth0: %v %v", err, routes)
	}
	if _, ok := routes[0]["dev"]; ok {
		t.Errorf("-j route show dev eth0 names the device: %v", routes)
	}

	// route get from / iif / oif.
	if out := e.ctl("route get 198.51.100.1 from 10.0.10.11 iif vlan10"); out != "198.51.100.1 from 10.0.10.11 via 203.0.113.1 dev eth0 iif vlan10\n" {
		t.Errorf("route get from iif: %q", out)
	}
	if out := e.ctl("route get 10.0.10.11 oif eth0"); out != "10.0.10.11 via 203.0.113.1 dev eth0 src 203.0.113.2\n" {
		t.Errorf("route get oif: %q", out)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(e.ctl("ip -j route get 198.51.100.1 from 10.0.10.11 iif vlan10")), &got); err != nil ||
		got["from"] != "10.0.10.11" || got["iif"] != "vlan10" || got["dev"] != "eth0" {
		t.Errorf("route get -j from iif: %v %v", got, err)
	}

	// help at every level.
	wantLines(t, "help", e.ctl("help"), `OBJECT := \{ address \| route`)
	wantLines(t, "route help", e.ctl("route help"), `route flush: table vrf protocol scope type dev`, `route get: tos from iif mark oif vrf sport dport ipproto`)
	wantLines(t, "neigh ?", e.ctl("neigh ?"), `neigh flush: dev nud`)
}

func TestE2ECtlFlush(t *testing.T) {
	e := newE2E(t, lab.Standard(), nil)
	e.pingOK("h1", h3IP, 63)
	if out := e.ctl("neigh show dev vlan10"); !strings.Contains(out, "10.0.10.11 lladdr") {
		t.Fatalf("no neighbour to flush:\n%s", out)
	}
	e.ctl("neigh add 10.0.10.99 lladdr 02:00:00:00:10:99 dev vlan10")
	e.ctl("neigh flush dev vlan10")
	if out := e.ctl("neigh show dev vlan10"); out != "10.0.10.99 lladdr 02:00:00:00:10:99 PERMANENT\n" {
		t.Errorf("after neigh flush dev vlan10 (permanent entries stay):\n%s", out)
	}
	if out := e.ctl("neigh show dev vlan20"); !strings.Contains(out, "10.0.20.13") {
		t.Errorf("neigh flush dev vlan10 flushed vlan20:\n%s", out)
	}
	e.ctl("route add 10.80.0.0/16 via 203.0.113.1 proto static", "route add 10.81.0.0/16 via 203.0.113.1 proto static",
		"route add 10.82.0.0/16 via 203.0.113.1 table 100")
	e.ctl("route flush proto static")
	if out := e.ctl("route show"); strings.Contains(out, "10.80.") || strings.Contains(out, "10.81.") || !strings.Contains(out, "default") {
		t.Errorf("after route flush proto static:\n%s", out)
	}
	e.ctl("route flush table 100")
	if out := e.ctl("route show table 100"); out != "" {
		t.Errorf("after route flush table 100:\n%s", out)
	}
	if _, err := e.ctlErr("route flush"); err == nil || !strings.Contains(err.Error(), `"route flush" requires arguments`) {
		t.Errorf("route flush without a selector: %v", err)
	}
	e.pingOK("h1", lab.InternetIP, 63) // still routes
}

// TestE2ECtlNoDaemon: ctl without a daemon says so and how to start one.
func TestE2ECtlNoDaemon(t *testing.T) {
	var out, errb bytes.Buffer
	sock := t.TempDir() + "/none.sock"
	if code := dispatch([]string{"ctl", "--ctl", sock, "-br", "link"}, strings.NewReader(""), &out, &errb); code != 2 {
		t.Fatalf("exit %d", code)
	}
	want := "netfwd is not running (no control socket at " + sock + "; start it with netfwd run --config FILE, or pass --ctl SOCKET)\n"
	if errb.String() != want {
		t.Errorf("got %q, want %q", errb.String(), want)
	}
}

// monitorProc runs `netfwd ctl monitor ARGS...` as its own process (the
// test binary as netfwd) and collects its output.
func (e *e2e) monitorProc(args ...string) (*syncBuffer, func()) {
	exe, err := os.Executable()
	if err != nil {
		e.t.Fatal(err)
	}
	out := &syncBuffer{}
	cmd := exec.Command(exe, append([]string{"ctl", "--ctl", e.CtlPath}, args...)...)
	cmd.Env = append(os.Environ(), "NETFWD_TEST_MAIN=1")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	stop := func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}
	e.t.Cleanup(stop)
	return out, stop
}

func waitFor(t *testing.T, what string, out *syncBuffer, re string) {
	t.Helper()
	r := regexp.MustCompile(re)
	if ok, _ := eventually(10*time.Second, func() (bool, string) { return r.MatchString(out.String()), "" }); !ok {
		t.Fatalf("%s: no line matching %q in\n%s", what, re, out.String())
	}
}

func TestE2EMonitor(t *testing.T) {
	e := newE2E(t, lab.Standard(), nil)
	all, _ := e.monitorProc("monitor", "all")
	plain, _ := e.monitorProc("monitor") // every object, no banners
	js, _ := e.monitorProc("-j", "monitor", "route")
	// The monitors are connected once they see a change: add and delete
	// a route until both have seen it.
	n := 0
	ok, _ := eventually(10*time.Second, func() (bool, string) {
		if n++; n%4 == 1 {
			e.ctl("route replace 10.89.0.0/16 via 203.0.113.1")
		} else if n%4 == 3 {
			e.ctl("route del 10.89.0.0/16")
		}
		return strings.Contains(all.String(), "10.89.0.0/16") && strings.Contains(js.String(), "10.89.0.0/16"), ""
	})
	if !ok {
		t.Fatalf("no route event:\n%s\n%s", all.String(), js.String())
	}
	e.ctl("route add 10.90.0.0/16 via 203.0.113.1")
	waitFor(t, "route add", all, `(?m)^\[ROUTE\]10\.90\.0\.0/16 via 203\.0\.113\.1 dev eth0$`)
	e.ctl("route del 10.90.0.0/16")
	waitFor(t, "route del", all, `(?m)^\[ROUTE\]Deleted 10\.90\.0\.0/16 via 203\.0\.113\.1 dev eth0$`)
	waitFor(t, "route del -j", js, `(?m)^\{"deleted":true,"dst":"10\.90\.0\.0/16","gateway":"203\.0\.113\.1","dev":"eth0"`)
	waitFor(t, "route add -j", js, `(?m)^\{"dst":"10\.90\.0\.0/16","gateway":"203\.0\.113\.1","dev":"eth0"`)

	// A neighbour resolved and an FDB entry learned by the datapath.
	e.pingOK("h1", h3IP, 63)
	waitFor(t, "neighbour", all, `(?m)^\[NEIGH\]10\.0\.10\.11 dev vlan10 lladdr 02:00:00:00:10:11 (REACHABLE|STALE|DELAY)$`)
	waitFor(t, "fdb", all, `(?m)^\[FDB\]02:00:00:00:10:11 dev eth1 vlan 10 master br0$`)

	// The uplink's carrier goes away and comes back.
	isp := e.host("isp")
	if err := e.net.IP(isp.NS, "link", "set", isp.Iface, "down"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "link down", all, `(?m)^\[LINK\]\d+: eth0: <[A-Z,]*NO-CARRIER> mtu \d+ state DOWN`)
	if err := e.net.IP(isp.NS, "link", "set", isp.Iface, "up"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "link up", all, `(?m)^\[LINK\]\d+: eth0: <[A-Z,]*LOWER_UP> mtu \d+ state UP`)
	waitFor(t, "monitor without all", plain, `(?m)^Deleted 10\.90\.0\.0/16 via 203\.0\.113\.1 dev eth0$`)
	waitFor(t, "monitor without all", plain, `(?m)^\d+: eth0: <[A-Z,]*LOWER_UP> mtu \d+ state UP`)
	if strings.Contains(plain.String(), "[") {
		t.Errorf("monitor without all printed banners:\n%s", plain.String())
	}
	if strings.Contains(js.String(), "NEIGH") || strings.Contains(js.String(), `"ifname"`) {
		t.Errorf("monitor route printed other objects:\n%s", js.String())
	}
	t.Logf("monitor:\n%s", all.String())
}
