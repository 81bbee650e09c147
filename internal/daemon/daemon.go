// Package daemon is `netfwd run`: the engine on real Linux interfaces, with
// metrics, a control socket, carrier following and config reloads.
//
// Flow: New reads and checks the config file on the engine before anything
// is opened (every error as FILE:LINE: reason), opens every port the config
// names (pktio, one fanout group of Workers queues per port; all or none),
// follows their carrier, and binds the metrics and control listeners. Run
// starts one goroutine per (port, queue) (queue.go), a housekeeping
// goroutine (Tick every 100 ms), the link monitor (linkmon.go) and the
// servers, and tears everything down when its context ends. Reload
// (reload.go) applies the difference to a new version of the file.
//
// Locking: mu guards the port list, the running state and the loaded
// commands; reloadMu serialises reloads (SIGHUP, ctl). The datapath reads
// the port table through an atomic pointer and takes no lock.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/control"
	"github.com/netfwd/netfwd/internal/ctl"
	"github.com/netfwd/netfwd/internal/metrics"
	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
)

// Options configure a daemon.
type Options struct {
	// ConfigFile is the config (ip -batch syntax); required.
	ConfigFile string
	// Metrics is the HTTP listen address of /metrics and /debug/pprof/
	// ("" = none).
	Metrics string
	// Ctl is the control socket path ("" = none).
	Ctl string
	// Workers is the number of receive queues per port (0: GOMAXPROCS).
	Workers int
	// FIB is the lookup structure kind ("" = "compiled"); see RegisterFIB.
	FIB string
	// Netns is the named network namespace whose interfaces are opened
	// ("" = the caller's). Listeners stay in the caller's namespace.
	Netns string
	// Logger receives operational messages (nil: text on stderr).
	Logger *slog.Logger
	// Clock is the engine's clock (nil: monotonic).
	Clock l2.Clock
	// PktIO is the template of every port's pktio configuration (Queues is
	// set from Workers).
	PktIO pktio.Config
	// NoLinkMonitor disables carrier following (tests).
	NoLinkMonitor bool
	// TickInterval is the housekeeping period (0: 100 ms).
	TickInterval time.Duration
	// FPM is the listen address of the FPM server for FRR's zebra, opened
	// in the daemon's namespace ("" = none; routes.go).
	FPM string
	// MirrorKernel follows the kernel's routes in the daemon's namespace.
	MirrorKernel bool
	// IfaceMap maps kernel interface indices of the daemon's namespace to
	// netfwd devices for FPM and mirrored routes (nil: by name).
	IfaceMap func(ifindex uint32) (dev string, ok bool)
}

// FIBSetup prepares the engine for one --fib kind: Options adjusts the
// engine options before the engine exists, Attach (may be nil) hooks a
// derived lookup structure to it afterwards.
type FIBSetup struct {
	Options func(*l3.EngineOptions)
	Attach  func(*l3.Engine) error
}

var fibKinds = map[string]FIBSetup{
	"trie": {Options: func(o *l3.EngineOptions) { o.Trie = fib.TrieFast }},
	// compiled: lookups through the DIR-24-8 structure that follows the
	// merged trie (64 MiB); it answers exactly as the trie does.
	"compiled": {Options: func(o *l3.EngineOptions) { o.Trie, o.Compiled = fib.TrieFast, true }},
}

// RegisterFIB adds a --fib kind (the compiled FIB registers "compiled"
// from its own file when it is built in).
func RegisterFIB(name string, s FIBSetup) { fibKinds[name] = s }

// Daemon is one running router.
type Daemon struct {
	opts Options
	log  *slog.Logger
	e    *l3.Engine
	ctl  *control.Controller

	metricsLn net.Listener
	ctlSrv    *ctl.Server

	ports atomic.Pointer[portTable] // read by workers

	mu      sync.Mutex
	cmds    []config.Command // the file as last applied; guarded by mu
	running bool             // guarded by mu
	stopped bool             // guarded by mu
	stop    chan struct{}    // closed when Run winds down
	wg      sync.WaitGroup   // worker goroutines

	reloadMu sync.Mutex

	linkmon *linkMonitor
	routes  routeSources // routes.go
}

