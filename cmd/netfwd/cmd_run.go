package main

// `netfwd run --config FILE [--metrics ADDR] [--ctl SOCKET] [--io
// auto|afxdp|afpacket] [--pprof ADDR] [--workers N] [--fib trie|compiled]
// [--netns NAME] [--fpm ADDR:PORT [--fpm-allow-user USERS] [--fpm-allow-net
// PREFIXES]] [--mirror-kernel] [--host-path [--punt-echo]]`: the daemon
// (internal/daemon). --fpm listens for FRR zebra's FPM connection (only
// root's and the routing daemons' users may connect), --mirror-kernel follows the kernel's routes
// (docs/routes.md), --host-path gives the box's own daemons Linux twins of
// the router's interfaces (docs/hostpath.md). SIGHUP
// reloads the config file, SIGINT/SIGTERM shut down cleanly (exit 0) within
// shutdownLimit, or the process exits 1 anyway: a supervisor must always be
// able to stop it. An invalid config (every error as FILE:LINE: reason), a
// missing interface, a port another daemon holds or a listener that cannot
// be opened exits 1 with nothing started.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/netfwd/netfwd/internal/daemon"
	"github.com/netfwd/netfwd/internal/hostpath"
	"github.com/netfwd/netfwd/internal/pktio/afpacket"
	"github.com/netfwd/netfwd/internal/pktio/afxdp"
)

// Defaults of the command-line contract (design notes).
const (
	defaultMetrics = "127.0.0.1:9477"
	defaultCtl     = "/run/netfwd.sock"
)

// afterPause is daemon.Options.AfterPause: nil in netfwd; the end-to-end
// tests' binary sets it (a successor that stalls after the pause).
var afterPause func()

// shutdownLimit bounds a clean shutdown after SIGTERM/SIGINT.
const shutdownLimit = 10 * time.Second

const runUsage = "--config FILE [--metrics ADDR] [--ctl SOCKET] [--io auto|afxdp|afpacket] [--afpacket-ring v2|v3] [--xdp-mode auto|native|generic] [--xdp-busy-poll DURATION] [--pprof ADDR] [--workers N] [--fib trie|compiled] [--netns NAME] [--fpm ADDR:PORT [--fpm-allow-user USERS] [--fpm-allow-net PREFIXES]] [--mirror-kernel] [--host-path [--punt-echo] [--twin-name IFACE=NAME] [--punt-limit CLASS=RATE[/BURST]]] [--takeover]"

func init() {
	register(command{
		name:  "run",
		usage: runUsage,
		run:   runDaemon,
	})
}

// off maps the "disabled" spellings of a listener flag to "".
func off(s string) string {
	if s == "off" || s == "none" || s == "-" {
		return ""
	}
	return s
}

