package bench

// Suite veth (root): Linux forwarding and netfwd forwarding on the same
// two-namespace topology, in one run.
//
//	S (generator on s0) --veth-- (fa) F (fb) --veth-- (d0) D (counter)
//
// F is first a Linux router (ip_forward, static neighbour: pktio's
// VethLinuxForward) and then runs netfwd in-process (internal/daemon, its
// ports fa and fb opened in F, routed ports 10.81.1.1/24 and 10.81.2.1/24,
// and the same permanent neighbour for 10.81.2.2 as the Linux router has,
// so both forwarders deliver the same frames to the same MAC, which no
// interface in D has: D's kernel drops them at once in both runs). The generator is pktio's Blaster (64-byte UDP, 16 flows, as fast as
// one goroutine pushes them through a TX ring); the counter is pktio's
// Sink. Records:
//
//	linux, netfwd        delivered Mpps at saturation (medians of interleaved
//	                     rounds; best round, offered rate, loss, CPU per frame
//	                     and netfwd/linux ratio in extra)
//	linux, netfwd        rate=50pct: the same offered rate, half of netfwd's
//	                     measured saturation; lost frames in extra (target 0)
//	linux-tcp,           iperf3 TCP through each forwarder (real TCP stacks in
//	netfwd-tcp           S and D, offloads on), Gbit/s in extra; skipped when
//	                     iperf3 is not installed
//	netfwd-soak          RSS and Go heap at the start and end of a run at 50%
//	                     of saturation (NETFWD_SOAK=10m for the 10-minute soak;
//	                     default 30 s, 3 s with --quick)
//
// Every figure of netfwd is measured against Linux in the same run on the
// same machine; the machine is shared, so rounds alternate the two.
//
// Locking: none; one goroutine runs the suite.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/netfwd/netfwd/internal/lab"
	"github.com/netfwd/netfwd/internal/vethlab"
)

func init() {
	Register(Suite{Name: "veth", Root: true, Run: runVeth,
		Doc: "Linux ip_forward vs netfwd between veth namespaces: 64-byte UDP Mpps and loss, iperf3 TCP, loss at 50%, RSS soak"})
}

// MACs netfwd uses on the benchmark's routed ports.
var (
	vethFAMAC = net.HardwareAddr{0x02, 0x6e, 0x66, 0x00, 0x01, 0x0a}
	vethFBMAC = net.HardwareAddr{0x02, 0x6e, 0x66, 0x00, 0x01, 0x0b}
)

// vethPlan is how long each part runs.
type vethPlan struct {
	rounds   int
	dur      time.Duration // one UDP measurement
	lossDur  time.Duration
	tcpDur   time.Duration
	tcpRound int
	soak     time.Duration
	workers  int
}

func planFor(opts Options) (vethPlan, error) {
	p := vethPlan{rounds: 5, dur: 3 * time.Second, lossDur: 5 * time.Second, tcpDur: 3 * time.Second, tcpRound: 3, soak: 30 * time.Second}
	if opts.Quick {
		p = vethPlan{rounds: 1, dur: time.Second, lossDur: time.Second, tcpDur: time.Second, tcpRound: 1, soak: 3 * time.Second}
	}
	if s := os.Getenv("NETFWD_SOAK"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return p, fmt.Errorf("NETFWD_SOAK=%q: want a duration such as 10m", s)
		}
		p.soak = d
	}
	return p, nil
}

// NetfwdVeth is the benchmark topology with netfwd running in F.
type NetfwdVeth struct {
	VB     *vethlab.Topology
	Router *lab.Router
}

