package bench

// xdpchild: the veth suite's I/O-only AF_XDP forwarders (the minimal one,
// xdpminimal.go, and pktio's reflector, reflector.go) run as their own
// process, `netfwd-bench bench-xdpfwd`, like netfwd itself: pinned as a whole
// (every thread of it, not only the loop's), its CPU time its own, no
// measurement loop or garbage collector of the benchmark beside it.
//
// Child (XDPForwarderMain): opens the forwarder in --netns, says
// "xdpfwd running mode=..." on stderr, forwards until SIGTERM. On SIGUSR1
// it writes its counters (fwdDiag, with a sequence number) to the --stats
// file (written beside and renamed, so a reader never sees half of it).
//
// Parent (startXDPChild): runs the bench executable (benchExe) pinned like a
// netfwd child, waits for the line, reads the counters by signalling and
// waiting for the next sequence number, stops it with SIGTERM.
//
// Locking: the child's loop runs on its own locked thread; its counters
// are atomics the main goroutine reads on a signal.

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/pktio/afxdp"
)

// xdpChildStats is the --stats file.
type xdpChildStats struct {
	Seq                                                  uint64
	Drops, FillEmpty, Sent, Kicks, KickAgain, Waits, Blk uint64
}

func (s xdpChildStats) diag() fwdDiag {
	return fwdDiag{drops: s.Drops, fillEmpty: s.FillEmpty, sent: s.Sent, kicks: s.Kicks, kickAgain: s.KickAgain, waits: s.Waits, blocked: s.Blk}
}

// XDPForwarderMain is `netfwd-bench bench-xdpfwd`: one of the veth suite's
// AF_XDP forwarders as a process of its own (the suite starts it). It
// returns the exit status.
func XDPForwarderMain(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench-xdpfwd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	impl := fs.String("impl", "minimal", "minimal or reflector")
	ns := fs.String("netns", "", "network namespace of the ports")
	in := fs.String("in", "", "ingress interface")
	out := fs.String("out", "", "egress interface")
	nh := fs.String("next-hop", "", "destination MAC of forwarded frames")
	statsFile := fs.String("stats", "", "file the counters are written to on SIGUSR1")
	ring := fs.Int("ring", 0, "ring entries (minimal: 4096; reflector: pktio's default)")
	batch := fs.Int("batch", 0, "frames per receive (default 256)")
	budget := fs.Int("budget", 0, "XDP_MAX_TX_SKB_BUDGET (default 256)")
	generic := fs.Bool("generic", false, "generic XDP instead of native")
	sndbuf := fs.Int("sndbuf", 0, "minimal: SO_SNDBUFFORCE of the egress socket (0: kernel default)")
	poll := fs.Bool("poll", false, "minimal: block in poll(2) after a turn that found nothing")
	napiBusy := fs.Int("napi-busy-poll", 0, "SO_BUSY_POLL µs with SO_PREFER_BUSY_POLL, the kernel's NAPI polled from the forwarder's thread (0: off)")
	napiDefer := fs.String("napi-defer", "", "DEFER,TIMEOUT_NS written to the ingress's napi_defer_hard_irqs and gro_flush_timeout")
	spin := fs.Duration("spin", 0, "reflector: afxdp.WorkerConfig.Spin (0: default, negative: none)")
	busyPoll := fs.Duration("busy-poll", 0, "reflector: afxdp.WorkerConfig.BusyPoll")
	fill := fs.Int("fill", 0, "reflector: afxdp.WorkerConfig.FillPerSocket")
	frames := fs.Int("frames", 0, "reflector: afxdp.WorkerConfig.Frames")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	nextHop, err := net.ParseMAC(*nh)
	if err != nil || *in == "" || *out == "" || *statsFile == "" {
		fmt.Fprintln(stderr, "bench-xdpfwd: --in, --out, --next-hop and --stats are required")
		return 2
	}
	var (
		mode  string
		diag  func() fwdDiag
		stop  func() error
		ended = make(chan error, 1)
	)
	var nd afxdp.NAPIDefer
	if *napiDefer != "" {
		d, t, ok := strings.Cut(*napiDefer, ",")
		n, err1 := strconv.Atoi(d)
		tns, err2 := strconv.Atoi(t)
		if !ok || err1 != nil || err2 != nil {
			fmt.Fprintf(stderr, "bench-xdpfwd: --napi-defer %q: want DEFER,TIMEOUT_NS\n", *napiDefer)
			return 2
		}
		nd = afxdp.NAPIDefer{HardIRQs: n, FlushTimeout: time.Duration(tns)}
	}
	switch *impl {
	case "minimal":
		if nd.HardIRQs > 0 { // its own code: through sysfs
			if err := setNAPIDefer(*ns, *in, nd); err != nil {
				fmt.Fprintln(stderr, "bench-xdpfwd:", err)
				return 1
			}
		}
		f, err := startMinimalIn(*ns, *in, *out, nextHop, minimalConfig{ring: *ring, batch: *batch, budget: *budget,
			sndbuf: *sndbuf, poll: *poll, generic: *generic, napiBusyPoll: *napiBusy})
		if err != nil {
			fmt.Fprintln(stderr, "bench-xdpfwd:", err)
			return 1
		}
		go func() {
			runtime.LockOSThread()
			ended <- f.run()
		}()
		mode, diag = f.mode(), f.diag
		stop = func() error {
			f.stop()
			return errors.Join(<-ended, f.close())
		}
	case "reflector":
		cfg := reflectorConfig{batch: *batch, worker: afxdp.WorkerConfig{RingSize: *ring, TxBudget: *budget,
			Spin: *spin, BusyPoll: *busyPoll, FillPerSocket: *fill, Frames: *frames,
			NAPIBusyPoll: time.Duration(*napiBusy) * time.Microsecond}}
		if *generic {
			cfg.port.Attach = afxdp.AttachGeneric
		}
		cfg.port.NAPIDefer = nd                                    // pktio's own way (netdev netlink)
		r, err := startReflector(*ns, *in, *out, nextHop, -1, cfg) // the process is pinned as a whole
		if err != nil {
			fmt.Fprintln(stderr, "bench-xdpfwd:", err)
			return 1
		}
		mode, diag, stop = r.Mode(), r.diag, r.stop // its loop's error comes with stop
	default:
		fmt.Fprintf(stderr, "bench-xdpfwd: --impl %q: want minimal or reflector\n", *impl)
		return 2
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, unix.SIGUSR1, unix.SIGTERM, unix.SIGINT)
	fmt.Fprintf(stderr, "xdpfwd running mode=%s\n", mode)
	var seq uint64
	for sig := range sigs {
		if sig != unix.SIGUSR1 {
			break
		}
		seq++
		if err := writeChildStats(*statsFile, seq, diag()); err != nil {
			fmt.Fprintln(stderr, "bench-xdpfwd:", err)
		}
	}
	if err := stop(); err != nil {
		fmt.Fprintln(stderr, "bench-xdpfwd:", err)
		return 1
	}
	return 0
}