func runDaemon(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := fs.String("config", "", "config file (ip -batch syntax)")
	metricsAddr := fs.String("metrics", defaultMetrics, "listen address of /metrics (off: none)")
	pprofAddr := fs.String("pprof", "", "listen address of /debug/pprof/ (default: none)")
	ctlPath := fs.String("ctl", defaultCtl, "control socket path (off: none)")
	ioKind := fs.String("io", "auto", "packet I/O: auto, afxdp or afpacket")
	xdpMode := fs.String("xdp-mode", "auto", "AF_XDP ports: how the steering program attaches: auto (native, else generic), native or generic")
	xdpBusy := fs.Duration("xdp-busy-poll", 0, "AF_XDP workers: while traffic flows, spin this long on the rings before parking in the netpoller (0: pktio's default)")
	afpRing := fs.String("afpacket-ring", "v2", "AF_PACKET receive ring: v2 (a slot per frame, handed over at once: low latency, TCP) or v3 (frames packed in blocks handed over when full or after 1 ms: more 64-byte frames per second; docs/pktio.md)")
	workers := fs.Int("workers", 0, "datapath workers = receive queues per port (0: GOMAXPROCS)")
	fibKind := fs.String("fib", "compiled", "FIB lookup structure: compiled or trie (they answer identically)")
	netns := fs.String("netns", "", "open the ports in this named network namespace")
	fpmAddr := fs.String("fpm", "", "listen for FRR zebra's FPM connection on ADDR:PORT (in the ports' namespace; zebra: fpm address 127.0.0.1 port 2620)")
	var fpmUsers []string
	fs.Func("fpm-allow-user", "with --fpm: users (names or uids, comma-separated) whose local connections may speak FPM (default: 0, frr and bird where they exist; repeatable)", func(v string) error {
		for _, u := range strings.Split(v, ",") {
			if u = strings.TrimSpace(u); u != "" {
				fpmUsers = append(fpmUsers, u)
			}
		}
		return nil
	})
	var fpmNets []netip.Prefix
	fs.Func("fpm-allow-net", "with --fpm: networks (comma-separated prefixes) from which peers on other hosts may speak FPM (default: none; repeatable)", func(v string) error {
		for _, n := range strings.Split(v, ",") {
			p, err := netip.ParsePrefix(strings.TrimSpace(n))
			if err != nil {
				return err
			}
			fpmNets = append(fpmNets, p.Masked())
		}
		return nil
	})
	mirror := fs.Bool("mirror-kernel", false, "follow the kernel's routes, nexthops and neighbours of the ports' namespace")
	hostPath := fs.Bool("host-path", false, "give every router interface a Linux twin (nf-PORT) for the box's own daemons (docs/hostpath.md)")
	puntEcho := fs.Bool("punt-echo", false, "with --host-path: the kernel answers pings to the router, not netfwd")
	twinNames := map[string]string{}
	fs.Func("twin-name", "with --host-path: IFACE=NAME names IFACE's twin (default nf-IFACE; repeatable)", func(v string) error {
		dev, name, ok := strings.Cut(v, "=")
		if !ok || dev == "" || name == "" {
			return fmt.Errorf("want IFACE=NAME, got %q", v)
		}
		twinNames[dev] = name
		return nil
	})
	takeover := fs.Bool("takeover", false, "hot restart: take the ports over from the netfwd running with the same --ctl while it forwards (netfwd restart runs this; docs/reliability.md, \"Hot restart\")")
	var limits hostpath.Limits
	fs.Func("punt-limit", "with --host-path: CLASS=RATE[/BURST] punt limit of every twin, frames/s (classes neigh, routing, other; repeatable)", func(v string) error {
		return parsePuntLimit(&limits, v)
	})
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *cfg == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: netfwd run "+runUsage)
		return 2
	}
	attach, ok := map[string]afxdp.Attach{"auto": afxdp.AttachAuto, "native": afxdp.AttachNative,
		"generic": afxdp.AttachGeneric}[*xdpMode]
	if !ok || *xdpBusy < 0 {
		fmt.Fprintf(stderr, "netfwd run: --xdp-mode %q --xdp-busy-poll %v: want auto, native or generic and a duration >= 0\n", *xdpMode, *xdpBusy)
		return 2
	}
	ring, ok := map[string]afpacket.Ring{"v3": afpacket.RingV3, "v2": afpacket.RingV2}[*afpRing]
	if !ok {
		fmt.Fprintf(stderr, "netfwd run: --afpacket-ring %q: want v3 or v2\n", *afpRing)
		return 2
	}
	xdpPort := afxdp.PortConfig{Attach: attach}
	// No NAPI busy polling (afxdp.WorkerConfig.NAPIBusyPoll, NAPIDefer): the
	// daemon offered it as --xdp-napi-busy-poll until it measured 0.09-0.14
	// Mpps against 0.6 without it on veth (docs/bench-veth.md, "NAPI busy
	// polling removed").
	xdpWorker := afxdp.WorkerConfig{BusyPoll: *xdpBusy}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	status := takeoverStatus(*takeover) // netfwd restart's status pipe (cmd_restart.go)
	d, err := daemon.New(daemon.Options{Running: status.running, ConfigFile: *cfg, Metrics: off(*metricsAddr), Pprof: off(*pprofAddr),
		Ctl: off(*ctlPath), IO: *ioKind, Workers: *workers, FIB: *fibKind, Netns: *netns, Logger: log,
		FPM: off(*fpmAddr), FPMAllowUsers: fpmUsers, FPMAllowNets: fpmNets, MirrorKernel: *mirror, HostPath: *hostPath, PuntEcho: *puntEcho,
		TwinNames: twinNames, PuntLimits: limits, TwinKeeper: []string{"/proc/self/exe", "twins", "keep"},
		XDPPort: xdpPort, XDPWorker: xdpWorker, PktIO: afpacket.Config{Ring: ring}, Takeover: *takeover, AfterPause: afterPause})
	if err != nil {
		fmt.Fprintf(stderr, "netfwd run: %v\n", err)
		status.failed(err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-hup:
				d.Reload() // logs its outcome; a refused file keeps the running config
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		<-ctx.Done()
		time.Sleep(shutdownLimit)
		fmt.Fprintf(stderr, "netfwd run: shutdown did not finish within %v; exiting\n", shutdownLimit)
		os.Exit(1)
	}()
	if err := d.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "netfwd run: %v\n", err)
		status.failed(err)
		return 1
	}
	return 0
}

// parsePuntLimit reads CLASS=RATE[/BURST] (burst default: a fifth of a
// second's worth, at least 1).
func parsePuntLimit(l *hostpath.Limits, v string) error {
	name, val, ok := strings.Cut(v, "=")
	c, known := hostpath.ParseClass(name)
	if !ok || !known {
		return fmt.Errorf("want CLASS=RATE[/BURST] with CLASS neigh, routing or other, got %q", v)
	}
	rate, burst, hasBurst := strings.Cut(val, "/")
	r, err := strconv.ParseFloat(rate, 64)
	if err != nil || r <= 0 || math.IsNaN(r) {
		return fmt.Errorf("%s: rate %q is not a positive number", name, rate)
	}
	b := max(1, int(r/5))
	if hasBurst {
		if b, err = strconv.Atoi(burst); err != nil || b < 1 {
			return fmt.Errorf("%s: burst %q is not a positive integer", name, burst)
		}
	}
	l[c] = hostpath.Limit{Rate: r, Burst: b}
	return nil
}
