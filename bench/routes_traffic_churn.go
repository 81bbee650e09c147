package bench

// Benchmark 4(c), end to end (root, trafgen): frames lost while netfwd
// forwards at half of its saturation and its routes change at 10,000 per
// second over FPM, beside the same traffic without changes in the same run.
//
//	H1 (trafgen) --veth-- ra R: netfwd --fpm rb --veth-- h2 H2 (tc counter)
//	                         ^ FPM over loopback in R: this process, as zebra
//
// netfwd runs as a child process in R (netfwdchild.go) with its veth
// config (two routed ports, the permanent neighbours 10.81.2.2 and
// 10.81.2.3, both H2's MAC) and `--fpm 127.0.0.1:0 --metrics 127.0.0.1:0`
// (the addresses are read from its "netfwd running" line). The bench
// connects to the FPM port from inside R and loads the table (churnBase:
// nexthop objects via 10.81.2.2 and via 10.81.2.3 on rb, the prefixes,
// and the hot prefix 198.19.81.0/24), then waits until netfwd's metrics
// count every message applied. trafgen sends 64-byte UDP frames to
// 198.19.81.2, a learned route only.
//
// Steps: saturation (trafgen on every CPU, a fixed count of frames, as the
// veth suite measures it); then at 50 % of it, paced by trafgen, first
// "steady" (no changes), then "churn" (the writer of routes_churn.go
// changing routes at 10,000/s, every 100th change the hot prefix's
// nexthop, so the traffic's own route is replaced 100 times a second).
// Lost = frames h1 sent - frames counted at h2; netfwd's drop counters
// (metrics, before and after each phase) say where: a full receive ring
// (the daemon did not keep up: CPU) or the router itself (router_drops: no
// route, ...; a replaced route that went missing would show there). The
// churn phase must end with netfwd having applied every message.
//
// Locking: none; the writer goroutine owns the FPM connection while it runs.

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/netfwd/netfwd/internal/pktio"
)

// errTrafficChurnSkipped: the machine cannot run the case (no root, no
// trafgen); the suite reports it and goes on.
var errTrafficChurnSkipped = errors.New("cannot run here")

// The second gateway of the churn (also H2's MAC).
var vethH2IP2 = "10.81.2.3"

// trafficChurnPlan is how long each part runs.
type trafficChurnPlan struct {
	satFrames uint64
	warmup    uint64
	phase     time.Duration // steady and churn each
}

func trafficChurnPlanFor(o Options) trafficChurnPlan {
	if o.Quick {
		return trafficChurnPlan{satFrames: 200_000, warmup: 5_000, phase: 10 * time.Second}
	}
	return trafficChurnPlan{satFrames: 1_000_000, warmup: 20_000, phase: 60 * time.Second}
}

// trafficChurnResult is one run's measurements.
type trafficChurnResult struct {
	routes        int
	sat           runResult
	steady, churn runResult
	pps           float64
	c             *routeChurn
	sent          churnStats
	drops         [2]map[string]float64 // netfwd's drop counters over steady, churn
	netfwdCPU     [2]time.Duration      // netfwd's CPU time over steady, churn
	wall          [2]time.Duration      // each phase's measurement, trafgen's start to its end (+0.25 s)
	loadTime      time.Duration
}

