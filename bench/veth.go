package bench

// Suite veth (root): forwarding between veth namespaces with a generator
// that is not the bottleneck (trafgen of netsniff-ng), every forwarder in
// the same run:
//
//	generator        trafgen into a tc drop counter on the router's ingress:
//	                 the generator's own CPU cost per frame (subtracted from
//	                 the forwarders' CPU figures)
//	ceiling          trafgen into an XDP_DROP counter on the router's
//	                 ingress: what no forwarder can exceed here
//	reflector        pktio's AF_XDP backend alone: MAC rewrite and TTL, no
//	                 engine (bench/reflector.go)
//	minimal          issue 11's minimal AF_XDP forwarder (xdpminimal.go), a
//	                 process of its own (xdpchild.go)
//	reflector-process  the reflector as a process of its own
//	linux            Linux ip_forward
//	netfwd-afpacket  `netfwd run --io afpacket` as a child process (its
//	                 default receive ring, TPACKET_V2)
//	netfwd-afpacket-v3  the same with --afpacket-ring v3
//	netfwd-afxdp     `netfwd run --io afxdp` as a child process
//
// in two set-ups, rounds interleaved (round by round, set-up by set-up,
// forwarder by forwarder): "unpinned" (trafgen on every CPU, the forwarder
// where the scheduler puts it, as a user runs it) and "onecore" (trafgen
// -P 1 on CPU 0, the forwarder on CPU 1; Linux forwards inline on CPU 0).
// Topology and measurement: vethnet.go. Records:
//
//	IMPL            params setup=..., rate=max: delivered Mpps (median of
//	                the rounds; best, ratio to linux and to the ceiling,
//	                CPU per forwarded frame in extra)
//	IMPL            rate=50pct: offered at half of the forwarder's own
//	                unpinned saturation; lost frames in extra
//	IMPL-tcp        iperf3, one TCP stream H1 -> H2 (hosts with offloads)
//	netfwd-IO-soak  RSS of the daemon over a run at 50% (NETFWD_SOAK)
//
// CPU per forwarded frame: the whole machine's non-idle time over the run
// (/proc/stat, the background before the run removed), minus the
// generator's own cost (measured per offered frame into the generator
// run's tc counter in the same set-up: the ceiling's native XDP sink would
// also charge veth's XDP receive path, NAPI and a page-pool copy per frame,
// to the generator), divided by the frames delivered; and the same from
// the CPU time of the processes involved (trafgen, the forwarder,
// ksoftirqd), which other jobs on a shared machine do not disturb.
//
// Locking: none; one goroutine runs the suite (the reflector has its own).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/netfwd/netfwd/internal/lab"
	"github.com/netfwd/netfwd/internal/pktio/afxdp"
)

func init() {
	Register(Suite{Name: "veth", Root: true, Run: runVeth,
		Doc: "trafgen through veth: ceiling, AF_XDP reflector, Linux ip_forward, netfwd AF_PACKET and AF_XDP; loss at 50%, iperf3, CPU per frame"})
}

// vethPlan is how much each part runs.
type vethPlan struct {
	rounds    int
	frames    uint64 // per saturation measurement
	warmup    uint64 // before each measurement, not counted
	lossDur   time.Duration
	tcpDur    time.Duration
	tcpRounds int
	soak      time.Duration
}

func planFor(opts Options) (vethPlan, error) {
	p := vethPlan{rounds: 3, frames: 1_000_000, warmup: 20_000, lossDur: 3 * time.Second,
		tcpDur: 3 * time.Second, tcpRounds: 3, soak: 15 * time.Second}
	if opts.Quick {
		p = vethPlan{rounds: 1, frames: 200_000, warmup: 5_000, lossDur: time.Second,
			tcpDur: time.Second, tcpRounds: 1}
	}
	if opts.Rounds > 0 {
		p.rounds = opts.Rounds
	}
	if opts.Frames > 0 {
		p.frames = opts.Frames
		p.warmup = min(p.warmup, max(opts.Frames/10, 1000))
	}
	if s := os.Getenv("NETFWD_SOAK"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return p, fmt.Errorf("NETFWD_SOAK=%q: want a duration such as 5m", s)
		}
		p.soak = d
	}
	return p, nil
}

// vethSetup is where the generator and the forwarder run.
type vethSetup struct {
	name  string
	procs int // trafgen processes (-P)
	cpu   int // the forwarder's CPU, -1: not pinned
}