// setNAPIDefer writes d to iface's napi_defer_hard_irqs and
// gro_flush_timeout in namespace ns (through ip netns exec, which mounts
// the namespace's sysfs), as xdpsock's documentation has it done. The
// topology is the suite's own and goes away with it.
func setNAPIDefer(ns, iface string, d afxdp.NAPIDefer) error {
	script := fmt.Sprintf("echo %d > /sys/class/net/%s/napi_defer_hard_irqs && echo %d > /sys/class/net/%s/gro_flush_timeout",
		d.HardIRQs, iface, d.FlushTimeout.Nanoseconds(), iface)
	if out, err := exec.Command("ip", "netns", "exec", ns, "sh", "-c", script).CombinedOutput(); err != nil {
		return fmt.Errorf("--napi-defer: %v: %s", err, out)
	}
	return nil
}

func writeChildStats(file string, seq uint64, d fwdDiag) error {
	b, err := json.Marshal(xdpChildStats{Seq: seq, Drops: d.drops, FillEmpty: d.fillEmpty, Sent: d.sent,
		Kicks: d.kicks, KickAgain: d.kickAgain, Waits: d.waits, Blk: d.blocked})
	if err != nil {
		return err
	}
	if err := os.WriteFile(file+".tmp", b, 0o644); err != nil {
		return err
	}
	return os.Rename(file+".tmp", file)
}

// xdpChild is the parent's handle on a bench-xdpfwd process.
type xdpChild struct {
	*childProc
	stats string
	seq   uint64
	mode  string
}

var xdpChildModeRE = regexp.MustCompile(`xdpfwd running mode=(.*)`)

// startXDPChild runs `netfwd-bench bench-xdpfwd --impl impl` forwarding from in
// to out in namespace ns, pinned to cpu (cpu < 0: not pinned), with extra
// arguments (knobs), and waits until it forwards.
func startXDPChild(impl, ns, in, out string, nextHop net.HardwareAddr, cpu int, extra []string) (*xdpChild, error) {
	exe, err := benchExe()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "netfwd-xdpfwd-")
	if err != nil {
		return nil, err
	}
	stats := filepath.Join(dir, "stats.json")
	args := append([]string{"bench-xdpfwd", "--impl", impl, "--netns", ns, "--in", in, "--out", out,
		"--next-hop", nextHop.String(), "--stats", stats}, extra...)
	p, m, err := startChild("bench-xdpfwd", exe, args, cpu, xdpChildModeRE)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	p.dir = dir
	return &xdpChild{childProc: p, stats: stats, mode: strings.TrimSpace(m[1])}, nil
}

// diag asks the child for its counters and waits for them (zero on
// failure: the figures are diagnostics, not the measurement).
func (c *xdpChild) diag() fwdDiag {
	c.seq++
	if err := c.cmd.Process.Signal(unix.SIGUSR1); err != nil {
		return fwdDiag{}
	}
	for range 2000 {
		if b, err := os.ReadFile(c.stats); err == nil {
			var s xdpChildStats
			if json.Unmarshal(b, &s) == nil && s.Seq >= c.seq {
				c.seq = s.Seq
				return s.diag()
			}
		}
		time.Sleep(time.Millisecond)
	}
	return fwdDiag{}
}