// runTrafficChurn measures it all on a fresh topology.
func runTrafficChurn(prefixes []netip.Prefix, o Options) (res *trafficChurnResult, err error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: needs root (network namespaces)", errTrafficChurnSkipped)
	}
	if err := haveTrafgen(); err != nil {
		return nil, fmt.Errorf("%w: %v", errTrafficChurnSkipped, err)
	}
	plan := trafficChurnPlanFor(o)
	prefixes = withoutPrefix(prefixes, hotPrefix)
	n, err := newVethNet(countAtH2, vethFAMAC)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := n.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	// Traffic to the hot prefix instead of H2's own address.
	hotDst := hotPrefix.Addr().Next().Next().String()
	conf, err := os.ReadFile(n.trafgenConf)
	if err != nil {
		return nil, err
	}
	hotConf := strings.Replace(string(conf), "daddr="+vethH2IP, "daddr="+hotDst, 1)
	if hotConf == string(conf) {
		return nil, fmt.Errorf("trafgen config without daddr=%s: %s", vethH2IP, conf)
	}
	n.trafgenConf = filepath.Join(n.dir, "udp64-hot.trafgen")
	if err := os.WriteFile(n.trafgenConf, []byte(hotConf), 0o644); err != nil {
		return nil, err
	}
	config := n.netfwdConfig() + fmt.Sprintf("neigh add %s lladdr %s dev %s nud permanent\n", vethH2IP2, n.h2MAC, n.rb)
	child, err := startNetfwd(n.r, config, "afpacket", -1, "--fpm", "127.0.0.1:0", "--metrics", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer func() {
		if serr := child.stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	fpmAddr, metricsAddr, err := child.listenAddrs()
	if err != nil {
		return nil, err
	}
	metrics := func() (map[string]float64, error) { return scrapeMetrics(metricsAddr) }

	conn, oif, err := n.dialFPM(fpmAddr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()

	nhids := [2]uint32{31, 32}
	gws := [2]netip.Addr{netip.MustParseAddr(vethH2IP), netip.MustParseAddr(vethH2IP2)}
	base, baseMsgs := churnBase(prefixes, hotPrefix, nhids, gws, oif)
	res = &trafficChurnResult{routes: len(prefixes), c: newRouteChurn(prefixes, hotPrefix, nhids, 9)}
	t0 := time.Now()
	if _, err := conn.Write(base); err != nil {
		return nil, err
	}
	fpmMessages := func() uint64 { return fpmApplied(metricsAddr) }
	if err := waitMessages(fpmMessages, baseMsgs, 5*time.Minute); err != nil {
		return nil, fmt.Errorf("loading the table into netfwd: %w", err)
	}
	res.loadTime = time.Since(t0)
	o.Log("traffic-churn: %d prefixes loaded into netfwd over FPM in %v", len(prefixes), res.loadTime.Round(time.Millisecond))

	warm := func(pps float64) error {
		w, err := n.measure(genSpec{frames: plan.warmup, procs: 1, pps: pps, warmup: true}, nil)
		if err == nil && w.delivered == 0 {
			err = fmt.Errorf("netfwd delivered none of %d warm-up frames to %s", w.offered, hotDst)
		}
		return err
	}
	if err := warm(0); err != nil {
		return nil, err
	}
	if res.sat, err = n.measure(genSpec{frames: plan.satFrames, procs: runtime.NumCPU()}, child.cpu); err != nil {
		return nil, err
	}
	res.pps = res.sat.pps() / 2
	o.Log("traffic-churn: saturation %v; 50%% = %.0f pps", res.sat, res.pps)
	if res.pps <= 0 {
		return nil, errors.New("saturation: nothing delivered")
	}
	g := genSpec{frames: uint64(res.pps * plan.phase.Seconds()), procs: 1, pps: res.pps}

	// Steady, then churn: each with netfwd's drop counters around it.
	for i, churn := range []bool{false, true} {
		if err := warm(res.pps); err != nil {
			return nil, err
		}
		m0, err := metrics()
		if err != nil {
			return nil, err
		}
		cpu0, t0 := child.cpu(), time.Now()
		var r runResult
		if !churn {
			r, err = n.measure(g, child.cpu)
		} else {
			stop := make(chan struct{})
			done := make(chan error, 1)
			go func() {
				var err error
				res.sent, err = writeChurn(conn, res.c, churnRate, 5*time.Millisecond, stop)
				done <- err
			}()
			time.Sleep(200 * time.Millisecond) // changes flowing before the first frame
			r, err = n.measure(g, child.cpu)
			close(stop)
			err = errors.Join(err, <-done)
		}
		if err != nil {
			return nil, err
		}
		res.netfwdCPU[i], res.wall[i] = child.cpu()-cpu0, time.Since(t0)
		m1, err := metrics()
		if err != nil {
			return nil, err
		}
		res.drops[i] = dropDeltas(m0, m1)
		if churn {
			res.churn = r
		} else {
			res.steady = r
		}
	}
	if err := waitMessages(fpmMessages, baseMsgs+res.c.messages, time.Minute); err != nil {
		return nil, fmt.Errorf("churn not applied by netfwd: %w", err)
	}
	return res, nil
}

// listenAddrs reads the FPM and metrics addresses from netfwd's "netfwd
// running" line.
func (c *netfwdChild) listenAddrs() (fpmAddr, metricsAddr string, err error) {
	out := c.stderr.String()
	for line := range strings.Lines(out) {
		if !strings.Contains(line, "netfwd running") {
			continue
		}
		fpmAddr, metricsAddr = logField(line, "fpm"), logField(line, "metrics")
	}
	if fpmAddr == "" || metricsAddr == "" {
		return "", "", fmt.Errorf("no fpm= and metrics= in netfwd's output: %s", out)
	}
	return fpmAddr, metricsAddr, nil
}

// logField is key's value in a slog text line.
func logField(line, key string) string {
	m := regexp.MustCompile(`(?:^| )` + regexp.QuoteMeta(key) + `=("[^"]*"|\S+)`).FindStringSubmatch(line)
	if m == nil {
		return ""
	}
	if v, err := strconv.Unquote(m[1]); err == nil {
		return v
	}
	return m[1]
}

// dialFPM connects to netfwd's FPM listener at addr from inside R, as zebra
// would, and returns the connection and rb's ifindex (the routes' oif).
func (n *vethNet) dialFPM(addr string) (net.Conn, uint32, error) {
	var oif uint32
	var conn net.Conn
	err := pktio.InNetns(n.r, func() error {
		ifi, err := net.InterfaceByName(n.rb)
		if err != nil {
			return err
		}
		oif = uint32(ifi.Index)
		conn, err = net.Dial("tcp", addr)
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("FPM connection: %w", err)
	}
	return conn, oif, nil
}

// fpmApplied is how many FPM messages netfwd has applied (counted after
// their commit), from its metrics; 0 when they cannot be read.
func fpmApplied(metricsAddr string) uint64 {
	m, err := scrapeMetrics(metricsAddr)
	if err != nil {
		return 0
	}
	return uint64(m[`netfwd_route_source_messages_total{source="fpm"}`])
}

// scrapeClient reads the daemon's metrics uncompressed and over one kept
// connection: the benchmarks poll them every 50 ms, and gzip (Go's client
// asks for it by default) was most of what a scrape cost the daemon.
var scrapeClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableCompression: true}}

// scrapeMetrics reads netfwd's /metrics: series (name{labels}) -> value.
func scrapeMetrics(addr string) (map[string]float64, error) {
	resp, err := scrapeClient.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m, sc.Err()
}

// dropDeltas are the changes of netfwd's drop counters (any series whose
// name says drops) between two scrapes, the ones that moved.
func dropDeltas(m0, m1 map[string]float64) map[string]float64 {
	d := map[string]float64{}
	for k, v := range m1 {
		name, _, _ := strings.Cut(k, "{")
		if strings.Contains(name, "drops") && v != m0[k] {
			d[k] = v - m0[k]
		}
	}
	return d
}

// records turns the run into the suite's records.
func (r *trafficChurnResult) records() []Record {
	var recs []Record
	for i, p := range []struct {
		impl string
		run  runResult
		rate int
	}{{"traffic-steady", r.steady, 0}, {"traffic-churn", r.churn, churnRate}} {
		lost := int64(p.run.offered) - int64(p.run.delivered)
		extra := loss50Extra(p.run, lost)
		extra["saturation_mpps"] = round3(r.sat.pps() / 1e6)
		// What trafgen really offered against the saturation: its -b pacing
		// drifts on a loaded machine (38-85 % seen for a 50 % target), and
		// the loss means little when it does.
		if p.run.elapsed > 0 && r.sat.pps() > 0 {
			extra["offered_x_saturation"] = round3(float64(p.run.offered) / p.run.elapsed.Seconds() / r.sat.pps())
		}
		extra["load_seconds"] = round3(r.loadTime.Seconds())
		if len(r.drops[i]) > 0 {
			extra["netfwd_drops"] = r.drops[i]
		}
		// Drops by the router itself (no route, ...), not by a full
		// receive ring: a replaced route that went missing shows here.
		routeDrops := 0.0
		for k, v := range r.drops[i] {
			if strings.HasPrefix(k, "netfwd_l3_drops_total") || strings.HasPrefix(k, "netfwd_l2_drops_total") {
				routeDrops += v
			}
		}
		extra["router_drops"] = routeDrops
		extra["netfwd_cpu_s"] = round3(r.netfwdCPU[i].Seconds())
		extra["seconds"] = round3(p.run.elapsed.Seconds())
		extra["wall_seconds"] = round3(r.wall[i].Seconds())
		if p.run.elapsed > 0 {
			extra["netfwd_cpus"] = round3(r.netfwdCPU[i].Seconds() / p.run.elapsed.Seconds())
		}
		if p.rate > 0 {
			extra["changes"] = r.c.changes
			extra["changes_per_s"] = round2(r.sent.rate(r.c))
			extra["hot_changes"] = r.c.hotChanges
			extra["hot_del_add"] = r.c.hotDelAdd
			extra["writer_late_ms"] = round2(float64(r.sent.late.Microseconds()) / 1e3)
		}
		recs = append(recs, Record{Suite: "routes", Impl: p.impl,
			Params: map[string]any{"routes": r.routes, "frame": 64, "rate": "50pct", "pps": int(r.pps), "churn_per_s": p.rate,
				"setup": "unpinned", "io": "afpacket"},
			NsOp: round2(nsPer(p.run.pps())), Mops: round3(p.run.pps() / 1e6), Extra: extra})
	}
	return recs
}

func logTrafficChurn(o Options, recs []Record) {
	for _, r := range recs {
		e := r.Extra
		o.Log("%-14s %.3f Mpps offered, lost %v of %v (%.4f%%), netfwd busy %v CPUs, netfwd drops %v", r.Impl, e["offered_mpps"], e["lost"], e["offered"],
			100*e["loss"].(float64), e["netfwd_cpus"], e["netfwd_drops"])
	}
}