func vethSetups() []vethSetup {
	s := []vethSetup{{name: "unpinned", procs: runtime.NumCPU(), cpu: -1}}
	if runtime.NumCPU() >= 2 {
		s = append(s, vethSetup{name: "onecore", procs: 1, cpu: 1})
	}
	return s
}

// selected reports whether name passes a --only or --setup list (empty: all).
func selected(list []string, name string) bool {
	return len(list) == 0 || slices.Contains(list, name)
}

// vethFwd is one forwarder under test on its own topology.
type vethFwd struct {
	impl string
	net  *vethNet
	// start runs the forwarder for one measurement (nil: nothing to run)
	// and returns how to stop it and how to read its CPU time.
	start       func(cpu int) (stop func() error, cpuTime func() time.Duration, err error)
	unsupported error
	runs        map[string][]runResult // by set-up
	mode        string                 // data path, when it says (reflector)
	// diag reads the forwarder's own counters so far, when it can say (the
	// reflector: its sockets' and worker's counters).
	diag func() fwdDiag
	// netfwd's backend and flags (netfwd forwarders only): the soak runs
	// the daemon as the measurements do.
	io    string
	flags []string
}

func newVethFwds() (fwds []*vethFwd, err error) {
	defer func() {
		if err != nil {
			closeFwds(fwds)
		}
	}()
	add := func(impl string, at counterAt, dst net.HardwareAddr) (*vethFwd, error) {
		n, err := newVethNet(at, dst)
		if err != nil {
			return nil, fmt.Errorf("%s topology: %w", impl, err)
		}
		f := &vethFwd{impl: impl, net: n, runs: map[string][]runResult{}}
		fwds = append(fwds, f)
		return f, nil
	}
	if _, err := add("generator", countAtRouterTC, nil); err != nil {
		return fwds, err
	}
	if _, err := add("ceiling", countAtRouterXDP, nil); err != nil {
		return fwds, err
	}
	refl, err := add("reflector", countAtH2, nil)
	if err != nil {
		return fwds, err
	}
	refl.start = func(cpu int) (func() error, func() time.Duration, error) {
		r, err := startReflector(refl.net.r, refl.net.ra, refl.net.rb, refl.net.h2MAC, cpu, reflectorConfig{})
		if err != nil {
			return nil, nil, err
		}
		refl.mode, refl.diag = r.Mode(), r.diag
		return r.stop, r.cpu, nil
	}
	// The same with generic XDP: on veth, native XDP moves ra's receive
	// path to one NAPI ring that a generator on several CPUs overruns (a
	// trafgen sender aborts); generic XDP runs in each sender's backlog.
	reflGeneric, err := add("reflector-generic", countAtH2, nil)
	if err != nil {
		return fwds, err
	}
	reflGeneric.start = func(cpu int) (func() error, func() time.Duration, error) {
		r, err := startReflector(reflGeneric.net.r, reflGeneric.net.ra, reflGeneric.net.rb, reflGeneric.net.h2MAC, cpu,
			reflectorConfig{port: afxdp.PortConfig{Attach: afxdp.AttachGeneric}})
		if err != nil {
			return nil, nil, err
		}
		reflGeneric.mode, reflGeneric.diag = r.Mode(), r.diag
		return r.stop, r.cpu, nil
	}
	// The same forwarders as processes of their own (xdpchild.go): the
	// minimal AF_XDP forwarder of issue 11 and pktio's reflector, pinned as
	// a whole like netfwd; and the variants NETFWD_BENCH_XDPFWD names.
	addChild := func(impl, kind string, extra []string) error {
		f, err := add(impl, countAtH2, nil)
		if err != nil {
			return err
		}
		f.start = func(cpu int) (func() error, func() time.Duration, error) {
			c, err := startXDPChild(kind, f.net.r, f.net.ra, f.net.rb, f.net.h2MAC, cpu, extra)
			if err != nil {
				return nil, nil, err
			}
			f.mode, f.diag = c.mode, c.diag
			return c.stop, c.cpu, nil
		}
		return nil
	}
	if err := addChild("minimal", "minimal", nil); err != nil {
		return fwds, err
	}
	if err := addChild("reflector-process", "reflector", nil); err != nil {
		return fwds, err
	}
	variants, err := xdpfwdVariants(os.Getenv("NETFWD_BENCH_XDPFWD"))
	if err != nil {
		return fwds, err
	}
	for _, v := range variants {
		if err := addChild(v.impl, v.kind, v.args); err != nil {
			return fwds, err
		}
	}
	linux, err := add("linux", countAtH2, nil)
	if err != nil {
		return fwds, err
	}
	if err := linux.net.linuxRouter(); err != nil {
		return fwds, err
	}
	for _, v := range netfwdVariants {
		f, err := add(v.impl, countAtH2, vethFAMAC)
		if err != nil {
			return fwds, err
		}
		f.io, f.flags = v.io, v.flags
		f.start = func(cpu int) (func() error, func() time.Duration, error) {
			c, err := startNetfwd(f.net.r, f.net.netfwdConfig(), v.io, cpu, v.flags...)
			if err != nil {
				return nil, nil, err
			}
			if v.io == "afxdp" {
				f.diag = c.diag
			}
			return c.stop, c.cpu, nil
		}
	}
	return fwds, nil
}

