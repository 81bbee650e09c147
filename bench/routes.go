package bench

// Suite routes: routes from the network. (a) The full table (901,899
// prefixes) as FRR's zebra streams it over FPM, decoded and applied in
// process:
//   fpm-nhg       one RTM_NEWNEXTHOP, then one RTM_NEWROUTE per frame with
//                 RTA_NH_ID (zebra's default), batches of 32,768 messages
//   fpm-inline    the same with RTA_GATEWAY + RTA_OIF (no nexthop groups)
//   fpm-replay    a second session (new nexthop id, as after a zebra
//                 restart) replaying the table onto the full FIB: every
//                 route unchanged
//   fpm-tcp       fpm-nhg through the real server over loopback TCP
//                 (reads, batching, transactions as in the daemon)
// beside the baseline measured in the same run:
//   config-load   the same table from a config file (route add ... via ...
//                 proto bgp metric 20), as `netfwd run` loads it
// Each case reports routes per second (wall), CPU seconds (all threads,
// GC included) and heap bytes per route once loaded. GOMAXPROCS is 1 for
// the "one core" rows and the machine's count for the others.
// (c) churn, 10,000 route changes per second over FPM (routes_churn.go):
//   lookup-quiet  FIB lookup latency percentiles in process, no changes
//   lookup-churn  the same readers while the changes stream in through the
//                 real FPM server (routes_lookup_churn.go)
//   traffic-steady, traffic-churn (root, trafgen): netfwd as a child
//                 process forwarding at 50 % of its saturation to a learned
//                 prefix, without and with the changes: lost frames
//                 (routes_traffic_churn.go)
//   fpm-paced-replay, fpm-paced-first, daemon-paced-*: the stream through
//                 the real server, in process and in the daemon, at zebra's
//                 rates (replay after a restart; first load): how far the
//                 FIB lags the last frame (routes_paced.go)
// (b) end to end (root, FRR, BIRD; routes_bgp_e2e.go):
//   bgp-e2e       BIRD announces the table over eBGP to FRR, zebra streams
//                 it to netfwd (a child process) over FPM and programs the
//                 kernel: Established -> the last route in netfwd's FIB,
//                 beside the kernel's table; then a netfwd restart
// --only picks cases by these names (lookup-quiet/lookup-churn and
// traffic-steady/traffic-churn run as pairs); --routes sets the table size.

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/apply"
	"github.com/netfwd/netfwd/internal/fpm"
	"github.com/netfwd/netfwd/internal/fulltable"
)

func init() {
	Register(Suite{Name: "routes", Doc: "routes from FRR over FPM: the full table decoded and applied in process vs from a config file; 10,000 changes/s: lookup latency, and loss under traffic (root)", Run: runRoutes})
}

// RoutesSetup is the table and its encodings shared by the cases.
type RoutesSetup struct {
	Prefixes []netip.Prefix
	Gw       netip.Addr
	NHG      []byte // zebra's stream with a nexthop group
	Inline   []byte // without
	Replay   []byte // a second session's stream (another nexthop id)
	Config   []byte // the table as a config file
}

// routesIfaces maps the stream's interface index to the FIB's device.
func routesIfaces(i uint32) (string, bool) { return "eth0", i == 2 }

// routesPrefixes loads the first n prefixes of the full table (0: all).
func routesPrefixes(n int) ([]netip.Prefix, error) {
	all, err := fulltable.Load()
	if err != nil {
		return nil, err
	}
	if n > 0 && n < len(all) {
		all = all[:n]
	}
	return all, nil
}

// NewRoutesSetup loads n prefixes of the full table (0: all) and encodes them.
func NewRoutesSetup(n int) (*RoutesSetup, error) {
	all, err := routesPrefixes(n)
	if err != nil {
		return nil, err
	}
	s := &RoutesSetup{Prefixes: all, Gw: netip.MustParseAddr("192.0.2.254")}
	s.NHG = fpm.FullTableStream(all, s.Gw, 2, 13, true)
	s.Inline = fpm.FullTableStream(all, s.Gw, 2, 0, false)
	s.Replay = fpm.FullTableStream(all, s.Gw, 2, 99, true)
	var b bytes.Buffer
	b.Grow(len(all) * 56)
	for _, p := range all {
		fmt.Fprintf(&b, "route add %s via %s dev eth0 proto bgp metric 20\n", p, s.Gw)
	}
	s.Config = b.Bytes()
	return s, nil
}

// newRoutesFIB is the FIB every case starts from: the interface the
// routes' gateway is on.
func newRoutesFIB() *fib.FIB { return newRoutesFIBWith(fib.Options{}) }

