package main

// The Grafana dashboard (docs/grafana/netfwd-dashboard.json) against the
// daemon it watches. TestDashboardJSON (no root) checks the file imports
// as is: the datasource is the ${DS_PROMETHEUS} input everywhere, panel ids
// are unique, panels do not overlap, and every netfwd_ metric a query names
// is one the collector exports. TestDashboardPrometheus (root, prometheus
// and promtool) runs a real Prometheus in the router namespace scraping a
// running netfwd (host path, kernel mirror and FPM on) under traffic and
// route churn, and evaluates every panel's query, with the template
// variables replaced by the values their own queries return: each must
// return a series with a number. `promtool check metrics` on /metrics, read
// under that traffic, must report nothing.

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/fpm"
	"github.com/netfwd/netfwd/internal/lab"
	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/rtnl"
	"github.com/netfwd/netfwd/internal/testenv"
)

const dashboardFile = "../../docs/grafana/netfwd-dashboard.json"

type grafanaDS struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type grafanaPanel struct {
	ID         int        `json:"id"`
	Type       string     `json:"type"`
	Title      string     `json:"title"`
	Datasource *grafanaDS `json:"datasource"`
	GridPos    *struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID      string     `json:"refId"`
		Expr       string     `json:"expr"`
		Datasource *grafanaDS `json:"datasource"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"` // a collapsed row's
}