// netfwdVariant is one way the suite runs the daemon: its backend and flags.
type netfwdVariant struct {
	impl, io string
	flags    []string
}

// netfwdVariants are the daemon's forwarders of the suite; the TCP part
// runs those named in tcpVariants.
var netfwdVariants = []netfwdVariant{
	{"netfwd-afpacket", "afpacket", nil}, // the daemon's default ring, V2
	{"netfwd-afpacket-v3", "afpacket", []string{"--afpacket-ring", "v3"}},
	{"netfwd-afxdp", "afxdp", []string{"--xdp-mode", "auto"}},
	{"netfwd-afxdp-generic", "afxdp", []string{"--xdp-mode", "generic"}},
}

var tcpVariants = []string{"netfwd-afpacket", "netfwd-afpacket-v3", "netfwd-afxdp"}

// xdpfwdVariant is an extra child forwarder: `bench-xdpfwd --impl kind args`.
type xdpfwdVariant struct {
	impl, kind string
	args       []string
}

// xdpfwdVariants parses NETFWD_BENCH_XDPFWD, the A/B knob of the AF_XDP
// forwarders: "NAME=KIND ARGS...;..." adds a forwarder NAME (select it
// with --only) running `netfwd-bench bench-xdpfwd --impl KIND ARGS...`, e.g.
// "refl-busy=reflector --busy-poll 1s;min-poll=minimal --poll".
func xdpfwdVariants(env string) ([]xdpfwdVariant, error) {
	var vs []xdpfwdVariant
	for _, part := range strings.Split(env, ";") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		name, def, ok := strings.Cut(part, "=")
		fields := strings.Fields(def)
		name = strings.TrimSpace(name)
		if !ok || name == "" || len(fields) == 0 || fields[0] != "minimal" && fields[0] != "reflector" {
			return nil, fmt.Errorf("NETFWD_BENCH_XDPFWD: %q: want NAME=minimal|reflector ARGS...", part)
		}
		vs = append(vs, xdpfwdVariant{impl: name, kind: fields[0], args: fields[1:]})
	}
	return vs, nil
}

func closeFwds(fwds []*vethFwd) error {
	var errs []error
	for _, f := range fwds {
		errs = append(errs, f.net.close())
	}
	return errors.Join(errs...)
}

// once runs one measurement of f: start, warm up, measure, stop.
func (f *vethFwd) once(plan vethPlan, g genSpec, cpu int) (runResult, error) {
	stop := func() error { return nil }
	var cpuTime func() time.Duration
	if f.start != nil {
		s, c, err := f.start(cpu)
		if err != nil {
			return runResult{}, err
		}
		stop, cpuTime = s, c
	}
	w, err := f.net.measure(genSpec{frames: plan.warmup, procs: 1, pps: g.pps, warmup: true}, nil)
	if err == nil && w.delivered == 0 {
		err = fmt.Errorf("%s delivered none of %d warm-up frames", f.impl, w.offered)
	}
	var r runResult
	if err == nil {
		var d0 fwdDiag
		if f.diag != nil {
			d0 = f.diag()
		}
		r, err = f.net.measure(g, cpuTime)
		if f.diag != nil {
			r.diag, r.fwdDropsKnown = f.diag().sub(d0), true
			r.fwdDrops = r.diag.drops
		}
	}
	return r, errors.Join(err, stop())
}