// newRoutesFIBWith is newRoutesFIB with options (the daemon's: Compiled).
func newRoutesFIBWith(opts fib.Options) *fib.FIB {
	f := fib.New(opts)
	tx := f.Begin(1)
	if err := tx.AddAddress("eth0", netip.MustParsePrefix("192.0.2.1/24")); err != nil {
		panic(err)
	}
	tx.Commit()
	return f
}

// routesRun is one measured load.
type routesRun struct {
	wall, cpu time.Duration
	bytes     float64 // heap bytes per route after the load
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measureLoad runs load (which builds and returns a FIB) and reports time
// and the heap it left behind per route.
func measureLoad(routes int, load func() (any, error)) (routesRun, error) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	c0, t0 := cpuTime(), time.Now()
	keep, err := load()
	wall, cpu := time.Since(t0), cpuTime()-c0
	if err != nil {
		return routesRun{}, err
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	return routesRun{wall: wall, cpu: cpu, bytes: float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(routes)}, nil
}

// RoutesCases are the suite's loads by name; each returns what it built.
func (s *RoutesSetup) RoutesCases() map[string]func() (any, error) {
	applyFPM := func(stream []byte) func() (any, error) {
		return func() (any, error) {
			f := newRoutesFIB()
			tr := fpm.NewTranslator(fib.OwnerFPM, 1, routesIfaces, nil)
			if _, err := fpm.ApplyStream(f, tr, stream, 1<<30); err != nil {
				return nil, err
			}
			return f, expectRoutes(f, len(s.Prefixes))
		}
	}
	return map[string]func() (any, error){
		"config-load": func() (any, error) {
			f := newRoutesFIB()
			return f, apply.LoadFIB(f, "full.conf", bytes.NewReader(s.Config), len(s.Prefixes))
		},
		"fpm-nhg":    applyFPM(s.NHG),
		"fpm-inline": applyFPM(s.Inline),
		"fpm-tcp":    func() (any, error) { return s.viaTCP() },
	}
}

func expectRoutes(f *fib.FIB, n int) error {
	if got := f.Size(); got < n {
		return fmt.Errorf("FIB holds %d prefixes, want at least %d", got, n)
	}
	return nil
}

// loopbackFPM serves f with a real FPM server on loopback (the cases'
// interface mapping, no stale timer) and connects to it as zebra; the
// caller closes both.
func loopbackFPM(f *fib.FIB) (*fpm.Server, net.Conn, error) {
	srv, err := fpm.Listen("127.0.0.1:0", fpm.Options{FIB: f, Iface: routesIfaces, StaleTime: -1,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, nil, err
	}
	go srv.Serve()
	c, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		srv.Close()
		return nil, nil, err
	}
	return srv, c, nil
}

// viaTCP streams NHG to a real server over loopback and waits for the
// last frame to be applied.
func (s *RoutesSetup) viaTCP() (*fib.FIB, error) {
	f := newRoutesFIB()
	srv, c, err := loopbackFPM(f)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	defer c.Close()
	frames := uint64(len(s.Prefixes) + 1)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(s.NHG)
		errc <- err
	}()
	deadline := time.Now().Add(5 * time.Minute)
	for srv.Stats().Frames.Load() < frames {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("fpm-tcp: %d of %d frames after 5 minutes", srv.Stats().Frames.Load(), frames)
		}
		time.Sleep(200 * time.Microsecond)
	}
	if err := <-errc; err != nil {
		return nil, err
	}
	return f, expectRoutes(f, len(s.Prefixes))
}

// replay applies a second session's stream onto a loaded FIB.
func (s *RoutesSetup) replay(f *fib.FIB) (time.Duration, time.Duration, error) {
	tr := fpm.NewTranslator(fib.OwnerFPM, 2, routesIfaces, nil)
	c0, t0 := cpuTime(), time.Now()
	if _, err := fpm.ApplyStream(f, tr, s.Replay, 32768); err != nil {
		return 0, 0, err
	}
	wall, cpu := time.Since(t0), cpuTime()-c0
	if got := tr.C.RoutesUnchanged.Load(); got != uint64(len(s.Prefixes)) {
		return 0, 0, fmt.Errorf("replay: %d routes unchanged, want %d", got, len(s.Prefixes))
	}
	return wall, cpu, nil
}

// routesLoads are the loads of (a), each at every procs setting.
var routesLoads = []string{"config-load", "fpm-nhg", "fpm-inline", "fpm-tcp"}

// routesImpls are the suite's records' names, what --only takes.
var routesImpls = append(slices.Clone(routesLoads), "fpm-replay", "fpm-paced-replay", "fpm-paced-first",
	"daemon-paced-replay", "daemon-paced-first", "lookup-quiet", "lookup-churn", "traffic-steady", "traffic-churn", "bgp-e2e")

// pacedImpls are the cases of routes_paced.go.
var pacedImpls = []string{"fpm-paced-replay", "fpm-paced-first", "daemon-paced-replay", "daemon-paced-first"}

