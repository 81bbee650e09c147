package bench

// Suite ndr (root): the zero-loss throughput of RFC 2544 ("NDR", the
// highest rate at which not one frame is lost), the figure router users
// compare first, with a bursty generator, side by side for
//
//	linux            Linux ip_forward in the router namespace (the baseline)
//	netfwd-afpacket  `netfwd run` with its defaults (AF_PACKET on veth)
//	netfwd-afxdp     `netfwd run --io afxdp`
//	netfwd-afpacket-baseline  the defaults of a router binary built from an
//	                 earlier commit (NETFWD_NDR_BASELINE=EXE): before/after in one run
//	netfwd-afxdp-baseline     the same binary with --io afxdp
//
// each on its own copy of the veth suite's topology (vethnet.go: H1 ->
// R -> H2, a tc drop counter on H2). The generator is trafgen paced the
// way users pace it, `trafgen -P 1 -b RATEpps`: one sender that sends
// each second's frames back to back at its top speed and then sleeps the
// rest of the second, so a trial at rate R is a burst of R frames at the
// generator's ceiling (measured first, into a tc counter on R's ingress,
// and printed) once a second. A trial sends RATE x trial seconds; loss
// is the sender's device transmit counter minus H2's device receive
// counter (both `ip -s link`; IPv6 is off in the lab, so nothing else
// crosses; the forwarder's own frames toward H2 would only hide loss, and
// none are sent: the neighbour is permanent).
//
// Per forwarder: the loss curve (trials at fixed fractions of the
// generator's ceiling) and the NDR, a binary search between the highest
// lossless and the lowest lossy rate of the curve down to a resolution of
// 1 % of the ceiling (RFC 2544 section 26.1). Records:
//
//	IMPL  params point=curve, offered_pct: mops = offered rate; extra loss_pct, sent, received
//	IMPL  params point=ndr: mops = the NDR (0: none found above the lowest trial);
//	      extra ratio_linux, generator_pps, burst, trials
//
// Locking: none; one goroutine.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func init() {
	Register(Suite{Name: "ndr", Root: true, Run: runNDR,
		Doc: "RFC 2544 zero-loss rate (NDR) with bursty trafgen: Linux, netfwd AF_PACKET and AF_XDP; loss curve"})
}

// ndrPlan is how long the suite measures.
type ndrPlan struct {
	bursts   time.Duration // the burst train's length
	trial    time.Duration
	curve    []float64 // fractions of the generator's ceiling
	steps    int       // binary search steps at most
	resolver float64   // stop when the bracket is narrower than this fraction of the ceiling
}

func ndrPlanFor(opts Options) ndrPlan {
	if opts.Quick {
		// CI's form (TestNDRSuiteQuick, beside the combined test): every
		// part once, in about 40 s for the three forwarders.
		return ndrPlan{bursts: 3 * time.Second, trial: time.Second, curve: []float64{0.05, 0.5, 1}, steps: 2, resolver: 0.05}
	}
	return ndrPlan{bursts: 60 * time.Second, trial: 10 * time.Second, curve: []float64{0.005, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 1}, steps: 8, resolver: 0.01}
}

// ndrImpl is one forwarder of the suite.
type ndrImpl struct {
	name  string
	io    string // netfwd's --io ("": Linux)
	exe   string // the router binary ("": netfwdExe's)
	net   *vethNet
	child *netfwdChild
}

// ndrTrial is one paced trafgen run.
type ndrTrial struct {
	rate           float64 // trafgen's -b
	sent, received uint64
	took           time.Duration // trafgen's run, start to exit
}

// achieved is the rate the generator reached: above its ceiling -b asks
// for more than it sends.
func (t ndrTrial) achieved() float64 {
	if t.took <= 0 {
		return 0
	}
	return float64(t.sent) / t.took.Seconds()
}

func (t ndrTrial) lost() uint64 {
	if t.received >= t.sent {
		return 0
	}
	return t.sent - t.received
}

func (t ndrTrial) lossPct() float64 {
	if t.sent == 0 {
		return 0
	}
	return 100 * float64(t.lost()) / float64(t.sent)
}

