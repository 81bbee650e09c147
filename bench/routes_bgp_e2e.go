package bench

// Benchmark 4(b), end to end (root, FRR, BIRD): BIRD announces prefixes of
// the full table over eBGP to FRR, zebra streams them to netfwd over FPM
// and programs the kernel's table of the same namespace.
//
//	feed: BIRD (AS 65002) --eBGP, veth dn0/up0--> rtr: bgpd -> zebra --FPM 127.0.0.1:2620--> netfwd (child, --netns rtr)
//	                                                        zebra --netlink--> the kernel's table in rtr
//
// The lab (namespaces with random names, configs, daemons) is
// internal/routinglab, as in the end-to-end tests; netfwd is a child
// process (netfwdchild.go) with an empty config, `--fpm 127.0.0.1:2620`,
// and its metrics on a loopback port of this namespace.
//
// Steps: netfwd, then zebra and bgpd (zebra connects to netfwd ~3 s
// later); BIRD starts with its BGP session disabled and loads its static
// routes; a kernel watcher subscribes to the router namespace's route
// notifications; `birdc enable up`. Then every 50 ms (pollEvery):
//   - until the session is up, BIRD's protocol table: Established at
//     BIRD's own "Since" (milliseconds: exact to 1 ms; the poll only finds it);
//   - netfwd's metrics: the last route is in its FIB at the first scrape
//     where the FPM source's routes added - deleted reach N and no batch is
//     applied but uncommitted (netfwd counts messages after the commit and
//     routes while applying them: messages >= routes + skips); resolution
//     one poll;
//   - zebra's last FPM message: once the load is over, the kernel's
//     tcp_info of netfwd's end of the FPM connection (`ss -i` lastrcv,
//     milliseconds) says when its last byte arrived (last_fpm_clock
//     "tcp_info"; else "commit": the scrape where netfwd's messages
//     counter last grew, which trails the arrival by the 100 ms idle
//     commit); netfwd_after_last_fpm_s is netfwd's part after it;
//   - the kernel: the watcher notes the notification that makes N distinct
//     prefixes of proto bgp (exact; on a notification overrun, a dump every
//     second instead, said in kernel_clock).
// The load ends 2 s after the last message. CPU seconds of zebra, bgpd and
// netfwd from `birdc enable up` to then. Restart: SIGTERM to netfwd, start
// it again: restart_to_connect_s is the first scrape where zebra is
// connected (zebra's reconnect delay, seen from netfwd's start),
// restart_to_full_s the first where the FIB holds N again (same test),
// restart_to_last_fpm_s when the replay's last message arrived (tcp_info).
// Finally one dump of each side: netfwd's route counts and the kernel's.
//
// A scrape costs netfwd little (scrape_ms is the mean round trip): the FIB
// keeps its route counts as routes change (fib/counts.go), so the
// fib_routes gauge walks nothing.
//
// Locking: none; one goroutine (the kernel watcher has its own).

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/netfwd/netfwd/internal/routinglab"
)

// errBGPE2ESkipped: the machine cannot run the case (no root, no FRR or
// BIRD); the suite reports it and goes on.
var errBGPE2ESkipped = errors.New("cannot run here")

// pollEvery is the measurement's polling interval.
const pollEvery = 50 * time.Millisecond

// bgpE2EQuiet is how long the FPM stream must be silent before a load
// counts as over.
const bgpE2EQuiet = 2 * time.Second

// bgpE2EResult is one run's measurements.
type bgpE2EResult struct {
	routes      int
	established time.Time
	// from Established
	toNetfwd, toKernel, toLastFPM time.Duration
	kernelClock                   string // "notifications" or "dump-1s"
	lastFPMClock                  string // "tcp_info" (ss's lastrcv) or "commit" (netfwd's messages counter)
	fpmMessages                   float64
	zebraCPU, bgpdCPU, netfwdCPU  time.Duration
	birdLoad                      time.Duration // BIRD's static routes loaded, before the session
	// netfwd restarted
	restartConnect, restartFull   time.Duration
	restartReplay                 time.Duration // zebra's connection to its replay applied
	restartLastFPM                time.Duration // the replay's last message arrived (tcp_info; 0: unknown)
	restartZebraCPU, restartNfCPU time.Duration
	netfwdRoutes, kernelRoutes    int // the dumps at the end
	scrapes                       int
	scrapeTime                    time.Duration
}