func runVeth(opts Options) (recs []Record, err error) {
	if err := haveTrafgen(); err != nil {
		return nil, err
	}
	plan, err := planFor(opts)
	if err != nil {
		return nil, err
	}
	fwds, err := newVethFwds()
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := closeFwds(fwds); cerr != nil && err == nil {
			err = cerr
		}
	}()
	setups := slices.DeleteFunc(vethSetups(), func(s vethSetup) bool { return !selected(opts.Setups, s.name) })
	if len(setups) == 0 {
		return nil, fmt.Errorf("no set-up selected (have unpinned, onecore)")
	}
	for _, f := range fwds {
		if !selected(opts.Only, f.impl) {
			f.unsupported = errNotSelected
		}
	}

	if err := vethSaturate(plan, setups, fwds, opts); err != nil {
		return nil, err
	}
	recs, table := vethSaturationRecords(setups, fwds)

	if opts.SaturationOnly {
		printVethTable(opts, table)
		return recs, nil
	}

	loss, err := vethLoss50(plan, fwds, opts, table)
	if err != nil {
		return nil, err
	}
	recs = append(recs, loss...)

	if plan.soak > 0 {
		for _, f := range fwds {
			// Every netfwd forwarder that was measured unpinned (the soak
			// runs at half of that).
			if f.io == "" || f.unsupported != nil || len(f.runs["unpinned"]) == 0 {
				continue
			}
			rec, err := soakVeth(f, plan, opts)
			if err != nil {
				return nil, err
			}
			recs = append(recs, rec)
		}
	}

	if !lab.HaveIperf3() {
		opts.Log("iperf3 not installed: TCP records skipped (apt-get install iperf3)")
	} else {
		tcp, err := vethTCP(plan, opts)
		if err != nil {
			return nil, err
		}
		recs = append(recs, tcp...)
		for _, r := range tcp {
			impl := strings.TrimSuffix(r.Impl, "-tcp")
			for i := range table {
				if table[i].impl == impl && table[i].setup == "unpinned" {
					table[i].gbps, _ = r.Extra["gbps"].(float64)
				}
			}
		}
	}
	printVethTable(opts, table)
	return recs, nil
}

// vethSaturate runs the saturation rounds, interleaved: every round runs
// every set-up's every forwarder once. A forwarder whose I/O is not
// supported here is marked and skipped from then on.
func vethSaturate(plan vethPlan, setups []vethSetup, fwds []*vethFwd, opts Options) error {
	for round := range plan.rounds {
		for _, s := range setups {
			for _, f := range fwds {
				if f.unsupported != nil {
					continue
				}
				r, err := f.once(plan, genSpec{frames: plan.frames, procs: s.procs}, s.cpu)
				if errors.Is(err, errIONotSupported) {
					f.unsupported = err
					opts.Log("%s: %v", f.impl, err)
					continue
				}
				if err != nil {
					return fmt.Errorf("%s %s: %w", f.impl, s.name, err)
				}
				f.runs[s.name] = append(f.runs[s.name], r)
				opts.Log("round %d/%d %-8s %-20s %v", round+1, plan.rounds, s.name, f.impl, r)
			}
		}
	}
	return nil
}

// vethRefs are one set-up's reference figures the forwarders are compared
// with: the generator's own cost, and the medians of the reference
// forwarders.
type vethRefs struct {
	genCost, genProcCost                            float64 // ns per frame offered: machine, generator processes
	linux, ceiling, reflector, reflGeneric, minimal float64 // median pps
}

// vethSaturationRecords turns the saturation runs into records and table
// rows, per set-up and forwarder.
func vethSaturationRecords(setups []vethSetup, fwds []*vethFwd) (recs []Record, table []vethRow) {
	byImpl := map[string]*vethFwd{}
	for _, f := range fwds {
		byImpl[f.impl] = f
	}
	table = []vethRow{}
	for _, s := range setups {
		ref := vethRefs{
			genCost: medianOf(cpuRuns(byImpl["generator"].runs[s.name]), func(r runResult) float64 {
				return perFrame(r.machineCPU, r.offered)
			}),
			genProcCost: medianOf(byImpl["generator"].runs[s.name], func(r runResult) float64 {
				return perFrame(r.procCPU, r.offered)
			}),
			linux:       medianPPS(byImpl["linux"].runs[s.name]),
			ceiling:     medianPPS(byImpl["ceiling"].runs[s.name]),
			reflector:   medianPPS(byImpl["reflector"].runs[s.name]),
			reflGeneric: medianPPS(byImpl["reflector-generic"].runs[s.name]),
			minimal:     medianPPS(byImpl["minimal"].runs[s.name]),
		}
		for _, f := range fwds {
			if f.unsupported == errNotSelected {
				continue
			}
			if f.unsupported != nil {
				recs = append(recs, Record{Suite: "veth", Impl: f.impl, Params: map[string]any{"frame": 64, "rate": "max", "setup": s.name},
					Extra: map[string]any{"error": f.unsupported.Error()}})
				table = append(table, vethRow{impl: f.impl, setup: s.name, note: "not supported"})
				continue
			}
			rec, row := vethSaturationRecord(f, s, ref)
			recs = append(recs, rec)
			table = append(table, row)
		}
	}
	return recs, table
}