func runNDR(opts Options) (recs []Record, err error) {
	if err := haveTrafgen(); err != nil {
		return nil, err
	}
	plan := ndrPlanFor(opts)
	gen, unpaced, err := ndrGeneratorCeiling(plan)
	if err != nil {
		return nil, fmt.Errorf("generator ceiling: %w", err)
	}
	burst := fmt.Sprintf("trafgen -P 1 -b RATEpps: each second's RATE frames back to back at up to %.3f Mpps (its paced sender's ceiling, measured), then idle until the second ends; "+
		"burst train: trafgen -n %d unpaced (TX_RING, up to %.3f Mpps), 3-300 ms apart", gen/1e6, ndrBurstFrames, unpaced/1e6)
	opts.Log("ndr: %s", burst)
	var impls []*ndrImpl
	for _, c := range []struct{ name, io string }{{"linux", ""}, {"netfwd-afpacket", "auto"}, {"netfwd-afxdp", "afxdp"}} {
		if opts.Wants(c.name) {
			impls = append(impls, &ndrImpl{name: c.name, io: c.io})
		}
	}
	// NETFWD_NDR_BASELINE=EXE: the same paths with a router binary built
	// from an earlier commit, in the same run (netfwd-afpacket-baseline,
	// netfwd-afxdp-baseline).
	if exe := os.Getenv("NETFWD_NDR_BASELINE"); exe != "" {
		if opts.Wants("netfwd-afpacket-baseline") {
			impls = append(impls, &ndrImpl{name: "netfwd-afpacket-baseline", io: "auto", exe: exe})
		}
		if opts.Wants("netfwd-afxdp-baseline") {
			impls = append(impls, &ndrImpl{name: "netfwd-afxdp-baseline", io: "afxdp", exe: exe})
		}
	}
	results := map[string]float64{}
	curves := map[string][]ndrTrial{}
	trains := map[string]ndrTrain{}
	for _, im := range impls {
		ndr, curve, train, err := im.run(plan, gen, opts)
		if err != nil {
			if im.io == "afxdp" && errors.Is(err, errIONotSupported) {
				opts.Log("ndr: %s: %v", im.name, err)
				continue
			}
			return recs, fmt.Errorf("%s: %w", im.name, err)
		}
		results[im.name], curves[im.name], trains[im.name] = ndr, curve, train
	}
	for _, im := range impls {
		curve, ok := curves[im.name]
		if !ok {
			continue
		}
		for _, tr := range curve {
			recs = append(recs, Record{Suite: "ndr", Impl: im.name,
				Params: map[string]any{"point": "curve", "offered_pct": round3(100 * tr.rate / gen)},
				Mops:   round4(tr.rate / 1e6), NsOp: round3(nsPer(tr.rate)),
				Extra: map[string]any{"loss_pct": round4(tr.lossPct()), "sent": tr.sent, "received": tr.received,
					"achieved_pps": round3(tr.achieved())}})
		}
		tr := trains[im.name]
		recs = append(recs, Record{Suite: "ndr", Impl: im.name,
			Params: map[string]any{"point": "bursts", "burst_frames": ndrBurstFrames, "gap_ms": "3-300", "burst_pps": round3(unpaced)},
			Mops:   round4(tr.achieved() / 1e6),
			Extra: map[string]any{"bursts": tr.bursts, "sent": tr.sent, "received": tr.received, "lost": tr.lost(),
				"seconds": round3(tr.took.Seconds())}})
		ndr := results[im.name]
		extra := map[string]any{"generator_pps": round3(gen), "generator_unpaced_pps": round3(unpaced), "burst": burst, "trial_s": plan.trial.Seconds(),
			// Lossless at the generator's top speed: the NDR is at least
			// this, and the generator, not the forwarder, is the limit.
			"generator_bound": ndr >= gen}
		if l := results["linux"]; l > 0 {
			extra["ratio_linux"] = round3(ndr / l)
		}
		recs = append(recs, Record{Suite: "ndr", Impl: im.name, Params: map[string]any{"point": "ndr"},
			Mops: round4(ndr / 1e6), NsOp: round3(nsPer(ndr)), Extra: extra})
	}
	printNDRTable(opts, impls, results, curves, trains, gen)
	return recs, nil
}

// ndrGeneratorCeiling is what one trafgen process pushes into R (a tc
// counter on R's ingress), paced (-b far above what it reaches: its paced
// sender, a sendto(2) a frame, never sleeps) and unpaced (its TX_RING
// sender, which the burst train uses).
func ndrGeneratorCeiling(plan ndrPlan) (paced, unpaced float64, err error) {
	n, err := newVethNet(countAtRouterTC, nil)
	if err != nil {
		return 0, 0, err
	}
	defer n.close()
	frames := uint64(plan.trial.Seconds() * 200_000)
	if _, err := n.measure(genSpec{frames: 20_000, procs: 1, warmup: true}, nil); err != nil {
		return 0, 0, err
	}
	for _, c := range []struct {
		pps float64
		out *float64
	}{{ndrNeverSleepRate, &paced}, {0, &unpaced}} {
		r, err := n.measure(genSpec{frames: frames, procs: 1, pps: c.pps}, nil)
		if err != nil {
			return 0, 0, err
		}
		if r.pps() <= 0 {
			return 0, 0, fmt.Errorf("the generator delivered nothing (%v)", r)
		}
		*c.out = r.pps()
	}
	return paced, unpaced, nil
}