// fpmCounters are the FPM source's counters from one scrape.
type fpmCounters struct {
	connected                                           bool
	messages, added, replaced, unchanged, deleted, skip float64
	seeded, swept                                       float64 // read from the kernel at start; removed by sweeps
	batches                                             float64 // FIB transactions
}

// inFIB (applied, maybe not yet committed) counts the FPM routes in
// netfwd's FIB: those zebra's messages added
// and those a restarted netfwd seeded from the kernel (zebra's replay then
// finds them unchanged), less those deleted or swept.
func (c fpmCounters) inFIB() float64 { return c.added + c.seeded - c.deleted - c.swept }

// committed reports that no batch was applied but not yet committed: the
// messages counter (read first, counted after the commit) covers every
// route message the translator counted (nexthop messages count only in
// messages).
func (c fpmCounters) committed() bool {
	return c.messages >= c.added+c.replaced+c.unchanged+c.deleted+c.skip
}

// bgpE2E is one run's lab and netfwd.
type bgpE2E struct {
	o       Options
	lab     *routinglab.Lab
	nf      *netfwdChild
	metrics string // netfwd's metrics address
	res     *bgpE2EResult
}

// runBGPE2E measures it all on a fresh lab.
func runBGPE2E(prefixes []netip.Prefix, o Options) (res *bgpE2EResult, err error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: needs root (network namespaces)", errBGPE2ESkipped)
	}
	if m := routinglab.Tools(); len(m) > 0 {
		return nil, fmt.Errorf("%w: missing %s (apt-get install frr bird2)", errBGPE2ESkipped, strings.Join(m, ", "))
	}
	l, err := routinglab.New(prefixes)
	if err != nil {
		return nil, err
	}
	b := &bgpE2E{o: o, lab: l, res: &bgpE2EResult{routes: len(prefixes)}}
	defer func() {
		// zebra before netfwd: zebra 8.4.4 can hang on SIGTERM while its
		// FPM peer is gone. With a full table it takes longer than
		// routinglab.StopWait to withdraw it and is killed: said, not an
		// error of the measurement; netfwd's unclean exit is one.
		if serr := l.StopDaemons(); serr != nil {
			o.Log("bgp-e2e: stopping the daemons: %v", serr)
		}
		if b.nf != nil {
			err = errors.Join(err, b.nf.stop())
		}
		if cerr := l.Close(); cerr != nil {
			o.Log("bgp-e2e: removing the lab: %v", cerr)
		}
		if err != nil {
			res = nil
		}
	}()
	if err := b.startNetfwd(); err != nil {
		return nil, err
	}
	if err := l.StartFRR(); err != nil {
		return nil, err
	}
	if err := b.waitConnected(30 * time.Second); err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := l.StartBird(l.Feed, "bird-feed", routinglab.BirdFeedDisabled); err != nil {
		return nil, err
	}
	if err := b.waitBirdLoaded(10 * time.Minute); err != nil {
		return nil, err
	}
	b.res.birdLoad = time.Since(t0)
	o.Log("bgp-e2e: %d prefixes; BIRD loaded them in %v", len(prefixes), b.res.birdLoad.Round(time.Millisecond))
	if err := b.firstLoad(); err != nil {
		return nil, err
	}
	if err := b.restart(); err != nil {
		return nil, err
	}
	if err := b.count(); err != nil {
		return nil, err
	}
	return b.res, nil
}

func (b *bgpE2E) startNetfwd() error {
	nf, err := startNetfwd(b.lab.Rtr, "", "afpacket", -1, "--fpm", routinglab.FPMAddr)
	if err != nil {
		return err
	}
	b.nf = nf
	if _, b.metrics, err = nf.listenAddrs(); err != nil {
		return err
	}
	return nil
}