// vethSaturationRecord is one forwarder's saturation record in set-up s.
func vethSaturationRecord(f *vethFwd, s vethSetup, ref vethRefs) (Record, vethRow) {
	params := map[string]any{"frame": 64, "rate": "max", "setup": s.name}
	runs := f.runs[s.name]
	med := medianPPS(runs)
	extra := map[string]any{
		"rounds":          len(runs),
		"best_mpps":       round3(slices.MaxFunc(runs, func(a, b runResult) int { return cmpF(a.pps(), b.pps()) }).pps() / 1e6),
		"offered_mpps":    round3(medianOf(runs, func(r runResult) float64 { return float64(r.offered) / r.elapsed.Seconds() }) / 1e6),
		"x_linux":         ratio(med, ref.linux),
		"x_ceiling":       ratio(med, ref.ceiling),
		"background_cpus": round2(medianOf(runs, func(r runResult) float64 { return r.background })),
		// onecore: CPU 0's cost per frame offered (trafgen, veth's
		// receive and whatever the forwarder leaves on CPU 0).
		"gen_side_ns_frame": round2(medianOf(runs, func(r runResult) float64 { return perFrame(r.genSideCPU, r.offered) })),
	}
	if f.impl == "generator" {
		extra["gen_procs_cpu_ns_frame"] = round2(ref.genProcCost)
	} else {
		extra["procs_cpu_ns_frame"] = round2(medianOf(runs, func(r runResult) float64 {
			return perFrame(r.procCPU-time.Duration(ref.genProcCost*float64(r.offered)), r.delivered)
		}))
	}
	// Whole-machine CPU only from runs the machine had room for.
	if cr := cpuRuns(runs); len(cr) > 0 && ref.genCost > 0 {
		extra["cpu_rounds"] = len(cr)
		extra["machine_cpu_ns_frame"] = round2(medianOf(cr, func(r runResult) float64 {
			return perFrame(r.machineCPU, r.delivered)
		}))
		if f.impl == "generator" {
			extra["gen_cpu_ns_frame"] = round2(ref.genCost)
		} else {
			extra["cpu_ns_frame"] = round2(medianOf(cr, func(r runResult) float64 {
				return perFrame(r.machineCPU-time.Duration(ref.genCost*float64(r.offered)), r.delivered)
			}))
		}
	}
	if ref.minimal > 0 && f.impl != "minimal" {
		extra["x_minimal"] = ratio(med, ref.minimal)
	}
	if strings.HasPrefix(f.impl, "netfwd-") {
		extra["x_reflector"] = ratio(med, ref.reflector)
		if strings.HasSuffix(f.impl, "-generic") { // against the reflector on the same path
			extra["x_reflector"] = ratio(med, ref.reflGeneric)
		}
	}
	if f.mode != "" {
		extra["mode"] = f.mode
	}
	if n := countIf(runs, func(r runResult) bool { return r.genFailed }); n > 0 {
		extra["trafgen_aborts"] = n
	}
	if f.diag != nil {
		extra["fwd_drops"] = int64(medianOf(runs, func(r runResult) float64 { return float64(r.fwdDrops) }))
		extra["fill_ring_empty"] = int64(medianOf(runs, func(r runResult) float64 { return float64(r.diag.fillEmpty) }))
		extra["frames_per_kick"] = round2(medianOf(runs, func(r runResult) float64 { return ratioF(r.diag.sent, r.diag.kicks) }))
		extra["kick_eagain_per_kick"] = round3(medianOf(runs, func(r runResult) float64 { return ratioF(r.diag.kickAgain, r.diag.kicks) }))
		extra["wakeups_per_kframe"] = round3(medianOf(runs, func(r runResult) float64 { return 1000 * ratioF(r.diag.blocked, r.diag.sent) }))
	}
	rec := Record{Suite: "veth", Impl: f.impl, Params: params,
		NsOp: round2(nsPer(med)), Mops: round3(med / 1e6), Extra: extra}
	row := vethRow{impl: f.impl, setup: s.name, mpps: med / 1e6, best: extra["best_mpps"].(float64),
		xLinux: ratio(med, ref.linux), xCeiling: ratio(med, ref.ceiling)}
	if x, ok := extra["x_reflector"].(float64); ok {
		row.xRefl = x
	}
	if c, ok := extra["cpu_ns_frame"].(float64); ok {
		row.cpu = c
	}
	if c, ok := extra["procs_cpu_ns_frame"].(float64); ok {
		row.procsCPU = c
	}
	return rec, row
}