// ndrNeverSleepRate is a -b rate no trafgen reaches: its paced sender
// (sendto(2) a frame) never sleeps, so what it delivers is that sender's
// ceiling.
const ndrNeverSleepRate = 100e6

// run measures one forwarder: the burst train, its loss curve, then the
// NDR search.
func (im *ndrImpl) run(plan ndrPlan, gen float64, opts Options) (ndr float64, curve []ndrTrial, train ndrTrain, err error) {
	dst := vethFAMAC
	if im.io == "" {
		dst = nil // Linux: R's own MAC
	}
	if im.net, err = newVethNet(countAtH2, dst); err != nil {
		return 0, nil, train, err
	}
	defer im.net.close()
	if im.io == "" {
		err = im.net.linuxRouter()
	} else {
		if im.exe != "" {
			im.child, err = startNetfwdExe(im.exe, im.net.r, im.net.netfwdConfig(), im.io, -1)
		} else {
			im.child, err = startNetfwd(im.net.r, im.net.netfwdConfig(), im.io, -1)
		}
		if err == nil {
			defer im.child.stop()
		}
	}
	if err != nil {
		return 0, nil, train, err
	}
	// Warm up (ARP, caches, the daemon's first frames), not counted.
	if _, err := im.trial(gen*0.05, time.Second/2); err != nil {
		return 0, nil, train, err
	}
	if train, err = im.burstTrain(plan.bursts); err != nil {
		return 0, nil, train, err
	}
	opts.Log("ndr: %-16s %d bursts of %d frames 3-300 ms apart in %v: lost %d of %d",
		im.name, train.bursts, ndrBurstFrames, train.took.Round(time.Millisecond), train.lost(), train.sent)
	lossless, lossy := 0.0, 0.0
	for _, f := range plan.curve {
		tr, err := im.trial(gen*f, plan.trial)
		if err != nil {
			return 0, nil, train, err
		}
		curve = append(curve, tr)
		opts.Log("ndr: %-16s %5.1f %% of the ceiling (-b %8.0f pps, reached %8.0f): lost %d of %d (%.4f %%)",
			im.name, 100*f, tr.rate, tr.achieved(), tr.lost(), tr.sent, tr.lossPct())
		if tr.lost() == 0 && tr.rate > lossless {
			lossless = tr.rate
		}
		if tr.lost() != 0 && (lossy == 0 || tr.rate < lossy) {
			lossy = tr.rate
		}
	}
	if lossy == 0 {
		return lossless, curve, train, nil // lossless up to the generator's ceiling
	}
	if lossless > lossy {
		lossless = 0 // not monotonic: search below the lowest lossy rate only
	}
	lo, hi := lossless, lossy
	for step := 0; step < plan.steps && hi-lo > plan.resolver*gen; step++ {
		mid := (lo + hi) / 2
		tr, err := im.trial(mid, plan.trial)
		if err != nil {
			return 0, nil, train, err
		}
		opts.Log("ndr: %-16s search %8.0f pps: lost %d of %d", im.name, mid, tr.lost(), tr.sent)
		if tr.lost() == 0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, curve, train, nil
}

// trial sends rate x d frames with trafgen -P 1 -b and counts.
func (im *ndrImpl) trial(rate float64, d time.Duration) (ndrTrial, error) {
	n := im.net
	tr := ndrTrial{rate: rate}
	frames := max(uint64(rate*d.Seconds()), 1)
	tx0, rx0, err := n.sentReceived()
	if err != nil {
		return tr, err
	}
	cmd := exec.Command("ip", "netns", "exec", n.h1, "trafgen", "--dev", n.h1if, "--conf", n.trafgenConf,
		"-n", strconv.FormatUint(frames, 10), "--no-sock-mem", "-P", "1", "-q", "-b", fmt.Sprintf("%.0fpps", max(rate, 1)))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return tr, fmt.Errorf("trafgen: %w", err)
	}
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(3*d + 30*time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		err = fmt.Errorf("did not finish within %v", 3*d+30*time.Second)
	}
	tr.took = time.Since(start)
	if err != nil {
		return tr, fmt.Errorf("trafgen: %v: %s", err, strings.TrimSpace(out.String()))
	}
	time.Sleep(200 * time.Millisecond) // frames in flight and in the rings
	tx1, rx1, err := n.sentReceived()
	if err != nil {
		return tr, err
	}
	tr.sent, tr.received = tx1-tx0, rx1-rx0
	if tr.sent < frames {
		return tr, fmt.Errorf("trafgen sent %d of %d frames", tr.sent, frames)
	}
	return tr, nil
}