// scrape reads the FPM source's counters.
func (b *bgpE2E) scrape() (fpmCounters, error) {
	t0 := time.Now()
	m, err := scrapeMetrics(b.metrics)
	b.res.scrapes++
	b.res.scrapeTime += time.Since(t0)
	if err != nil {
		return fpmCounters{}, err
	}
	c := fpmCounters{
		connected: metricSum(m, "netfwd_route_source_connected", `source="fpm"`) == 1,
		messages:  metricSum(m, "netfwd_route_source_messages_total", `source="fpm"`),
		added:     metricSum(m, "netfwd_route_source_routes_total", `source="fpm"`, `op="added"`),
		replaced:  metricSum(m, "netfwd_route_source_routes_total", `source="fpm"`, `op="replaced"`),
		unchanged: metricSum(m, "netfwd_route_source_routes_total", `source="fpm"`, `op="unchanged"`),
		deleted:   metricSum(m, "netfwd_route_source_routes_total", `source="fpm"`, `op="deleted"`),
		seeded:    metricSum(m, "netfwd_route_source_routes_total", `source="fpm"`, `op="seeded"`),
		swept:     metricSum(m, "netfwd_route_source_swept_routes_total", `source="fpm"`),
		skip:      metricSum(m, "netfwd_route_source_skipped_total", `source="fpm"`),
		batches:   metricSum(m, "netfwd_route_source_batches_total", `source="fpm"`),
	}
	return c, nil
}

// metricSum adds the series of a metric whose labels include all of labels.
func metricSum(m map[string]float64, name string, labels ...string) float64 {
	sum := 0.0
	for k, v := range m {
		n, l, _ := strings.Cut(k, "{")
		if n != name {
			continue
		}
		ok := true
		for _, want := range labels {
			ok = ok && strings.Contains(l, want)
		}
		if ok {
			sum += v
		}
	}
	return sum
}

// waitConnected waits until zebra is connected to netfwd.
func (b *bgpE2E) waitConnected(timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(pollEvery) {
		if c, err := b.scrape(); err == nil && c.connected {
			return nil
		}
	}
	return fmt.Errorf("zebra not connected to netfwd's FPM listener after %v", timeout)
}

// waitBirdLoaded waits until BIRD's static protocols hold every prefix.
func (b *bgpE2E) waitBirdLoaded(timeout time.Duration) error {
	var out string
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		out, _ = b.lab.Birdc(b.lab.Feed, "bird-feed", "show", "route", "count")
		// "N of N routes for N networks in table master4"
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) > 3 && f[1] == "of" {
				if n, err := strconv.Atoi(f[0]); err == nil && n >= b.res.routes {
					return nil
				}
			}
		}
	}
	return fmt.Errorf("BIRD did not load %d routes in %v: %s", b.res.routes, timeout, out)
}

func (b *bgpE2E) cpu(daemon string) time.Duration {
	pb, err := os.ReadFile(b.lab.PidFile(daemon))
	if err != nil {
		return 0
	}
	return statCPU("/proc/" + strings.TrimSpace(string(pb)) + "/stat")
}