// vethLoss50 measures the loss at half of each forwarder's own unpinned
// saturation, and marks it in the table's unpinned rows.
func vethLoss50(plan vethPlan, fwds []*vethFwd, opts Options, table []vethRow) (recs []Record, err error) {
	for _, f := range fwds {
		if f.impl == "ceiling" || f.impl == "generator" || f.unsupported != nil {
			continue
		}
		pps := medianPPS(f.runs["unpinned"]) / 2
		g := genSpec{frames: uint64(pps * plan.lossDur.Seconds()), procs: 1, pps: pps}
		r, err := f.once(plan, g, -1)
		if err != nil {
			return recs, fmt.Errorf("%s at 50%%: %w", f.impl, err)
		}
		lost := int64(r.offered) - int64(r.delivered)
		opts.Log("%-16s at %.0f pps (50%% of its saturation): %v, lost %d", f.impl, pps, r, lost)
		recs = append(recs, Record{Suite: "veth", Impl: f.impl,
			Params: map[string]any{"frame": 64, "rate": "50pct", "pps": int(pps), "setup": "unpinned"},
			NsOp:   round2(nsPer(r.pps())), Mops: round3(r.pps() / 1e6),
			Extra: loss50Extra(r, lost)})
		for i := range table {
			if table[i].impl == f.impl && table[i].setup == "unpinned" {
				table[i].loss50, table[i].hasLoss = lossOf(r), true
			}
		}
	}
	return recs, nil
}

// fwdDiag are a forwarder's own counters (the reflector's).
type fwdDiag struct {
	drops, fillEmpty, sent, kicks, kickAgain, waits, blocked uint64
}

func (d fwdDiag) sub(o fwdDiag) fwdDiag {
	return fwdDiag{drops: d.drops - o.drops, fillEmpty: d.fillEmpty - o.fillEmpty, sent: d.sent - o.sent,
		kicks: d.kicks - o.kicks, kickAgain: d.kickAgain - o.kickAgain, waits: d.waits - o.waits, blocked: d.blocked - o.blocked}
}