// NewNetfwdVeth builds the topology and starts netfwd in F with workers
// receive queues per port (0: GOMAXPROCS).
func NewNetfwdVeth(workers int) (*NetfwdVeth, error) {
	vb, err := vethlab.NewTopology(vethlab.External)
	if err != nil {
		return nil, err
	}
	n := &NetfwdVeth{VB: vb}
	if err := n.start(workers); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

func (n *NetfwdVeth) start(workers int) error {
	vb := n.VB
	var err error
	conf := fmt.Sprintf(`# netfwd bench veth: F routes between two routed ports
link set %[1]s address %[2]s
address add 10.81.1.1/24 dev %[1]s
link set %[3]s address %[4]s
address add 10.81.2.1/24 dev %[3]s
neigh add %[5]s lladdr %[6]s dev %[3]s nud permanent
`, vb.FA, vethFAMAC, vb.FB, vethFBMAC, vethlab.DstIP, vethlab.FinalMAC)
	n.Router, err = lab.StartRouterConfig(vb.F, conf, lab.RouterOptions{Workers: workers, Metrics: "127.0.0.1:0"})
	if err != nil {
		return err
	}
	if err := n.Router.WaitUp([]string{vb.FA, vb.FB}, 5*time.Second); err != nil {
		return err
	}
	vb.BlastMAC = vethFAMAC
	return nil
}

// Close stops netfwd and removes the topology.
func (n *NetfwdVeth) Close() error {
	var errs []error
	if n.Router != nil {
		errs = append(errs, n.Router.Stop())
	}
	return errors.Join(append(errs, n.VB.Close())...)
}

// Losses reads netfwd's own loss counters from its metrics: frames its RX
// rings could not take (the kernel dropped them: the forwarder fell
// behind) and frames it did not transmit (batch full, refused, errors).
// Against the run's loss they say where frames were lost: in netfwd, or
// in the generator's or counter's rings.
func (n *NetfwdVeth) Losses() (ring, tx float64, err error) {
	m, err := lab.Scrape(nil, n.Router.MetricsURL())
	if err != nil {
		return 0, 0, err
	}
	ring = m.Sum("netfwd_pktio_ring_drops_total")
	tx = m.Sum("netfwd_port_tx_drops_total") + m.Sum("netfwd_pktio_errors_total", "kind", "tx_error") +
		m.Sum("netfwd_pktio_errors_total", "kind", "tx_refused")
	return ring, tx, nil
}

// measureLosses runs one measurement through netfwd and adds netfwd's own
// losses during it to extra.
func (n *NetfwdVeth) measureLosses(run vethlab.Run, measure func() (vethlab.Result, error), extra map[string]any) (vethlab.Result, error) {
	ring0, tx0, err := n.Losses()
	if err != nil {
		return vethlab.Result{}, err
	}
	r, err := measure()
	if err != nil {
		return r, err
	}
	ring1, tx1, err := n.Losses()
	if err != nil {
		return r, err
	}
	extra["netfwd_ring_drops"], extra["netfwd_tx_drops"] = int64(ring1-ring0), int64(tx1-tx0)
	return r, nil
}

// measureAllocs runs one measurement and counts the process's heap
// allocations per delivered frame.
func measureAllocs(vb *vethlab.Topology, run vethlab.Run) (vethlab.Result, float64, error) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r, err := vb.Measure(run)
	runtime.ReadMemStats(&after)
	allocs := 0.0
	if r.Delivered > 0 {
		allocs = float64(after.Mallocs-before.Mallocs) / float64(r.Delivered)
	}
	return r, allocs, err
}

func runVeth(opts Options) (recs []Record, err error) {
	plan, err := planFor(opts)
	if err != nil {
		return nil, err
	}
	linux, err := vethlab.NewTopology(vethlab.LinuxForward)
	if err != nil {
		return nil, err
	}
	defer linux.Close()
	nf, err := NewNetfwdVeth(plan.workers)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := nf.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()

	// Saturation, interleaved rounds.
	var lr, nr []vethlab.Result
	var nAllocs []float64
	for i := range plan.rounds {
		r, _, err := measureAllocs(linux, vethlab.Run{Duration: plan.dur})
		if err != nil {
			return nil, fmt.Errorf("linux: %w", err)
		}
		lr = append(lr, r)
		opts.Log("round %d/%d linux:  %v", i+1, plan.rounds, r)
		r, a, err := measureAllocs(nf.VB, vethlab.Run{Duration: plan.dur})
		if err != nil {
			return nil, fmt.Errorf("netfwd: %w", err)
		}
		nr, nAllocs = append(nr, r), append(nAllocs, a)
		opts.Log("round %d/%d netfwd: %v (%.3f allocs/frame)", i+1, plan.rounds, r, a)
	}
	lm, nm := medianVeth(lr), medianVeth(nr)
	sat := map[string]any{"frame": 64, "rate": "max"}
	recs = append(recs, vethRecord("linux", sat, lm, lr, 0, nil))
	recs = append(recs, vethRecord("netfwd", sat, nm, nr, median(nAllocs),
		map[string]any{"x_linux": round3(nm.DeliveredPPS / lm.DeliveredPPS)}))

	// Loss at half of netfwd's saturation, both forwarders.
	half := nm.DeliveredPPS / 2
	halfParams := map[string]any{"frame": 64, "rate": "50pct", "pps": int(half)}
	for _, impl := range []string{"linux", "netfwd"} {
		run := vethlab.Run{Duration: plan.lossDur, Rate: half}
		var r vethlab.Result
		var a float64
		extra := map[string]any{}
		if impl == "linux" {
			r, _, err = measureAllocs(linux, run)
		} else {
			r, err = nf.measureLosses(run, func() (vethlab.Result, error) {
				res, allocs, err := measureAllocs(nf.VB, run)
				a = allocs
				return res, err
			}, extra)
		}
		if err != nil {
			return nil, fmt.Errorf("%s at 50%%: %w", impl, err)
		}
		opts.Log("%s at %.0f pps (50%% of netfwd's saturation): %v %v", impl, half, r, extra)
		extra["lost"] = int64(r.Offered) - int64(r.Delivered)
		recs = append(recs, vethRecord(impl, halfParams, r, nil, a, extra))
	}

	// RSS over a soak at 50%.
	soak, err := soakRSS(nf, half, plan.soak, opts)
	if err != nil {
		return nil, err
	}
	recs = append(recs, soak)

	// TCP, when iperf3 is there.
	if !lab.HaveIperf3() {
		opts.Log("iperf3 not installed: TCP records skipped (apt-get install iperf3)")
		return recs, nil
	}
	tcp, err := vethTCP(plan, opts)
	if err != nil {
		return nil, err
	}
	return append(recs, tcp...), nil
}