// firstLoad enables the session and times the table into netfwd and the
// kernel.
func (b *bgpE2E) firstLoad() error {
	l, r, n := b.lab, b.res, b.res.routes
	kdone, kstop, err := routinglab.WatchKernelRoutes(l.Rtr, routinglab.ProtoBGP, n, 15*time.Minute)
	if err != nil {
		return err
	}
	defer kstop()
	r.kernelClock = "notifications"
	zebra0, bgpd0, nf0 := b.cpu("zebra"), b.cpu("bgpd"), b.nf.cpu()
	if _, err := l.Birdc(l.Feed, "bird-feed", "enable", "up"); err != nil {
		return err
	}
	var fibAt, kernelAt, lastMsgAt, nextDump time.Time
	lastMsgs := -1.0
	deadline := time.Now().Add(15 * time.Minute)
	for tick := time.Now(); ; tick = tick.Add(pollEvery) {
		if d := time.Until(tick); d > 0 {
			time.Sleep(d)
		}
		now := time.Now()
		if now.After(deadline) {
			return fmt.Errorf("no full table after 15 minutes: established %v, netfwd %v, kernel %v", !r.established.IsZero(), !fibAt.IsZero(), !kernelAt.IsZero())
		}
		if r.established.IsZero() {
			if since, up := l.BirdSession(l.Feed, "bird-feed", "up"); up {
				if r.established, err = routinglab.BirdSince(since, time.Now()); err != nil {
					return err
				}
			}
		}
		c, err := b.scrape()
		if err != nil {
			return fmt.Errorf("netfwd's metrics: %w", err)
		}
		if c.messages != lastMsgs {
			lastMsgs, lastMsgAt = c.messages, time.Now()
		}
		if fibAt.IsZero() && c.inFIB() >= float64(n) && c.committed() {
			fibAt = time.Now()
		}
		if kernelAt.IsZero() {
			switch {
			case r.kernelClock == "notifications":
				select {
				case t := <-kdone:
					if t.IsZero() { // overrun: count by dumps
						r.kernelClock = "dump-1s"
					} else {
						kernelAt = t
					}
				default:
				}
			case now.After(nextDump):
				nextDump = now.Add(time.Second)
				if k, err := routinglab.CountKernelRoutes(l.Rtr, routinglab.ProtoBGP); err == nil && k >= n {
					kernelAt = time.Now()
				}
			}
		}
		if !fibAt.IsZero() && !kernelAt.IsZero() && !r.established.IsZero() && time.Since(lastMsgAt) >= bgpE2EQuiet {
			break
		}
	}
	r.toNetfwd, r.toKernel = fibAt.Sub(r.established), kernelAt.Sub(r.established)
	r.toLastFPM, r.lastFPMClock = lastMsgAt.Sub(r.established), "commit"
	if t, err := l.FPMLastReceive(); err == nil {
		r.toLastFPM, r.lastFPMClock = t.Sub(r.established), "tcp_info"
	} else {
		b.o.Log("bgp-e2e: the FPM connection's last receive: %v (the last commit instead)", err)
	}
	r.fpmMessages = lastMsgs
	r.zebraCPU, r.bgpdCPU, r.netfwdCPU = b.cpu("zebra")-zebra0, b.cpu("bgpd")-bgpd0, b.nf.cpu()-nf0
	b.o.Log("bgp-e2e: Established at %s (BIRD); -> netfwd's FIB full %v, kernel %v (%s), last FPM message %v; CPU zebra %.1f s, bgpd %.1f s, netfwd %.1f s",
		r.established.Format("15:04:05.000"), r.toNetfwd.Round(time.Millisecond), r.toKernel.Round(time.Millisecond), r.kernelClock, r.toLastFPM.Round(time.Millisecond),
		r.zebraCPU.Seconds(), r.bgpdCPU.Seconds(), r.netfwdCPU.Seconds())
	return nil
}

// restart stops netfwd, starts it again and times the replay.
func (b *bgpE2E) restart() error {
	r, n := b.res, b.res.routes
	err := b.nf.stop()
	b.nf = nil
	if err != nil {
		return err
	}
	zebra0 := b.cpu("zebra")
	start := time.Now()
	if err := b.startNetfwd(); err != nil {
		return err
	}
	// The FIB is full either from zebra's replay or, before zebra even
	// reconnects, from the routes netfwd seeds from the kernel at start
	// (internal/fpm/seed.go); the replay is timed on its own: from zebra's
	// connection until its messages are applied and committed.
	var connectAt, fullAt, replayedAt time.Time
	deadline := start.Add(10 * time.Minute)
	for tick := time.Now(); ; tick = tick.Add(pollEvery) {
		if d := time.Until(tick); d > 0 {
			time.Sleep(d)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no full table 10 minutes after netfwd's restart (zebra connected: %v)", !connectAt.IsZero())
		}
		c, err := b.scrape()
		if err != nil {
			return fmt.Errorf("netfwd's metrics: %w", err)
		}
		if connectAt.IsZero() && (c.connected || c.messages > 0) {
			connectAt = time.Now()
		}
		full := c.inFIB() >= float64(n) && c.committed()
		if fullAt.IsZero() && full {
			fullAt = time.Now()
		}
		if !connectAt.IsZero() && full && c.messages >= float64(n) {
			replayedAt = time.Now()
			break
		}
	}
	r.restartConnect, r.restartFull = connectAt.Sub(start), fullAt.Sub(start)
	r.restartReplay = replayedAt.Sub(connectAt)
	r.restartZebraCPU, r.restartNfCPU = b.cpu("zebra")-zebra0, b.nf.cpu()
	time.Sleep(bgpE2EQuiet) // the replay's stragglers (IPv6, ...)
	if t, err := b.lab.FPMLastReceive(); err == nil {
		r.restartLastFPM = t.Sub(start)
	}
	b.o.Log("bgp-e2e: netfwd restarted: zebra connected after %v, full FIB after %v; CPU zebra %.1f s, netfwd %.1f s",
		r.restartConnect.Round(time.Millisecond), r.restartFull.Round(time.Millisecond), r.restartZebraCPU.Seconds(), r.restartNfCPU.Seconds())
	return nil
}