func runRoutes(o Options) ([]Record, error) {
	for _, impl := range o.Only {
		if !slices.Contains(routesImpls, impl) {
			return nil, fmt.Errorf("unknown case %q (have: %s)", impl, strings.Join(routesImpls, ","))
		}
	}
	n := o.Routes
	if n == 0 && o.Quick {
		n = 100_000
	}
	var recs []Record
	var prefixes []netip.Prefix
	if o.Wants(append(append(slices.Clone(routesLoads), "fpm-replay"), pacedImpls...)...) {
		s, err := NewRoutesSetup(n)
		if err != nil {
			return nil, err
		}
		if recs, err = runRoutesLoads(s, o); err != nil {
			return nil, err
		}
		prefixes = s.Prefixes
	} else {
		var err error
		if prefixes, err = routesPrefixes(n); err != nil {
			return nil, err
		}
	}
	churn, err := runChurnCases(prefixes, o)
	if err != nil {
		return nil, err
	}
	recs = append(recs, churn...)
	if o.Wants("bgp-e2e") {
		e2e, err := runBGPE2ECase(prefixes, o)
		if err != nil {
			return nil, err
		}
		recs = append(recs, e2e...)
	}
	return recs, nil
}

// runRoutesLoads measures the loads of (a) that Only lets run.
func runRoutesLoads(s *RoutesSetup, o Options) ([]Record, error) {
	routes := len(s.Prefixes)
	o.Log("%d prefixes; stream %d bytes with nexthop groups (%.1f per route), %d without", routes, len(s.NHG),
		float64(len(s.NHG))/float64(routes), len(s.Inline))
	cases := s.RoutesCases()
	procsList := []int{1, runtime.NumCPU()}
	if runtime.NumCPU() == 1 {
		procsList = procsList[:1]
	}
	var recs []Record
	record := func(impl string, procs int, wall, cpu time.Duration, bytes float64) {
		extra := map[string]any{"seconds": wall.Seconds(), "cpu_seconds": cpu.Seconds(),
			"routes_per_s": float64(routes) / wall.Seconds()}
		if bytes > 0 {
			extra["bytes_per_route"] = bytes
		}
		recs = append(recs, Record{Suite: "routes", Impl: impl, Params: map[string]any{"routes": routes, "procs": procs},
			NsOp: float64(wall.Nanoseconds()) / float64(routes), Mops: float64(routes) / wall.Seconds() / 1e6, Extra: extra})
		o.Log("%-12s procs=%d %7.3f s  %6.0f K routes/s  cpu %.3f s  %5.0f bytes/route", impl, procs, wall.Seconds(),
			float64(routes)/wall.Seconds()/1e3, cpu.Seconds(), bytes)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range procsList {
		runtime.GOMAXPROCS(procs)
		for _, impl := range routesLoads {
			if !o.Wants(impl) && (impl != "fpm-nhg" || !o.Wants("fpm-replay")) {
				continue
			}
			var kept any
			r, err := measureLoad(routes, func() (any, error) {
				v, err := cases[impl]()
				kept = v
				return v, err
			})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", impl, err)
			}
			record(impl, procs, r.wall, r.cpu, r.bytes)
			if impl == "fpm-nhg" {
				wall, cpu, err := s.replay(kept.(*fib.FIB))
				if err != nil {
					return nil, err
				}
				record("fpm-replay", procs, wall, cpu, 0)
			}
			kept = nil
		}
	}
	paced, err := s.pacedRecords(o)
	if err != nil {
		return nil, err
	}
	return append(recs, paced...), nil
}

// runChurnCases runs the cases of (c): churn for 60 s (quick: 10 s) each.
func runChurnCases(prefixes []netip.Prefix, o Options) ([]Record, error) {
	d := 60 * time.Second
	if o.Quick {
		d = 10 * time.Second
	}
	var recs []Record
	if o.Wants("lookup-quiet", "lookup-churn") {
		lc, err := runLookupChurn(prefixes, d, o)
		if err != nil {
			return nil, fmt.Errorf("lookup-churn: %w", err)
		}
		recs = lc.records()
		logLookupChurn(o, recs)
	}
	if !o.Wants("traffic-steady", "traffic-churn") {
		return recs, nil
	}
	tc, err := runTrafficChurn(prefixes, o)
	if errors.Is(err, errTrafficChurnSkipped) {
		o.Log("traffic-churn: skipped: %v", err)
		return append(recs, Record{Suite: "routes", Impl: "traffic-churn", Params: map[string]any{"churn_per_s": churnRate},
			Extra: map[string]any{"error": err.Error()}}), nil
	}
	if err != nil {
		return nil, fmt.Errorf("traffic-churn: %w", err)
	}
	trecs := tc.records()
	logTrafficChurn(o, trecs)
	return append(recs, trecs...), nil
}