func vethRecord(impl string, params map[string]any, m vethlab.Result, rounds []vethlab.Result, allocs float64, extra map[string]any) Record {
	e := map[string]any{
		"offered_mpps": round3(m.OfferedPPS / 1e6),
		"loss":         round4(m.Loss),
		"cpu_ns_frame": m.CPUPerFrame.Nanoseconds(),
	}
	if len(rounds) > 0 {
		best := rounds[0]
		for _, r := range rounds {
			if r.DeliveredPPS > best.DeliveredPPS {
				best = r
			}
		}
		e["best_mpps"] = round3(best.DeliveredPPS / 1e6)
		e["rounds"] = len(rounds)
	}
	if m.SinkRingDrops > 0 {
		e["sink_ring_drops"] = m.SinkRingDrops
	}
	for k, v := range extra {
		e[k] = v
	}
	ns := 0.0
	if m.DeliveredPPS > 0 {
		ns = 1e9 / m.DeliveredPPS
	}
	return Record{Suite: "veth", Impl: impl, Params: params, NsOp: round2(ns), Mops: round3(m.DeliveredPPS / 1e6), AllocsOp: round3(allocs), Extra: e}
}

// medianVeth is the round with the median delivered rate.
func medianVeth(rs []vethlab.Result) vethlab.Result {
	s := append([]vethlab.Result(nil), rs...)
	sort.Slice(s, func(i, j int) bool { return s[i].DeliveredPPS < s[j].DeliveredPPS })
	return s[len(s)/2]
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }
func round4(x float64) float64 { return float64(int64(x*10000+0.5)) / 10000 }

// soakRSS offers rate frames/s through netfwd for d and samples the
// process's RSS and live Go heap every second while it runs: the first
// sample (after a second, with every ring mapped and touched) against the
// last one is the growth over the soak. Each sample follows a forced GC:
// the generator's pacing (vethlab.Blaster.Run, a timer per batch of 256
// frames) makes garbage that would otherwise pile up until the GC's next
// target (twice the compiled FIB's 64 MiB table) and read as growth; what
// is left after a GC is what netfwd (and the tools) keep.
// NETFWD_SOAK_HEAPPROFILE=FILE writes an allocation profile of the soak
// (every allocation sampled) for finding what allocates.
func soakRSS(nf *NetfwdVeth, rate float64, d time.Duration, opts Options) (Record, error) {
	opts.Log("soak: %v at %.0f pps through netfwd", d, rate)
	if os.Getenv("NETFWD_SOAK_HEAPPROFILE") != "" {
		runtime.MemProfileRate = 1
		defer func() { runtime.MemProfileRate = 512 * 1024 }()
	}
	runtime.GC()
	type sample struct{ rss, heap, allocs uint64 }
	var samples []sample
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
				runtime.GC()
				samples = append(samples, sample{rssBytes(), liveHeapBytes(), heapAllocs()})
			}
		}
	}()
	losses := map[string]any{}
	run := vethlab.Run{Duration: d, Rate: rate}
	r, err := nf.measureLosses(run, func() (vethlab.Result, error) { return nf.VB.Measure(run) }, losses)
	close(stop)
	<-sampled
	if err != nil {
		return Record{}, fmt.Errorf("soak: %w", err)
	}
	if len(samples) < 2 {
		return Record{}, fmt.Errorf("soak: %v is too short to sample RSS twice", d)
	}
	first, last := samples[0], samples[len(samples)-1]
	var maxRSS uint64
	for _, s := range samples {
		maxRSS = max(maxRSS, s.rss)
	}
	allocsPerFrame := float64(last.allocs-first.allocs) / max(1, r.DeliveredPPS*float64(len(samples)-1))
	opts.Log("soak: %v %v; RSS %.1f -> %.1f MiB (max %.1f, %d samples), live Go heap %.2f -> %.2f MiB, %.4f allocs/frame in the process (generator included)", r,
		losses, mib(first.rss), mib(last.rss), mib(maxRSS), len(samples), mib(first.heap), mib(last.heap), allocsPerFrame)
	if f := os.Getenv("NETFWD_SOAK_HEAPPROFILE"); f != "" {
		runtime.GC()
		if w, err := os.Create(f); err == nil {
			pprof.Lookup("allocs").WriteTo(w, 0)
			w.Close()
		}
	}
	rec := vethRecord("netfwd-soak", map[string]any{"frame": 64, "rate": "50pct", "pps": int(rate), "duration": d.String()}, r, nil, allocsPerFrame,
		map[string]any{
			"rss_start_mib":  round2(mib(first.rss)),
			"rss_end_mib":    round2(mib(last.rss)),
			"rss_max_mib":    round2(mib(maxRSS)),
			"rss_growth_mib": round2(mib(last.rss) - mib(first.rss)),
			"heap_start_mib": round2(mib(first.heap)),
			"heap_end_mib":   round2(mib(last.heap)),
			"lost":           int64(r.Offered) - int64(r.Delivered),
		})
	return rec, nil
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// rssBytes is the process's resident set size (VmRSS).
func rssBytes() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// liveHeapBytes is the Go heap the last GC found live (no GC forced).
func liveHeapBytes() uint64 { return readMetric("/gc/heap/live:bytes") }