// count reads both tables once, after the measurements: netfwd's routes
// in table main (all learned: its config is empty) and the kernel's
// routes of proto bgp.
func (b *bgpE2E) count() error {
	m, err := scrapeMetrics(b.metrics)
	if err != nil {
		return err
	}
	b.res.netfwdRoutes = int(metricSum(m, "netfwd_fib_routes", `table="main"`))
	b.res.kernelRoutes, err = routinglab.CountKernelRoutes(b.lab.Rtr, routinglab.ProtoBGP)
	return err
}

// record is the run as the suite's record: ns_op and mops are the first
// load into netfwd's FIB per route, from Established.
func (r *bgpE2EResult) record() Record {
	secs := r.toNetfwd.Seconds()
	extra := map[string]any{
		"established_to_netfwd_s":   round3(secs),
		"established_to_kernel_s":   round3(r.toKernel.Seconds()),
		"established_to_last_fpm_s": round3(r.toLastFPM.Seconds()),
		"kernel_clock":              r.kernelClock,
		"last_fpm_clock":            r.lastFPMClock,
		"netfwd_after_last_fpm_s":   round3((r.toNetfwd - r.toLastFPM).Seconds()),
		"fpm_messages":              r.fpmMessages,
		"zebra_cpu_s":               round3(r.zebraCPU.Seconds()),
		"bgpd_cpu_s":                round3(r.bgpdCPU.Seconds()),
		"netfwd_cpu_s":              round3(r.netfwdCPU.Seconds()),
		"restart_to_connect_s":      round3(r.restartConnect.Seconds()),
		"restart_to_full_s":         round3(r.restartFull.Seconds()),
		"replay_s":                  round3(r.restartReplay.Seconds()),
		"restart_to_last_fpm_s":     round3(r.restartLastFPM.Seconds()),
		"restart_zebra_cpu_s":       round3(r.restartZebraCPU.Seconds()),
		"restart_netfwd_cpu_s":      round3(r.restartNfCPU.Seconds()),
		"netfwd_routes":             r.netfwdRoutes,
		"kernel_routes":             r.kernelRoutes,
		"bird_load_s":               round3(r.birdLoad.Seconds()),
	}
	if r.scrapes > 0 {
		extra["scrape_ms"] = round3(float64(r.scrapeTime.Microseconds()) / 1e3 / float64(r.scrapes))
	}
	return Record{Suite: "routes", Impl: "bgp-e2e",
		Params: map[string]any{"routes": r.routes, "poll_ms": pollEvery.Milliseconds(), "fpm": "nhg"},
		NsOp:   round2(float64(r.toNetfwd.Nanoseconds()) / float64(r.routes)),
		Mops:   mopsOf(r.routes, secs), Extra: extra}
}

// mopsOf is n per secs in millions, 0 when secs is 0 (the step finished
// within the clock's or the poll's resolution: no rate, and JSON has no
// +Inf).
func mopsOf(n int, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	return round3(float64(n) / secs / 1e6)
}

// runBGPE2ECase runs the case for the suite: a record, or one saying why
// it could not run.
func runBGPE2ECase(prefixes []netip.Prefix, o Options) ([]Record, error) {
	res, err := runBGPE2E(prefixes, o)
	if errors.Is(err, errBGPE2ESkipped) {
		o.Log("bgp-e2e: skipped: %v", err)
		return []Record{{Suite: "routes", Impl: "bgp-e2e", Params: map[string]any{"routes": len(prefixes)},
			Extra: map[string]any{"error": err.Error()}}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bgp-e2e: %w", err)
	}
	return []Record{res.record()}, nil
}