func ratioF(a, b uint64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// errNotSelected marks a forwarder left out by Options.Only.
var errNotSelected = errors.New("not selected")

// vethRow is one line of the summary table.
type vethRow struct {
	impl, setup                  string
	mpps, best, xLinux, xCeiling float64
	xRefl                        float64
	cpu, procsCPU                float64
	loss50                       float64
	hasLoss                      bool
	gbps                         float64
	note                         string
}

func printVethTable(opts Options, rows []vethRow) {
	opts.Log("%-9s %-20s %9s %9s %8s %9s %8s %10s %10s %10s %9s", "setup", "forwarder", "Mpps", "best", "x linux", "x ceiling", "x refl", "ns/fr mach", "ns/fr proc", "loss@50%", "TCP Gb/s")
	for _, r := range rows {
		if r.note != "" {
			opts.Log("%-9s %-20s %s", r.setup, r.impl, r.note)
			continue
		}
		loss, cpu, pcpu, tcp := "", "", "", ""
		if r.hasLoss {
			loss = fmt.Sprintf("%.3f%%", 100*r.loss50)
		}
		if r.cpu != 0 {
			cpu = fmt.Sprintf("%.0f", r.cpu)
		}
		if r.procsCPU != 0 {
			pcpu = fmt.Sprintf("%.0f", r.procsCPU)
		}
		if r.gbps != 0 {
			tcp = fmt.Sprintf("%.2f", r.gbps)
		}
		opts.Log("%-9s %-20s %9.3f %9.3f %8.2f %9.2f %8.2f %10s %10s %10s %9s", r.setup, r.impl, r.mpps, r.best, r.xLinux, r.xCeiling, r.xRefl, cpu, pcpu, loss, tcp)
	}
}

// soakVeth runs netfwd at 50% of its unpinned saturation for plan.soak and
// samples the daemon's RSS every second.
func soakVeth(f *vethFwd, plan vethPlan, opts Options) (Record, error) {
	pps := medianPPS(f.runs["unpinned"]) / 2
	c, err := startNetfwd(f.net.r, f.net.netfwdConfig(), f.io, -1, f.flags...)
	if err != nil {
		return Record{}, err
	}
	opts.Log("soak: %s for %v at %.0f pps", f.impl, plan.soak, pps)
	var rss []uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				rss = append(rss, c.rssKiB())
			}
		}
	}()
	k0 := f.net.readKernelDrops()
	m0, _ := scrapeMetrics(c.metrics)
	r, err := f.net.measure(genSpec{frames: uint64(pps * plan.soak.Seconds()), procs: 1, pps: pps}, c.cpu)
	close(stop)
	<-sampled
	kernel := f.net.readKernelDrops().since(k0)
	var netfwd map[string]float64
	if m1, merr := scrapeMetrics(c.metrics); merr == nil && m0 != nil {
		netfwd = dropDeltas(m0, m1)
	}
	err = errors.Join(err, c.stop())
	if err != nil {
		return Record{}, fmt.Errorf("soak %s: %w", f.impl, err)
	}
	extra := map[string]any{"lost": int64(r.offered) - int64(r.delivered), "offered": r.offered, "duration": plan.soak.String(),
		"kernel_drops": kernel, "netfwd_drops": netfwd}
	if len(rss) >= 2 {
		extra["rss_start_kib"], extra["rss_end_kib"], extra["rss_max_kib"] = rss[0], rss[len(rss)-1], slices.Max(rss)
		extra["rss_growth_kib"] = int64(rss[len(rss)-1]) - int64(rss[0])
		// After the first tenth: rings and heap touched once are warm-up,
		// growth from there on would be a leak.
		extra["rss_growth_after_warmup_kib"] = int64(rss[len(rss)-1]) - int64(rss[len(rss)/10])
		var tenths []uint64 // the shape: a plateau or a slope
		for i := 0; i <= 10; i++ {
			tenths = append(tenths, rss[min(i*len(rss)/10, len(rss)-1)])
		}
		extra["rss_tenths_kib"] = tenths
	}
	opts.Log("soak: %s %v, RSS %v KiB (%v KiB after the first tenth; at each tenth %v KiB), netfwd drops %v, kernel drops %v",
		f.impl, r, extra["rss_growth_kib"], extra["rss_growth_after_warmup_kib"], extra["rss_tenths_kib"], netfwd, kernel)
	return Record{Suite: "veth", Impl: f.impl + "-soak",
		Params: map[string]any{"frame": 64, "rate": "50pct", "pps": int(pps), "duration": plan.soak.String()},
		NsOp:   round2(nsPer(r.pps())), Mops: round3(r.pps() / 1e6), Extra: extra}, nil
}

// tcpSpec is H1 --ra-- R --rb-- H2 with real hosts, routed ports in R.
func tcpSpec() lab.Spec {
	return lab.Spec{Hosts: []lab.HostSpec{
		{Name: "S", Port: "fa", MAC: net.HardwareAddr{0x02, 0x6e, 0x66, 0x00, 0x02, 0x0a},
			Addr: netip.MustParsePrefix("10.81.1.2/24"), Gateway: netip.MustParseAddr("10.81.1.1"),
			RouterAddr: netip.MustParsePrefix("10.81.1.1/24"), RouterMAC: vethFAMAC},
		{Name: "D", Port: "fb", MAC: net.HardwareAddr{0x02, 0x6e, 0x66, 0x00, 0x02, 0x0b},
			Addr: netip.MustParsePrefix("10.81.2.2/24"), Gateway: netip.MustParseAddr("10.81.2.1"),
			RouterAddr: netip.MustParsePrefix("10.81.2.1/24"), RouterMAC: vethFBMAC},
	}}
}