// heapAllocs counts the heap allocations so far.
func heapAllocs() uint64 { return readMetric("/gc/heap/allocs:objects") }

func readMetric(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// tcpSpec is S --fa-- F --fb-- D with real hosts, routed ports in F.
func tcpSpec() lab.Spec {
	return lab.Spec{Hosts: []lab.HostSpec{
		{Name: "S", Port: "fa", MAC: net.HardwareAddr{0x02, 0x6e, 0x66, 0x00, 0x02, 0x0a},
			Addr: mustPrefix("10.81.1.2/24"), Gateway: mustAddr("10.81.1.1"),
			RouterAddr: mustPrefix("10.81.1.1/24"), RouterMAC: vethFAMAC},
		{Name: "D", Port: "fb", MAC: net.HardwareAddr{0x02, 0x6e, 0x66, 0x00, 0x02, 0x0b},
			Addr: mustPrefix("10.81.2.2/24"), Gateway: mustAddr("10.81.2.1"),
			RouterAddr: mustPrefix("10.81.2.1/24"), RouterMAC: vethFBMAC},
	}}
}

// vethTCP measures iperf3 TCP through Linux and netfwd, interleaved.
func vethTCP(plan vethPlan, opts Options) (recs []Record, err error) {
	ln, err := lab.Build(tcpSpec())
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	if err := ln.LinuxRouter(); err != nil {
		return nil, err
	}
	nn, err := lab.Build(tcpSpec())
	if err != nil {
		return nil, err
	}
	defer nn.Close()
	r, err := lab.StartNetfwd(nn, lab.RouterOptions{Workers: plan.workers})
	if err != nil {
		return nil, err
	}
	if err := r.WaitUp(nn.Spec.RouterPorts(), 5*time.Second); err != nil {
		r.Stop()
		return nil, err
	}
	defer func() {
		if serr := r.Stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	dst := mustAddr("10.81.2.2")
	var lg, ng []float64
	var lret, nret []float64
	for i := range plan.tcpRound {
		for _, c := range []struct {
			name string
			n    *lab.Net
			g    *[]float64
			ret  *[]float64
		}{{"linux", ln, &lg, &lret}, {"netfwd", nn, &ng, &nret}} {
			res, err := lab.Iperf3(context.Background(), c.n.Host("S").NS, c.n.Host("D").NS, dst, plan.tcpDur)
			if err != nil {
				return nil, fmt.Errorf("%s tcp: %w", c.name, err)
			}
			*c.g, *c.ret = append(*c.g, res.Gbps), append(*c.ret, float64(res.Retransmits))
			opts.Log("tcp round %d/%d %s: %v", i+1, plan.tcpRound, c.name, res)
		}
	}
	params := map[string]any{"proto": "tcp", "streams": 1, "seconds": plan.tcpDur.Seconds()}
	lgm, ngm := median(lg), median(ng)
	recs = append(recs,
		Record{Suite: "veth", Impl: "linux-tcp", Params: params,
			Extra: map[string]any{"gbps": round2(lgm), "retransmits": median(lret), "rounds": plan.tcpRound}},
		Record{Suite: "veth", Impl: "netfwd-tcp", Params: params,
			Extra: map[string]any{"gbps": round2(ngm), "retransmits": median(nret), "rounds": plan.tcpRound,
				"x_linux": round3(ngm / lgm)}})
	return recs, nil
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func mustAddr(s string) netip.Addr     { return netip.MustParseAddr(s) }