// New checks the config, opens the ports and binds the listeners. Nothing
// forwards until Run. On error nothing is left open.
func New(opts Options) (d *Daemon, err error) {
	if opts.ConfigFile == "" {
		return nil, errors.New("no config file given")
	}
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	if opts.FIB == "" {
		opts.FIB = "compiled"
	}
	if opts.TickInterval <= 0 {
		opts.TickInterval = 100 * time.Millisecond
	}
	setup, ok := fibKinds[opts.FIB]
	if !ok {
		return nil, fmt.Errorf("--fib %s: not built in (available: %s)", opts.FIB, fibNames())
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	cmds, err := readConfig(opts.ConfigFile)
	if err != nil {
		return nil, err
	}
	eo := l3.EngineOptions{Clock: opts.Clock}
	setup.Options(&eo)
	e := l3.NewEngine(eo)
	if setup.Attach != nil {
		if err := setup.Attach(e); err != nil {
			return nil, fmt.Errorf("--fib %s: %w", opts.FIB, err)
		}
	}
	nd := &Daemon{opts: opts, log: log, e: e, ctl: control.New(e), cmds: cmds, stop: make(chan struct{})}
	nd.ports.Store(&portTable{})
	defer func() {
		if err != nil {
			nd.closeAll()
		}
	}()
	d = nd
	// Carrier first, so the config is applied with the real link states.
	names, err := portNames(cmds, eo)
	if err != nil {
		return nil, err
	}
	opened, err := d.openPorts(names)
	if err != nil {
		return nil, err
	}
	defer func() { // opened but not yet in the port table
		for _, p := range opened {
			if err != nil {
				p.io.Close()
			}
		}
	}()
	for _, p := range opened {
		if _, err := d.ctl.SetCarrier(p.name, p.carrier); err != nil {
			return nil, err
		}
	}
	if err := d.ctl.Apply(cmds); err != nil {
		return nil, err
	}
	if err := d.addPorts(opened); err != nil {
		return nil, err
	}
	opened = nil
	if !opts.NoLinkMonitor {
		if d.linkmon, err = newLinkMonitor(opts.Netns); err != nil {
			return nil, fmt.Errorf("link monitor: %w", err)
		}
	}
	if opts.Metrics != "" {
		if d.metricsLn, err = net.Listen("tcp", opts.Metrics); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	if opts.Ctl != "" {
		if d.ctlSrv, err = ctl.Listen(opts.Ctl, ctl.Handler{Ctl: d.ctl, Reload: d.Reload}); err != nil {
			return nil, fmt.Errorf("ctl: %w", err)
		}
	}
	if err := d.openRouteSources(); err != nil {
		return nil, err
	}
	return d, nil
}

func fibNames() string {
	s := ""
	for n := range fibKinds {
		if s != "" {
			s += ", "
		}
		s += n
	}
	return s
}

// readConfig parses a config file; the error lists every bad line.
func readConfig(file string) ([]config.Command, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmds, errs := config.Parse(file, f)
	if len(errs) > 0 {
		// Report the lines that parsed but do not apply too: every
		// problem of the file at once, in line order.
		if _, err := portNames(cmds, l3.EngineOptions{}); err != nil {
			errs = append(errs, splitJoined(err)...)
		}
		sort.SliceStable(errs, func(i, j int) bool { return errLine(errs[i]) < errLine(errs[j]) })
		return nil, errors.Join(errs...)
	}
	return cmds, nil
}

func splitJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func errLine(err error) int {
	var ce *config.Error
	if errors.As(err, &ce) {
		return ce.Pos.Line
	}
	return 0
}

// portNames applies cmds to a scratch engine to learn which interfaces
// they name as ports; the errors are the config's (FILE:LINE: reason).
func portNames(cmds []config.Command, eo l3.EngineOptions) ([]string, error) {
	eo.Clock = nil
	scratch := control.New(l3.NewEngine(eo))
	if err := scratch.Apply(cmds); err != nil {
		return nil, err
	}
	var names []string
	for _, p := range scratch.Engine().Domain().Ports() {
		names = append(names, p.Name)
	}
	return names, nil
}

// Engine returns the forwarding engine.
func (d *Daemon) Engine() *l3.Engine { return d.e }

// Controller returns the configuration controller.
func (d *Daemon) Controller() *control.Controller { return d.ctl }

// MetricsAddr returns the metrics listener's address ("" without one).
func (d *Daemon) MetricsAddr() string {
	if d.metricsLn == nil {
		return ""
	}
	return d.metricsLn.Addr().String()
}

// Ports returns the names of the opened ports.
func (d *Daemon) Ports() []string {
	var out []string
	for _, p := range d.ports.Load().list {
		out = append(out, p.name)
	}
	return out
}

// Run forwards until ctx ends, then shuts down cleanly: listeners closed,
// workers stopped, sockets closed. It returns nil after a clean shutdown.
func (d *Daemon) Run(ctx context.Context) error {
	d.mu.Lock()
	if d.running || d.stopped {
		d.mu.Unlock()
		return errors.New("daemon: Run called twice")
	}
	d.running = true
	for _, p := range d.ports.Load().list {
		d.startPortLocked(p)
	}
	d.mu.Unlock()

	d.wg.Add(1)
	go d.housekeeping()
	var servers sync.WaitGroup
	var httpSrv *http.Server
	if d.metricsLn != nil {
		httpSrv = &http.Server{Handler: metrics.Handler(metrics.NewCollector(d.metricsSource())), ReadHeaderTimeout: 10 * time.Second}
		servers.Add(1)
		go func() {
			defer servers.Done()
			if err := httpSrv.Serve(d.metricsLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				d.log.Error("metrics server", "err", err)
			}
		}()
	}
	if d.ctlSrv != nil {
		servers.Add(1)
		go func() {
			defer servers.Done()
			d.ctlSrv.Serve()
		}()
	}
	if d.linkmon != nil {
		servers.Add(1)
		go func() {
			defer servers.Done()
			d.linkmon.run(d.stop, d.carrierChanged)
		}()
	}
	d.startRouteSources(&servers)
	d.log.Info("netfwd running", "config", d.opts.ConfigFile, "ports", d.Ports(), "workers", d.opts.Workers,
		"fib", d.opts.FIB, "metrics", d.MetricsAddr(), "ctl", d.opts.Ctl, "fpm", d.FPMAddr(), "mirror_kernel", d.opts.MirrorKernel)

	<-ctx.Done()
	d.log.Info("netfwd shutting down")
	d.reloadMu.Lock() // no reload mid-shutdown
	defer d.reloadMu.Unlock()
	d.mu.Lock()
	d.stopped = true
	close(d.stop)
	d.mu.Unlock()
	if httpSrv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		httpSrv.Shutdown(sctx)
		cancel()
	}
	if d.ctlSrv != nil {
		d.ctlSrv.Close()
	}
	d.closeRouteSources()
	for _, p := range d.ports.Load().list {
		p.io.Shutdown()
	}
	d.wg.Wait()
	servers.Wait()
	return d.closePorts()
}

// Close releases everything of a daemon whose Run was never called.
func (d *Daemon) Close() error {
	d.mu.Lock()
	if d.running {
		d.mu.Unlock()
		return errors.New("daemon: Close while running (cancel Run's context)")
	}
	d.stopped = true
	d.mu.Unlock()
	return d.closeAll()
}

func (d *Daemon) closeAll() error {
	var errs []error
	if d.metricsLn != nil {
		errs = append(errs, d.metricsLn.Close())
	}
	if d.ctlSrv != nil {
		errs = append(errs, d.ctlSrv.Close())
	}
	if d.linkmon != nil {
		errs = append(errs, d.linkmon.close())
	}
	errs = append(errs, d.closeRouteSources())
	errs = append(errs, d.closePorts())
	return errors.Join(errs...)
}

func (d *Daemon) closePorts() error {
	var errs []error
	for _, p := range d.ports.Load().list {
		errs = append(errs, p.io.Close())
	}
	d.ports.Store(&portTable{})
	if d.linkmon != nil {
		d.linkmon.close()
	}
	return errors.Join(errs...)
}

// carrierChanged is the link monitor's callback.
func (d *Daemon) carrierChanged(name string, up bool) {
	if d.ports.Load().byName(name) == nil {
		return
	}
	changed, err := d.ctl.SetCarrier(name, up)
	switch {
	case err != nil:
		d.log.Error("carrier", "dev", name, "up", up, "err", err)
	case changed:
		d.log.Info("carrier", "dev", name, "up", up)
	}
}

// metricsSource is what the collector reads.
func (d *Daemon) metricsSource() metrics.Source {
	return metrics.Source{Engine: d.e, Controller: d.ctl, Ports: func() []metrics.PortIO {
		var out []metrics.PortIO
		for _, p := range d.ports.Load().list {
			out = append(out, metrics.PortIO{Name: p.name, Stats: p.io.Stats()})
		}
		return out
	}}
}