type grafanaDashboard struct {
	Inputs []struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		PluginID string `json:"pluginId"`
	} `json:"__inputs"`
	Title      string         `json:"title"`
	UID        string         `json:"uid"`
	Panels     []grafanaPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string     `json:"name"`
			Datasource *grafanaDS `json:"datasource"`
			Query      struct {
				Query string `json:"query"`
			} `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// panelQuery is one target of one panel.
type panelQuery struct{ panel, ref, expr string }

func loadDashboard(t *testing.T) (grafanaDashboard, []grafanaPanel, []panelQuery) {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var all []grafanaPanel
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			all = append(all, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	var qs []panelQuery
	for _, p := range all {
		for _, tg := range p.Targets {
			qs = append(qs, panelQuery{p.Title, tg.RefID, tg.Expr})
		}
	}
	return d, all, qs
}

const dsInput = "${DS_PROMETHEUS}"

func TestDashboardJSON(t *testing.T) {
	d, panels, queries := loadDashboard(t)
	if len(d.Inputs) != 1 || d.Inputs[0].Name != "DS_PROMETHEUS" || d.Inputs[0].Type != "datasource" || d.Inputs[0].PluginID != "prometheus" {
		t.Errorf("__inputs = %+v, want the one Prometheus datasource DS_PROMETHEUS", d.Inputs)
	}
	if d.Title == "" || d.UID == "" {
		t.Errorf("title %q uid %q: both needed to import", d.Title, d.UID)
	}
	isInput := func(ds *grafanaDS) bool { return ds != nil && ds.Type == "prometheus" && ds.UID == dsInput }
	for _, v := range d.Templating.List {
		if !isInput(v.Datasource) || v.Query.Query == "" {
			t.Errorf("variable %s: datasource %+v query %q", v.Name, v.Datasource, v.Query.Query)
		}
	}
	ids := map[int]string{}
	type cell struct{ x, y int }
	used := map[cell]string{}
	for _, p := range panels {
		if prev, ok := ids[p.ID]; ok || p.ID == 0 {
			t.Errorf("panel %q: id %d (also %q)", p.Title, p.ID, prev)
		}
		ids[p.ID] = p.Title
		if g := p.GridPos; g == nil || g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v", p.Title, p.GridPos)
		} else {
			for x := g.X; x < g.X+g.W; x++ {
				for y := g.Y; y < g.Y+g.H; y++ {
					if o, ok := used[cell{x, y}]; ok {
						t.Fatalf("panel %q overlaps %q at (%d,%d)", p.Title, o, x, y)
					}
					used[cell{x, y}] = p.Title
				}
			}
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 || !isInput(p.Datasource) {
			t.Errorf("panel %q: %d queries, datasource %+v", p.Title, len(p.Targets), p.Datasource)
		}
		for _, tg := range p.Targets {
			if tg.Expr == "" || !isInput(tg.Datasource) {
				t.Errorf("panel %q %s: expr %q datasource %+v", p.Title, tg.RefID, tg.Expr, tg.Datasource)
			}
		}
	}
	// Every netfwd_ metric a query names is the collector's; the ones an
	// operator watches (issue 21) all have a panel.
	collector, err := os.ReadFile("../../internal/metrics/collector.go")
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, q := range queries {
		for _, m := range regexp.MustCompile(`\b(netfwd|process|go)_[a-z0-9_]+`).FindAllString(q.expr, -1) {
			named[m] = true
			base := strings.TrimSuffix(strings.TrimPrefix(m, "netfwd_"), "_bucket")
			if strings.HasPrefix(m, "netfwd_") && !strings.Contains(string(collector), `desc("`+base+`"`) {
				t.Errorf("panel %q: %s is not exported by internal/metrics", q.panel, m)
			}
		}
	}
	for _, m := range []string{"netfwd_port_rx_packets_total", "netfwd_port_tx_packets_total", "netfwd_l3_drops_total", "netfwd_l2_drops_total",
		"netfwd_fib_routes", "netfwd_neigh_entries", "netfwd_route_source_lag_seconds_bucket", "netfwd_hostpath_punted_total",
		"netfwd_pktio_ring_drops_total", "process_resident_memory_bytes"} {
		if !named[m] {
			t.Errorf("no panel shows %s", m)
		}
	}
}

// promAddr is where the test's Prometheus listens, in the router namespace
// (the test's own: no other listener there but netfwd's).
const promAddr = "127.0.0.1:19090"

// promQuery evaluates expr now; it returns the result's series as
// "labels=value" strings, whether one has a number (not NaN) and the
// largest magnitude among them.
func promQuery(c *http.Client, expr string) ([]string, bool, float64, error) {
	resp, err := c.Get("http://" + promAddr + "/api/v1/query?" + url.Values{"query": {expr}}.Encode())
	if err != nil {
		return nil, false, 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, false, 0, err
	}
	if r.Status != "success" {
		return nil, false, 0, fmt.Errorf("%s: %s", r.Status, r.Error)
	}
	var out []string
	number, most := false, 0.0
	for _, s := range r.Data.Result {
		v, _ := s.Value[1].(string)
		if f, err := strconv.ParseFloat(v, 64); err == nil && !math.IsNaN(f) {
			number, most = true, max(most, math.Abs(f))
		}
		out = append(out, fmt.Sprintf("%v=%s", s.Metric, v))
	}
	return out, number, most, nil
}

// promLabelValues is a label_values(metric, label) template query.
func promLabelValues(c *http.Client, q string) ([]string, error) {
	m := regexp.MustCompile(`^label_values\((.+), (\w+)\)$`).FindStringSubmatch(q)
	if m == nil {
		return nil, fmt.Errorf("not label_values(METRIC, LABEL): %q", q)
	}
	resp, err := c.Get("http://" + promAddr + "/api/v1/label/" + m[2] + "/values?" + url.Values{"match[]": {m[1]}}.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string   `json:"status"`
		Data   []string `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("status %s", r.Status)
	}
	return r.Data, nil
}