// ndrBurstFrames is the burst of the burst train (issue 27's target: 1,500
// 64-byte frames at the generator's top speed, 3-300 ms apart, into an idle
// router).
const ndrBurstFrames = 1500

// ndrTrain is one burst train: its frames (rate unused) and bursts.
type ndrTrain struct {
	ndrTrial
	bursts int
}

// burstTrain runs trafgen -n 1500 (unpaced: back to back at its top
// speed) again and again, 3-300 ms apart (uniform, a fixed seed), for d,
// and counts what was lost over the whole train.
func (im *ndrImpl) burstTrain(d time.Duration) (ndrTrain, error) {
	n := im.net
	var tr ndrTrain
	tx0, rx0, err := n.sentReceived()
	if err != nil {
		return tr, err
	}
	rng := rand.New(rand.NewPCG(27, 1500))
	start := time.Now()
	for time.Since(start) < d {
		cmd := exec.Command("ip", "netns", "exec", n.h1, "trafgen", "--dev", n.h1if, "--conf", n.trafgenConf,
			"-n", strconv.Itoa(ndrBurstFrames), "--no-sock-mem", "-P", "1", "-q")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if out, err := cmd.CombinedOutput(); err != nil {
			return tr, fmt.Errorf("trafgen: %v: %s", err, strings.TrimSpace(string(out)))
		}
		tr.bursts++
		time.Sleep(time.Duration(3+rng.IntN(298)) * time.Millisecond)
	}
	tr.took = time.Since(start)
	time.Sleep(200 * time.Millisecond)
	tx1, rx1, err := n.sentReceived()
	if err != nil {
		return tr, err
	}
	tr.sent, tr.received = tx1-tx0, rx1-rx0
	if want := uint64(tr.bursts * ndrBurstFrames); tr.sent < want {
		return tr, fmt.Errorf("trafgen sent %d of %d frames", tr.sent, want)
	}
	return tr, nil
}

// sentReceived reads the devices' own counters: H1's transmitted and H2's
// received packets.
func (n *vethNet) sentReceived() (sent, received uint64, err error) {
	tx, err := linkStats(n.h1, n.h1if)
	if err != nil {
		return 0, 0, err
	}
	rx, err := linkStats(n.h2, n.h2if)
	return tx.Tx.Packets, rx.Rx.Packets, err
}

func printNDRTable(opts Options, impls []*ndrImpl, ndr map[string]float64, curves map[string][]ndrTrial, trains map[string]ndrTrain, gen float64) {
	var pcts []string
	for _, im := range impls {
		for _, tr := range curves[im.name] {
			p := fmt.Sprintf("%.1f%%", 100*tr.rate/gen)
			if !slices.Contains(pcts, p) {
				pcts = append(pcts, p)
			}
		}
	}
	head := fmt.Sprintf("%-16s %14s %10s %8s", "forwarder", "bursts lost", "NDR kpps", "x linux")
	for _, p := range pcts {
		head += fmt.Sprintf(" %9s", "loss@"+p)
	}
	opts.Log("%s", head)
	for _, im := range impls {
		c, ok := curves[im.name]
		if !ok {
			continue
		}
		x := ""
		if l := ndr["linux"]; l > 0 {
			x = fmt.Sprintf("%.2f", ndr[im.name]/l)
		}
		b := trains[im.name]
		line := fmt.Sprintf("%-16s %14s %10.1f %8s", im.name, fmt.Sprintf("%d/%d", b.lost(), b.sent), ndr[im.name]/1e3, x)
		for _, tr := range c {
			line += fmt.Sprintf(" %8.3f%%", tr.lossPct())
		}
		opts.Log("%s", line)
	}
	opts.Log("generator ceiling %.1f kpps (one trafgen, paced: -b); NDR = highest rate with 0 frames lost in a trial; an NDR at the ceiling is bound by the generator", gen/1e3)
}
