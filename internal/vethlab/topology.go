package vethlab

// Topology: the two-namespace forwarding topology of this package's
// benchmarks and of the daemon's veth tests, with the Linux baselines:
//
//	S (Blaster on s0) --veth-- (fa) F (fb) --veth-- (d0) D (Sink)
//
// The forwarder under test runs in F between fa and fb: Linux itself
// (ip_forward, or a bridge) or a program built on pktio. The sink
// counts delivered blaster frames in D; both sides use AF_PACKET rings, so
// the generator and counter cost the same in every run. Frames reach D
// addressed to a MAC no interface has (FinalMAC), so D's own
// stack drops them at once in every mode (PACKET_OTHERHOST).
//
// Locking: none; one goroutine drives a Topology.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/pktio"
)

// Mode is what forwards in F.
type Mode int

const (
	// External: nothing set up in F; the caller runs a forwarder
	// between FA and FB (L2: frames are addressed to FinalMAC already).
	External Mode = iota
	// LinuxForward: F routes (ip_forward=1) from 10.81.1.0/24 on fa to
	// 10.81.2.0/24 on fb, next hop 10.81.2.2 at FinalMAC (static neighbour).
	LinuxForward
	// LinuxBridge: fa and fb are ports of a Linux bridge in F.
	LinuxBridge
)