// vethTCP measures one iperf3 TCP stream through Linux and netfwd with each
// backend, rounds interleaved; netfwd runs as a child for each round.
func vethTCP(plan vethPlan, opts Options) (recs []Record, err error) {
	type tcpCase struct {
		impl        string
		v           *netfwdVariant // nil: Linux
		n           *lab.Net
		gbps, retr  []float64
		unsupported error
	}
	var cases []*tcpCase
	defer func() {
		for _, c := range cases {
			c.n.Close()
		}
	}()
	variants := []*netfwdVariant{nil} // Linux first: the baseline
	for i := range netfwdVariants {
		if slices.Contains(tcpVariants, netfwdVariants[i].impl) {
			variants = append(variants, &netfwdVariants[i])
		}
	}
	for _, v := range variants {
		spec := tcpSpec()
		// AF_XDP on veth: the hosts finish their own checksums (a veth
		// hands partial ones to XDP unmarked; docs/pktio.md), and with a
		// program attached the peer sends no GSO super-frames.
		spec.HostTxChecksumOff = v != nil && v.io == "afxdp"
		n, err := lab.Build(spec)
		if err != nil {
			return nil, err
		}
		c := &tcpCase{impl: "linux-tcp", v: v, n: n}
		cases = append(cases, c)
		if v == nil {
			if err := n.LinuxRouter(); err != nil {
				return nil, err
			}
		} else {
			c.impl = v.impl + "-tcp"
		}
	}
	dst := netip.MustParseAddr("10.81.2.2")
	for round := range plan.tcpRounds {
		for _, c := range cases {
			if c.unsupported != nil {
				continue
			}
			var child *netfwdChild
			if c.v != nil {
				child, err = startNetfwd(c.n.Router, c.n.Spec.Config(), c.v.io, -1, c.v.flags...)
				if errors.Is(err, errIONotSupported) {
					c.unsupported = err
					continue
				}
				if err != nil {
					return nil, err
				}
			}
			res, err := lab.Iperf3(context.Background(), c.n.Host("S").NS, c.n.Host("D").NS, dst, plan.tcpDur)
			if child != nil {
				err = errors.Join(err, child.stop())
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c.impl, err)
			}
			c.gbps, c.retr = append(c.gbps, res.Gbps), append(c.retr, float64(res.Retransmits))
			opts.Log("tcp round %d/%d %-20s %v", round+1, plan.tcpRounds, c.impl, res)
		}
	}
	params := map[string]any{"proto": "tcp", "streams": 1, "seconds": plan.tcpDur.Seconds()}
	linux := median(cases[0].gbps)
	for _, c := range cases {
		if c.unsupported != nil {
			recs = append(recs, Record{Suite: "veth", Impl: c.impl, Params: params,
				Extra: map[string]any{"error": c.unsupported.Error()}})
			continue
		}
		g := median(c.gbps)
		extra := map[string]any{"gbps": round2(g), "retransmits": median(c.retr), "rounds": len(c.gbps)}
		if c.n.Spec.HostTxChecksumOff {
			extra["hosts_tx_checksum_offload"] = "off"
		}
		if c.v != nil {
			extra["x_linux"] = ratio(g, linux)
		}
		recs = append(recs, Record{Suite: "veth", Impl: c.impl, Params: params, Extra: extra})
	}
	return recs, nil
}

func loss50Extra(r runResult, lost int64) map[string]any {
	e := map[string]any{"lost": lost, "loss": round4(lossOf(r)), "offered": r.offered,
		"offered_mpps": round3(float64(r.offered) / r.elapsed.Seconds() / 1e6)}
	if r.fwdDropsKnown {
		e["fwd_drops"] = r.fwdDrops
	}
	return e
}

func medianPPS(rs []runResult) float64 { return medianOf(rs, runResult.pps) }

// cpuRuns are the runs whose CPU accounting means something: other jobs
// kept less than half of the machine busy just before (the background is
// subtracted, but a machine already full leaves nothing to measure).
func cpuRuns(rs []runResult) []runResult {
	var out []runResult
	for _, r := range rs {
		if r.background < float64(runtime.NumCPU())/2 {
			out = append(out, r)
		}
	}
	return out
}

func medianOf(rs []runResult, f func(runResult) float64) float64 {
	xs := make([]float64, 0, len(rs))
	for _, r := range rs {
		xs = append(xs, f(r))
	}
	return median(xs)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	return s[len(s)/2]
}

func perFrame(d time.Duration, frames uint64) float64 {
	if frames == 0 {
		return 0
	}
	return float64(d.Nanoseconds()) / float64(frames)
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round3(a / b)
}

func nsPer(pps float64) float64 {
	if pps == 0 {
		return 0
	}
	return 1e9 / pps
}

func lossOf(r runResult) float64 {
	if r.offered == 0 || r.delivered >= r.offered {
		return 0
	}
	return float64(r.offered-r.delivered) / float64(r.offered)
}

func countIf(rs []runResult, f func(runResult) bool) int {
	n := 0
	for _, r := range rs {
		if f(r) {
			n++
		}
	}
	return n
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }
func round4(x float64) float64 { return float64(int64(x*10000+0.5)) / 10000 }