// startPrometheus runs prometheus in ns scraping netfwd's /metrics every
// second; it is stopped when the test ends.
func startPrometheus(t *testing.T, ns string, c *http.Client) {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: netfwd
    static_configs:
      - targets: ['%s']
`, metricsAddr)), 0o644); err != nil {
		t.Fatal(err)
	}
	out := &syncBuffer{}
	cmd := exec.Command("ip", "netns", "exec", ns, "prometheus", "--config.file="+conf,
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+promAddr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	ok, why := eventually(30*time.Second, func() (bool, string) {
		select {
		case <-done:
			return false, "exited"
		default:
		}
		resp, err := c.Get("http://" + promAddr + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	if !ok {
		t.Fatalf("prometheus not ready: %s\n%s", why, lastBytes(out.String(), 3000))
	}
}

// dashboardLoad keeps every panel's series moving until stop closes:
// bridged and routed pings, pings into a blackhole route (drops) and an
// unreachable one (ICMP errors), TCP to the router's own address (punted
// to the kernel's twin, answered through the host path), and route churn
// from both routing sources: blackhole routes added and deleted in the
// router's kernel (mirrored) and over the FPM connection (zebra's part).
func dashboardLoad(e *e2e, fpmConn net.Conn, stop <-chan struct{}, wg *sync.WaitGroup) {
	h1 := e.host("h1").NS
	h3 := e.host("h3")
	h2 := e.host("h2")
	gw10 := lab.VLAN10Addr.Addr()
	loop := func(f func(i int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				f(i)
			}
		}()
	}
	for _, dst := range []netip.Addr{h2.Addr.Addr(), h3.Addr.Addr(), lab.InternetIP, netip.MustParseAddr("10.66.0.1"), netip.MustParseAddr("10.67.0.1")} {
		loop(func(int) {
			lab.Ping(h1, dst, lab.PingOptions{Count: 20, Interval: 50 * time.Millisecond, Wait: 500 * time.Millisecond, Tool: "ping"})
		})
	}
	loop(func(int) {
		pktio.InNetns(h1, func() error {
			if c, err := net.DialTimeout("tcp", netip.AddrPortFrom(gw10, 7).String(), 300*time.Millisecond); err == nil {
				c.Close()
			}
			return nil
		})
		time.Sleep(100 * time.Millisecond)
	})
	loop(func(i int) {
		op := "add"
		if i%2 == 1 {
			op = "del"
		}
		exec.Command("ip", "-n", e.net.Router, "route", op, "blackhole", fmt.Sprintf("198.51.100.%d/32", i/2%200+1)).Run()
		time.Sleep(250 * time.Millisecond)
	})
	loop(func(i int) {
		z := &fpm.ZebraRoute{Prefix: netip.MustParsePrefix(fmt.Sprintf("198.18.%d.0/24", i/2%200+1)), Type: rtnl.RTN_BLACKHOLE}
		b := fpm.AppendNewRoute(nil, z)
		if i%2 == 1 {
			b = fpm.AppendDelRoute(nil, z)
		}
		fpmConn.SetWriteDeadline(time.Now().Add(time.Second))
		fpmConn.Write(b)
		time.Sleep(250 * time.Millisecond)
	})
}

func TestDashboardPrometheus(t *testing.T) {
	testenv.RequireRoot(t, "prometheus", "promtool", "ping")
	waitingTest(t)
	const fpmAddr = "127.0.0.1:2620"
	e := newE2EArgs(t, lab.Standard(), nil, "--host-path", "--mirror-kernel", "--fpm", fpmAddr)
	d, _, queries := loadDashboard(t)

	var fpmConn net.Conn
	if err := pktio.InNetns(e.net.Router, func() (err error) { fpmConn, err = net.Dial("tcp", fpmAddr); return err }); err != nil {
		t.Fatal(err)
	}
	defer fpmConn.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	dashboardLoad(e, fpmConn, stop, &wg)
	defer wg.Wait()
	defer close(stop)

	startPrometheus(t, e.net.Router, e.metrics)

	// The template variables, from their own queries (Grafana's "All"
	// would be the allValue regexp; the concrete values test more).
	vars := map[string]string{"__rate_interval": "15s"}
	ok, why := eventually(60*time.Second, func() (bool, string) {
		for _, v := range d.Templating.List {
			q := v.Query.Query
			for name, val := range vars {
				q = strings.ReplaceAll(q, "$"+name, val)
			}
			vals, err := promLabelValues(e.metrics, q)
			if err != nil || len(vals) == 0 {
				return false, fmt.Sprintf("variable %s: %s: %v %v", v.Name, q, vals, err)
			}
			vars[v.Name] = strings.Join(vals, "|")
		}
		return true, ""
	})
	if !ok {
		t.Fatal(why)
	}
	if !strings.Contains(vars["instance"], metricsAddr) || !strings.Contains(vars["port"], "eth1") {
		t.Errorf("variables %v: want the netfwd instance %s and its ports", vars, metricsAddr)
	}
	t.Logf("variables: %v", vars)
	expand := func(expr string) string {
		names := make([]string, 0, len(vars))
		for n := range vars {
			names = append(names, n)
		}
		slices.SortFunc(names, func(a, b string) int { return len(b) - len(a) }) // $__rate_interval before a shorter prefix
		for _, n := range names {
			expr = strings.ReplaceAll(expr, "$"+n, vars[n])
		}
		return expr
	}

	// Every query returns data: at least one series with a number (a
	// rate over the window needs two scrapes; the churn and pings keep
	// every series moving).
	// The series the load moves must also show it (not only zeros).
	moving := regexp.MustCompile(`netfwd_(port_rx_packets_total|port_tx_bytes_total|forwarded_total|l3_drops_total|fib_routes|neigh_entries|route_source_lag_seconds_bucket|route_source_routes_total|hostpath_punted_total|hostpath_injected_total)|process_resident_memory_bytes`)
	results := map[int][]string{}
	ok, why = eventually(60*time.Second, func() (bool, string) {
		for i, q := range queries {
			if _, done := results[i]; done {
				continue
			}
			series, number, most, err := promQuery(e.metrics, expand(q.expr))
			if err != nil {
				return false, fmt.Sprintf("%q %s: %v", q.panel, q.ref, err)
			}
			if len(series) == 0 || !number {
				return false, fmt.Sprintf("panel %q %s: %s: no data yet (%v)", q.panel, q.ref, expand(q.expr), series)
			}
			if moving.MatchString(q.expr) && most == 0 {
				return false, fmt.Sprintf("panel %q %s: %s: all zero (%v), the load moves it", q.panel, q.ref, expand(q.expr), series)
			}
			results[i] = series
		}
		return true, ""
	})
	if !ok {
		t.Fatalf("%s\nnetfwd:\n%s", why, lastBytes(e.stderr.String(), 2000))
	}
	for i, q := range queries {
		t.Logf("%s %s: %d series, e.g. %s", q.panel, q.ref, len(results[i]), results[i][0])
	}

	// The lag panel shows both routing sources.
	for i, q := range queries {
		if strings.Contains(q.expr, "route_source_lag_seconds") {
			s := strings.Join(results[i], " ")
			if !strings.Contains(s, "source:fpm") || !strings.Contains(s, "source:kernel") {
				t.Errorf("panel %q %s: %v, want both sources", q.panel, q.ref, results[i])
			}
		}
	}

	// promtool check metrics: nothing to report on /metrics under load.
	resp, err := e.metrics.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"netfwd_hostpath_punted_total", "netfwd_route_source_lag_seconds_bucket", "netfwd_port_rx_packets_total"}
	if testIO() != "afxdp" {
		want = append(want, "netfwd_pktio_control_ring_drops_total") // AF_XDP ports have no control ring
	}
	for _, want := range want {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s: promtool would not see it", want)
		}
	}
	cmd := exec.Command("promtool", "check", "metrics")
	cmd.Stdin = strings.NewReader(string(body))
	out, err := cmd.CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) != 0 {
		t.Errorf("promtool check metrics (%d bytes of /metrics): %v\n%s", len(body), err, out)
	}
}
