package daemon

// End-to-end tests of the daemon with real Linux hosts: namespaces H1, R,
// H2; veth h1 <-> r1 and r2 <-> h2; the daemon forwards in R between r1 and
// r2 (the kernel of R has no addresses and forwarding off, so every frame
// that arrives is the daemon's doing).

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/ctlsock"
	"github.com/netfwd/netfwd/internal/testenv"
	"github.com/netfwd/netfwd/internal/vethlab"
)

type topo struct {
	lab        *vethlab.Lab
	h1, r, h2  string // namespaces
	h1if, r1   string // interfaces
	r2, h2if   string
	dir        string
	configFile string
}

func newTopo(t *testing.T) *topo {
	t.Helper()
	testenv.RequireRoot(t, "ping")
	lab, err := vethlab.NewLab()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lab.Close() })
	tp := &topo{lab: lab, dir: t.TempDir()}
	for _, ns := range []struct {
		p *string
		s string
	}{{&tp.h1, "H1"}, {&tp.r, "R"}, {&tp.h2, "H2"}} {
		if *ns.p, err = lab.AddNetns(ns.s); err != nil {
			t.Fatal(err)
		}
	}
	if tp.h1if, tp.r1, err = lab.AddVeth(tp.h1, "h1", tp.r, "r1"); err != nil {
		t.Fatal(err)
	}
	if tp.r2, tp.h2if, err = lab.AddVeth(tp.r, "r2", tp.h2, "h2"); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{
		{tp.h1, "addr", "add", "10.1.0.2/24", "dev", tp.h1if},
		{tp.h1, "route", "add", "default", "via", "10.1.0.1"},
		{tp.h2, "addr", "add", "10.2.0.2/24", "dev", tp.h2if},
		{tp.h2, "route", "add", "default", "via", "10.2.0.1"},
	} {
		if err := lab.IP(c[0], c[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	tp.configFile = filepath.Join(tp.dir, "router.conf")
	return tp
}

func (tp *topo) writeConfig(t *testing.T, lines ...string) {
	t.Helper()
	if err := os.WriteFile(tp.configFile, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (tp *topo) baseConfig() []string {
	return []string{
		"address add 10.1.0.1/24 dev " + tp.r1,
		"address add 10.2.0.1/24 dev " + tp.r2,
	}
}

// start runs a daemon on the topology until the test ends.
func (tp *topo) start(t *testing.T) *Daemon {
	t.Helper()
	d, err := New(Options{ConfigFile: tp.configFile, Netns: tp.r, Metrics: "127.0.0.1:0",
		Ctl: filepath.Join(tp.dir, "ctl.sock"), Workers: 2,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Run did not return after cancel")
		}
		if _, err := os.Stat(filepath.Join(tp.dir, "ctl.sock")); err == nil {
			t.Errorf("control socket left behind")
		}
	})
	return d
}

func (tp *topo) ping(ns, addr string, count int) error {
	_, err := tp.lab.Exec(ns, "ping", "-c", strconv.Itoa(count), "-i", "0.2", "-W", "2", addr)
	return err
}

func TestForwardsBetweenNamespaces(t *testing.T) {
	tp := newTopo(t)
	tp.writeConfig(t, tp.baseConfig()...)
	d := tp.start(t)
	if err := tp.ping(tp.h1, "10.2.0.2", 3); err != nil {
		var b strings.Builder
		resp := ctlsock.Handler{Ctl: d.Controller()}.Do(ctlsock.Request{
			Lines: []string{"stats", "neigh show nud all", "link show", "route show table all"}})
		b.WriteString(resp.Output)
		for _, p := range d.metricsSource().Ports() {
			b.WriteString(fmt.Sprintf("%s %+v\n", p.Name, p.Stats))
		}
		out, _ := tp.lab.Exec(tp.h1, "ip", "neigh")
		t.Fatalf("h1 -> h2 through the daemon: %v\n%s\nh1 neigh: %s", err, b.String(), out)
	}
	if err := tp.ping(tp.h2, "10.1.0.1", 2); err != nil {
		t.Fatalf("h2 -> router address: %v", err)
	}
	// 3 echo requests and 3 replies went through; the first of each may
	// have waited for ARP (queued, then released).
	if s := d.Engine().Stats(); s.Forwarded+s.Released < 6 || s.FIBLookups < s.Forwarded {
		t.Fatalf("engine counters: forwarded %d released %d queued %d lookups %d", s.Forwarded, s.Released, s.Queued, s.FIBLookups)
	}
	// The router answered ARP with its own MAC, not the kernel's.
	out, err := tp.lab.Exec(tp.h1, "ip", "neigh", "show", "10.1.0.1")
	if err != nil || !strings.Contains(out2s(out), "lladdr 02:") {
		t.Fatalf("h1's neighbour entry for the router: %q %v", out, err)
	}
}

func out2s(b []byte) string { return string(b) }

func TestConfigErrorsStartNothing(t *testing.T) {
	tp := newTopo(t)
	tp.writeConfig(t, "address add 10.1.0.1/24 dev "+tp.r1, "route add 10.9.0.0/16 via 192.0.2.1", "bogus line")
	_, err := New(Options{ConfigFile: tp.configFile, Netns: tp.r, NoLinkMonitor: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil || !strings.Contains(err.Error(), "router.conf:3:") {
		t.Fatalf("want router.conf:3 error, got %v", err)
	}
	tp.writeConfig(t, "address add 10.1.0.1/24 dev "+tp.r1, "address add 10.3.0.1/24 dev nosuch0")
	_, err = New(Options{ConfigFile: tp.configFile, Netns: tp.r, NoLinkMonitor: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil || !strings.Contains(err.Error(), `router.conf:2: Cannot find device "nosuch0"`) {
		t.Fatalf("want router.conf:2: Cannot find device \"nosuch0\", got %v", err)
	}
	// Nothing was left open: r1 can be opened again exclusively-enough to
	// count frames (a leaked promiscuous socket would keep the flag).
	out, err := tp.lab.Exec(tp.r, "ip", "link", "show", tp.r1)
	if err != nil || strings.Contains(string(out), "PROMISC") {
		t.Fatalf("r1 still promiscuous after a failed start: %s %v", out, err)
	}
}

func TestReloadAndCtl(t *testing.T) {
	tp := newTopo(t)
	// h2 gets a second address that only a route to it reaches.
	if err := tp.lab.IP(tp.h2, "addr", "add", "10.9.0.2/32", "dev", "lo"); err != nil {
		t.Fatal(err)
	}
	tp.writeConfig(t, tp.baseConfig()...)
	d := tp.start(t)
	sock := filepath.Join(tp.dir, "ctl.sock")
	if err := tp.ping(tp.h1, "10.9.0.2", 1); err == nil {
		t.Fatal("10.9.0.2 reachable before its route exists")
	}
	// Reload with the route.
	tp.writeConfig(t, append(tp.baseConfig(), "route add 10.9.0.0/16 via 10.2.0.2")...)
	if err := d.Reload(); err != nil {
		t.Fatal(err)
	}
	if err := tp.ping(tp.h1, "10.9.0.2", 2); err != nil {
		t.Fatalf("after reload adding the route: %v", err)
	}
	// A bad file is refused, the running config keeps forwarding.
	tp.writeConfig(t, append(tp.baseConfig(), "route add 10.9.0.0/16 via 10.2.0.2", "route add 10.8.0.0/16 via 172.31.0.1")...)
	err := d.Reload()
	if err == nil || !strings.Contains(err.Error(), "router.conf:4:") {
		t.Fatalf("bad reload: want router.conf:4 error, got %v", err)
	}
	if err := tp.ping(tp.h1, "10.9.0.2", 2); err != nil {
		t.Fatalf("after a refused reload: %v", err)
	}
	// ctl: queries and an all-or-nothing change.
	out, err := ctlsock.Do(sock, []string{"route show"}, false)
	if err != nil || !strings.Contains(out, "10.9.0.0/16 via 10.2.0.2 dev "+tp.r2) {
		t.Fatalf("ctl route show: %q %v", out, err)
	}
	out, err = ctlsock.Do(sock, []string{"route get 10.9.1.1"}, true)
	if err != nil || !strings.Contains(out, `"gateway":"10.2.0.2"`) {
		t.Fatalf("ctl route get: %q %v", out, err)
	}
	_, err = ctlsock.Do(sock, []string{"route del 10.9.0.0/16", "route add 10.7.0.0/16 via 10.99.0.1"}, false)
	if err == nil || !strings.Contains(err.Error(), "ctl:2:") {
		t.Fatalf("ctl bad batch: want ctl:2 error, got %v", err)
	}
	if err := tp.ping(tp.h1, "10.9.0.2", 1); err != nil {
		t.Fatalf("a refused ctl batch changed something: %v", err)
	}
	if _, err := ctlsock.Do(sock, []string{"route del 10.9.0.0/16"}, false); err != nil {
		t.Fatal(err)
	}
	if err := tp.ping(tp.h1, "10.9.0.2", 1); err == nil {
		t.Fatal("still reachable after ctl route del")
	}
	for _, q := range []string{"link show", "address show", "neigh show", "nexthop show", "fdb show", "vlan show", "stats"} {
		if _, err := ctlsock.Do(sock, []string{q}, true); err != nil {
			t.Errorf("ctl -j %s: %v", q, err)
		}
	}
	out, _ = ctlsock.Do(sock, []string{"neigh show"}, false)
	if !strings.Contains(out, "10.1.0.2 dev "+tp.r1) {
		t.Errorf("neigh show lacks h1: %q", out)
	}
	// Reload back to the file without the route: it is removed.
	tp.writeConfig(t, tp.baseConfig()...)
	if _, err := ctlsock.Do(sock, []string{"route add 10.9.0.0/16 via 10.2.0.2"}, false); err != nil {
		t.Fatal(err)
	}
	if err := d.Reload(); err != nil {
		t.Fatal(err)
	}
}

var metricLine = regexp.MustCompile(`(?m)^(netfwd_[a-z0-9_]+)(\{[^}]*\})? (\S+)$`)

func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := map[string]float64{}
	for _, g := range metricLine.FindAllStringSubmatch(string(b), -1) {
		v, _ := strconv.ParseFloat(g[3], 64)
		m[g[1]+g[2]] = v
	}
	return m
}

func TestMetricsMoveWithTraffic(t *testing.T) {
	tp := newTopo(t)
	tp.writeConfig(t, tp.baseConfig()...)
	d := tp.start(t)
	before := scrape(t, d.MetricsAddr())
	if err := tp.ping(tp.h1, "10.2.0.2", 3); err != nil {
		t.Fatal(err)
	}
	tp.ping(tp.h1, "10.77.0.1", 1) // no route: ICMP net unreachable
	time.Sleep(150 * time.Millisecond)
	after := scrape(t, d.MetricsAddr())
	rx := fmt.Sprintf(`netfwd_port_rx_packets_total{port="%s"}`, tp.r1)
	for _, k := range []string{rx, "netfwd_forwarded_total", "netfwd_fib_lookups_total",
		fmt.Sprintf(`netfwd_pktio_rx_packets_total{port="%s"}`, tp.r1),
		`netfwd_icmp_sent_total{type="net_unreachable"}`, `netfwd_l3_drops_total{reason="no_route"}`} {
		if after[k] <= before[k] {
			t.Errorf("%s did not move: %v -> %v ", k, before[k], after[k])
		}
	}
	if after[`netfwd_fib_routes{table="local",type="local"}`] != 2 {
		t.Errorf("local routes: %v", after[`netfwd_fib_routes{table="local",type="local"}`])
	}
	if after[`netfwd_neigh_entries{state="REACHABLE"}`]+after[`netfwd_neigh_entries{state="STALE"}`]+after[`netfwd_neigh_entries{state="DELAY"}`] < 2 {
		t.Errorf("neighbour entries: %v", after)
	}
	// Profiles are not for every local user: not on the metrics listener.
	resp, err := http.Get("http://" + d.MetricsAddr() + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("pprof on the metrics listener: %v, want 404", resp.Status)
	}
}

// Carrier loss on the primary path fails over to a backup route.
func TestCarrierFailover(t *testing.T) {
	tp := newTopo(t)
	// A third leg r3 <-> h3 in H2's namespace as the backup path to 10.9/16.
	r3, h3, err := tp.lab.AddVeth(tp.r, "r3", tp.h2, "h3")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{
		{tp.h2, "addr", "add", "10.3.0.2/24", "dev", h3},
		{tp.h2, "addr", "add", "10.9.0.2/32", "dev", "lo"},
		{tp.h2, "route", "add", "default", "via", "10.3.0.1", "metric", "100"}, // the way back
	} {
		if err := tp.lab.IP(c[0], c[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	tp.writeConfig(t, append(tp.baseConfig(), "address add 10.3.0.1/24 dev "+r3,
		"route add 10.9.0.0/16 via 10.2.0.2 metric 10", "route add 10.9.0.0/16 via 10.3.0.2 metric 20")...)
	d := tp.start(t)
	if err := tp.ping(tp.h1, "10.9.0.2", 2); err != nil {
		t.Fatal(err)
	}
	// Take h2 (r2's peer) down: r2 loses carrier.
	if err := tp.lab.IP(tp.h2, "link", "set", tp.h2if, "down"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !d.Controller().CarrierDown(tp.r2) {
		if time.Now().After(deadline) {
			t.Fatal("carrier loss of r2 not seen")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := tp.ping(tp.h1, "10.9.0.2", 2); err != nil {
		t.Fatalf("no failover to the backup route: %v", err)
	}
	if err := tp.lab.IP(tp.h2, "link", "set", tp.h2if, "up"); err != nil {
		t.Fatal(err)
	}
	for d.Controller().CarrierDown(tp.r2) {
		if time.Now().After(deadline.Add(5 * time.Second)) {
			t.Fatal("carrier of r2 not back")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