func (m Mode) String() string {
	switch m {
	case External:
		return "external"
	case LinuxForward:
		return "linux-ipforward"
	case LinuxBridge:
		return "linux-bridge"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Addresses of the topology.
var (
	SrcIP = netip.MustParseAddr("10.81.1.2")
	DstIP = netip.MustParseAddr("10.81.2.2")
	// FinalMAC is the destination MAC frames carry when they reach D.
	FinalMAC = net.HardwareAddr{0x02, 0x6e, 0x66, 0x00, 0x00, 0x02}
)

// Topology is one topology.
type Topology struct {
	Lab            *Lab
	Mode           Mode
	S, F, D        string // namespaces
	S0, FA, FB, D0 string // interfaces
	// BlastMAC is the destination MAC the blaster uses: FA's MAC when F
	// routes, FinalMAC otherwise.
	BlastMAC net.HardwareAddr
}

// NewTopology builds the topology for mode.
func NewTopology(mode Mode) (*Topology, error) {
	l, err := NewLab()
	if err != nil {
		return nil, err
	}
	v := &Topology{Lab: l, Mode: mode, BlastMAC: FinalMAC}
	if err := v.setup(); err != nil {
		l.Close()
		return nil, err
	}
	return v, nil
}

func (v *Topology) setup() error {
	l := v.Lab
	var err error
	for _, ns := range []struct {
		p      *string
		suffix string
	}{{&v.S, "S"}, {&v.F, "F"}, {&v.D, "D"}} {
		if *ns.p, err = l.AddNetns(ns.suffix); err != nil {
			return err
		}
	}
	if v.S0, v.FA, err = l.AddVeth(v.S, "s0", v.F, "fa"); err != nil {
		return err
	}
	if v.FB, v.D0, err = l.AddVeth(v.F, "fb", v.D, "d0"); err != nil {
		return err
	}
	steps := [][]string{}
	switch v.Mode {
	case LinuxForward:
		steps = [][]string{
			{v.S, "addr", "add", SrcIP.String() + "/24", "dev", v.S0},
			{v.F, "addr", "add", "10.81.1.1/24", "dev", v.FA},
			{v.F, "addr", "add", "10.81.2.1/24", "dev", v.FB},
			{v.F, "neigh", "add", DstIP.String(), "lladdr", FinalMAC.String(), "dev", v.FB, "nud", "permanent"},
		}
		if err := l.Sysctl(v.F, "net.ipv4.ip_forward", "1"); err != nil {
			return err
		}
	case LinuxBridge:
		br := l.Name("br")
		steps = [][]string{
			{v.F, "link", "add", br, "type", "bridge"},
			{v.F, "link", "set", v.FA, "master", br},
			{v.F, "link", "set", v.FB, "master", br},
			{v.F, "link", "set", br, "up"},
		}
	}
	for _, s := range steps {
		if err := l.IP(s[0], s[1:]...); err != nil {
			return err
		}
	}
	if v.Mode == LinuxForward {
		return pktio.InNetns(v.F, func() error {
			ifi, err := net.InterfaceByName(v.FA)
			if err == nil {
				v.BlastMAC = ifi.HardwareAddr
			}
			return err
		})
	}
	return nil
}

// Close removes the topology.
func (v *Topology) Close() error { return v.Lab.Close() }

// Run says how to drive one measurement.
type Run struct {
	Duration time.Duration // default 2s
	Warmup   time.Duration // default 200ms, not counted
	Rate     float64       // offered frames/s; 0 = as fast as the blaster goes
	FrameLen int           // default 60 (64 on the wire)
	Flows    int           // UDP source ports; default 16
}

// Result is one measurement.
type Result struct {
	Offered, Delivered uint64
	Elapsed            time.Duration
	OfferedPPS         float64
	DeliveredPPS       float64
	// Loss is the fraction of offered frames not delivered.
	Loss float64
	// SinkRingDrops are frames the sink's ring could not take (the counter
	// fell behind: the run measured the sink, not the forwarder).
	SinkRingDrops uint64
	// CPUPerFrame is the CPU time (user + system, softirq work done in our
	// threads' context included) this process spent per delivered frame:
	// blaster, sink and, when it runs in-process, the forwarder. Unlike the
	// rates it does not depend on how much of the machine other jobs took.
	CPUPerFrame time.Duration
}

func (r Result) String() string {
	return fmt.Sprintf("offered %.3f Mpps, delivered %.3f Mpps (%d of %d, loss %.2f%%) in %v, %v CPU/frame",
		r.OfferedPPS/1e6, r.DeliveredPPS/1e6, r.Delivered, r.Offered, 100*r.Loss, r.Elapsed.Round(time.Millisecond), r.CPUPerFrame)
}

// Measure blasts from S and counts in D.
func (v *Topology) Measure(run Run) (Result, error) {
	if run.Duration == 0 {
		run.Duration = 2 * time.Second
	}
	if run.Warmup == 0 {
		run.Warmup = 200 * time.Millisecond
	}
	if run.Flows == 0 {
		run.Flows = 16
	}
	var sink *Sink
	if err := pktio.InNetns(v.D, func() error {
		var err error
		sink, err = NewSink(SinkConfig{Iface: v.D0, Promiscuous: true})
		return err
	}); err != nil {
		return Result{}, err
	}
	sinkErr := make(chan error, 1)
	go func() { sinkErr <- sink.Run() }()
	var bl *Blaster
	if err := pktio.InNetns(v.S, func() error {
		var err error
		bl, err = NewBlaster(BlasterConfig{Iface: v.S0, DstMAC: v.BlastMAC, SrcIP: SrcIP, DstIP: DstIP,
			SrcPort: 10000, DstPort: 9, Flows: run.Flows, FrameLen: run.FrameLen})
		return err
	}); err != nil {
		sink.Close()
		return Result{}, err
	}
	defer bl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), run.Warmup)
	_, err := bl.Run(ctx, run.Rate)
	cancel()
	time.Sleep(50 * time.Millisecond) // let the warm-up drain
	base := sink.Packets()
	cpu0 := processCPU()
	start := time.Now()
	ctx, cancel = context.WithTimeout(context.Background(), run.Duration)
	sent, berr := bl.Run(ctx, run.Rate)
	cancel()
	elapsed := time.Since(start)
	time.Sleep(100 * time.Millisecond) // in flight: rings and backlogs
	delivered := sink.Packets() - base
	cpu := processCPU() - cpu0
	drops := sink.Port().Stats().Rx.RingDrops
	cerr := sink.Close()
	serr := <-sinkErr
	if err := errors.Join(err, berr, cerr, serr); err != nil {
		return Result{}, err
	}
	r := Result{Offered: sent, Delivered: delivered, Elapsed: elapsed, SinkRingDrops: drops,
		OfferedPPS: float64(sent) / elapsed.Seconds(), DeliveredPPS: float64(delivered) / elapsed.Seconds()}
	if sent > 0 && delivered < sent {
		r.Loss = float64(sent-delivered) / float64(sent)
	}
	if delivered > 0 {
		r.CPUPerFrame = cpu / time.Duration(delivered)
	}
	return r, nil
}

// processCPU is the user+system CPU time of this process so far.
func processCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
