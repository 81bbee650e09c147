// Package daemon is `netfwd run`: the engine on real Linux interfaces, with
// metrics, a control socket, link following and config reloads.
//
// Flow: New reads and checks the config file on the engine before anything
// is opened (every error as FILE:LINE: reason; a device that is no
// interface of the namespace is `Cannot find device "X"`, devices.go),
// sets the interfaces of its ports up (or down) as it says (linkstate.go),
// opens every port the config names (pktio, one fanout group of Workers
// queues per port; all or none, concurrently; a port another daemon holds
// is refused, portlock.go), applies the config, and creates the workers
// with their transmit handles and the metrics and control listeners (lo
// brought up for them), so that the first frame after Run is forwarded at
// once. Run starts the Workers datapath goroutines (worker.go: worker i
// owns queue i of every port), the housekeeping goroutine
// (housekeeping.go), the link monitor (linkmon.go, linkevents.go) and the
// servers, and tears everything down when its context ends, within a
// bounded time. Reload (reload.go) applies the difference to a new version
// of the file; ctl lines go through ctlapply.go.
//
// Locking: mu guards the port table's writers, the running state and the
// loaded config text; reloadMu serialises reloads (SIGHUP, ctl) and the
// ctl batches that open ports. The datapath
// reads the port table through an atomic pointer and takes no lock.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/apply"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/ctlsock"
	"github.com/netfwd/netfwd/internal/handover"
	"github.com/netfwd/netfwd/internal/hostpath"
	"github.com/netfwd/netfwd/internal/metrics"
	"github.com/netfwd/netfwd/internal/pktio/afpacket"
	"github.com/netfwd/netfwd/internal/pktio/afxdp"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
)

// Options configure a daemon.
type Options struct {
	// ConfigFile is the config (ip -batch syntax); required.
	ConfigFile string
	// Metrics is the HTTP listen address of /metrics ("" = none).
	Metrics string
	// Pprof is the HTTP listen address of /debug/pprof/ ("" = none): off
	// unless asked for, since profiles and the command line are nobody
	// else's business.
	Pprof string
	// Ctl is the control socket path ("" = none).
	Ctl string
	// Workers is the number of datapath goroutines and receive queues per
	// port (0: GOMAXPROCS).
	Workers int
	// IO is the packet I/O: "afpacket", "afxdp" or "auto" ("" = auto).
	IO string
	// PortLockWait bounds the wait for a previous daemon on the same ports
	// that is still exiting (0: 15 s).
	PortLockWait time.Duration
	// ListenWait bounds the retries of a listener whose address a previous
	// daemon still holds while it exits (0: 15 s).
	ListenWait time.Duration
	// FIB is the lookup structure kind ("" = "compiled"); see RegisterFIB.
	FIB string
	// Netns is the named network namespace whose interfaces are opened
	// ("" = the caller's). Listeners stay in the caller's namespace.
	Netns string
	// Logger receives operational messages (nil: text on stderr).
	Logger *slog.Logger
	// Clock is the engine's clock (nil: monotonic).
	Clock l2.Clock
	// PktIO is the template of every AF_PACKET port's pktio configuration
	// (Queues is set from Workers).
	PktIO afpacket.Config
	// XDPPort and XDPWorker are the templates of AF_XDP ports and of each
	// worker's UMEM.
	XDPPort   afxdp.PortConfig
	XDPWorker afxdp.WorkerConfig
	// NoLinkMonitor disables carrier following (tests).
	NoLinkMonitor bool
	// TickInterval is the housekeeping period (0: 100 ms).
	TickInterval time.Duration
	// FPM is the listen address of the FPM server for FRR's zebra, opened
	// in the daemon's namespace ("" = none; routes.go).
	FPM string
	// FPMAllowUsers may connect to the FPM server from this host (names or
	// uids; nil: root, frr and bird where they exist; internal/fpm/access.go).
	FPMAllowUsers []string
	// FPMAllowNets may connect to it from other hosts (default: none).
	FPMAllowNets []netip.Prefix
	// MirrorKernel follows the kernel's routes in the daemon's namespace.
	MirrorKernel bool
	// IfaceMap maps kernel interface indices of the daemon's namespace to
	// netfwd devices for FPM and mirrored routes (nil: by name).
	IfaceMap func(ifindex uint32) (dev string, ok bool)
	// HostPath gives every router interface a Linux twin in the ports'
	// namespace for the box's own daemons (hostpath.go).
	HostPath bool
	// PuntEcho hands echo requests to the router's addresses to the twins
	// (the kernel answers them) instead of answering them in netfwd.
	PuntEcho bool
	// TwinKeeper is the command of the twin keeper (hostpath.Options.Keeper)
	// that keeps the twins attached across a restart; empty: none (the
	// twins still persist, but lose their carrier between two daemons).
	TwinKeeper []string
	// TwinNames names the twins of some interfaces (interface -> twin
	// name); others get hostpath.DefaultName.
	TwinNames map[string]string
	// PuntLimits are every twin's punt rate limits (zero entries: the
	// class's default).
	PuntLimits hostpath.Limits
	// Takeover makes this daemon a hot restart of the one running with
	// the same control socket (hotrestart.go): it takes the ports,
	// listeners and twins over while that one forwards.
	Takeover bool
	// Running, if set, is called once the daemon forwards (after a
	// takeover: once the previous process was told to exit).
	Running func()
	// AfterPause, if set, is called in a takeover right after the running
	// daemon paused, before the commit (tests: a successor that stalls
	// there).
	AfterPause func()
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

// defaultListenWait bounds the retries of a listener whose address is
// still held by an exiting daemon.
const defaultListenWait = 15 * time.Second

// RegisterFIB adds a --fib kind (the compiled FIB registers "compiled"
// from its own file when it is built in).
func RegisterFIB(name string, s FIBSetup) { fibKinds[name] = s }

// Daemon is one running router.
type Daemon struct {
	opts Options
	log  *slog.Logger
	e    *l3.Engine
	ctl  *apply.Controller

	metricsLn  net.Listener
	pprofLn    net.Listener
	ctlSrv     *ctlsock.Server
	ctlApplyMu sync.Mutex // serialises ctlApply (linkmtu.go)
	// journal holds the config lines ctl applied, by request, and
	// journalLines their count (journal.go); guarded by ctlApplyMu.
	journal      []journalBatch
	journalLines int

	ports atomic.Pointer[portTable] // read by workers

	workers []*ioWorker // created by New, run by Run
	hk      *housekeeper
	// ringWatch logs and counts receive ring overflows (ringwatch.go).
	ringWatch *ringWatch
	stopping  atomic.Bool // the workers' stop flag

	mu      sync.Mutex
	conf    *apply.File    // the file as last applied (its text: see reload.go); guarded by mu
	running bool           // guarded by mu
	stopped bool           // guarded by mu
	stop    chan struct{}  // closed when Run winds down
	wg      sync.WaitGroup // worker goroutines

	reloadMu sync.Mutex

	linkmon *linkMonitor
	routes  routeSources // routes.go
	hp      *hostPath    // hostpath.go; nil without --host-path
	// earlyGuards are kernel input guards of new interfaces of ports not
	// re-opened yet (kernelguard.go); guarded by earlyMu.
	earlyMu     sync.Mutex
	earlyGuards map[string]*kernelGuard

	// Hot restart (hotrestart.go): the handover socket others take over
	// from; the predecessor this daemon takes over from (New to Run);
	// the workers' pause switch; finish closes when a successor took over.
	handoverSrv *handover.Server
	succ        *successor
	paused      atomic.Bool
	pauseMu     sync.Mutex
	pause       pauseState    // guarded by pauseMu
	parkedNote  chan struct{} // a worker parked (buffered: never blocks it)
	handedOver  atomic.Bool
	// handoverNeigh are the neighbours a prepare sent to a successor;
	// priorityBeforePause is the priority Yield lowered (nil: none).
	// Both are the handover server goroutine's.
	handoverNeigh       map[handover.Neighbour]bool
	priorityBeforePause *processPriority
	finish              chan struct{}
	// finishErr is why a successor that had taken the rings over failed
	// (handoverSource.Finish): Run returns it. Written before finish is
	// closed.
	finishErr error

	// trace is the running `trace` (trace.go), or nil: the workers load it
	// once per batch.
	trace      atomic.Pointer[traceSession]
	finishOnce sync.Once
}

// tableUser is a goroutine that holds resources of the ports in the table
// it last saw (workers, housekeeping); retire waits for all of them.
type tableUser interface {
	wake()
	caughtUp(gen uint64) bool
}

func (d *Daemon) tableUsers() []tableUser {
	var us []tableUser
	for _, w := range d.workers {
		us = append(us, w)
	}
	if d.hk != nil {
		us = append(us, d.hk)
	}
	if d.hp != nil {
		us = append(us, d.hp.inj)
	}
	return us
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
	if opts.ListenWait <= 0 {
		opts.ListenWait = defaultListenWait
	}
	switch opts.IO {
	case "":
		opts.IO = "auto"
	case "auto", "afpacket", "afxdp":
	default:
		return nil, fmt.Errorf("--io %s: unknown packet I/O (auto, afxdp, afpacket)", opts.IO)
	}
	setup, ok := fibKinds[opts.FIB]
	if !ok {
		return nil, fmt.Errorf("--fib %s: not built in (available: %s)", opts.FIB, fibNames())
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	// A device the file names must be an interface of the namespace.
	exists := deviceCheck(opts.Netns, nil)
	conf, cmds, err := readConfig(opts.ConfigFile, exists)
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
	nd := &Daemon{opts: opts, log: log, e: e, ctl: apply.New(e), conf: conf, stop: make(chan struct{}), finish: make(chan struct{}),
		parkedNote: make(chan struct{}, 64)}
	nd.ctl.SetDeviceCheck(deviceCheck(opts.Netns, nd.hasPort))
	nd.ports.Store(&portTable{})
	defer func() {
		if err != nil {
			nd.closeAll()
		}
	}()
	d = nd
	if opts.Takeover {
		d.lowerOwnAutogroup()
		if err := d.dialPredecessor(); err != nil {
			return nil, err
		}
		defer func() { // failed before Run: the running daemon never paused
			if err != nil && d.succ != nil {
				d.succ.cl.Close()
				d.succ = nil
			}
		}()
	}
	// Carrier first, so the config is applied with the real link states.
	names, down, err := portNames(cmds, eo, exists)
	if err != nil {
		return nil, err
	}
	if err := d.raiseLinks(names, down); err != nil {
		return nil, err
	}
	opened, err := d.openPorts(names)
	if err != nil {
		return nil, err
	}
	defer func() { // opened but not yet in the port table
		for _, p := range opened {
			if err != nil {
				p.close()
			}
		}
	}()
	for _, p := range opened {
		if _, err := d.ctl.SetCarrier(p.name, p.carrier); err != nil {
			return nil, err
		}
		if _, err := d.ctl.SetKernelMTU(p.name, p.mtu); err != nil {
			return nil, err
		}
	}
	if err := d.ctl.Apply(cmds); err != nil {
		return nil, err
	}
	releaseMemory()
	d.pushMTUs(opened)
	if err := d.addPorts(opened); err != nil {
		return nil, err
	}
	opened = nil
	if d.succ != nil {
		// What ctl changed in the running daemon, after the file, as it
		// was applied there (journal.go).
		if err := d.replayJournal(d.succ.prep.Journal); err != nil {
			return nil, fmt.Errorf("hot restart: the running netfwd's ctl changes: %w", err)
		}
	}
	// The workers and their transmit handles exist before Run, so the first
	// frame is forwarded at once.
	for i := range opts.Workers {
		w, err := newIOWorker(d, i)
		if err != nil {
			return nil, err
		}
		d.workers = append(d.workers, w)
		w.bind(d.ports.Load())
	}
	d.hk = newHousekeeper(d)
	d.ringWatch = newRingWatch(d)
	if opts.HostPath {
		w, err := newControlWorker(d)
		if err != nil {
			return nil, err
		}
		d.workers = append(d.workers, w)
		w.bind(d.ports.Load())
		if err := d.openHostPath(); err != nil {
			return nil, fmt.Errorf("host path: %w", err)
		}
	}
	if !opts.NoLinkMonitor {
		if d.linkmon, err = newLinkMonitor(opts.Netns); err != nil {
			return nil, fmt.Errorf("link monitor: %w", err)
		}
	}
	if err := d.openListeners(); err != nil {
		return nil, err
	}
	if err := d.openRouteSources(); err != nil {
		return nil, err
	}
	return d, nil
}

// openListeners binds (or, in a hot restart, takes over) the metrics and
// pprof listeners, the control socket and the handover socket.
func (d *Daemon) openListeners() (err error) {
	opts := d.opts
	if opts.Metrics != "" || opts.Pprof != "" {
		if err := d.loopbackUp("", "metrics"); err != nil {
			return err
		}
	}
	if opts.Metrics != "" {
		if d.metricsLn, err = d.listen("metrics", opts.Metrics); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	if opts.Pprof != "" {
		if d.pprofLn, err = d.listen("pprof", opts.Pprof); err != nil {
			return fmt.Errorf("pprof: %w", err)
		}
	}
	if opts.Ctl != "" {
		listen, listenHandover := ctlsock.Listen, handover.Listen
		if d.succ != nil {
			// The running daemon's sockets are live: this one's listen
			// aside and take the names over once the running one
			// committed (takeOver); a takeover that fails before leaves
			// them to it.
			listen, listenHandover = ctlsock.ListenAside, handover.ListenAside
		}
		if d.ctlSrv, err = listen(opts.Ctl, ctlsock.Handler{Ctl: d.ctl, Reload: d.Reload, Apply: d.ctlApply, Flush: d.ctlFlush,
			Monitor: ctlsock.NewMonitor(d.ctl), Capture: d.Capture, Trace: d.Trace, RingDrops: d.portRingDrops}); err != nil {
			return fmt.Errorf("ctl: %w", err)
		}
		if d.handoverSrv, err = listenHandover(handover.Path(opts.Ctl), handoverSource{d}, d.log.Info); err != nil {
			return fmt.Errorf("handover socket: %w", err)
		}
	}
	return nil
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

// readConfig reads and parses a config file; the error lists every bad
// line. The file must be a regular file: opening it cannot block (a FIFO's
// open waits for a writer, forever), and its end is known.
func readConfig(file string, exists func(string) bool) (*apply.File, []config.Command, error) {
	f, err := readConfigText(file)
	if err != nil {
		return nil, nil, err
	}
	cmds, err := parseConfig(f, exists)
	if err != nil {
		return nil, nil, err
	}
	return f, cmds, nil
}

// parseConfig parses a config file's text; the error lists every bad line
// (exists: the device check, devices.go).
func parseConfig(f *apply.File, exists func(string) bool) ([]config.Command, error) {
	cmds, errs := f.Commands()
	if len(errs) > 0 {
		// Report the lines that parsed but do not apply too: every
		// problem of the file at once, in line order.
		if _, _, err := portNames(cmds, l3.EngineOptions{}, exists); err != nil {
			errs = append(errs, splitJoined(err)...)
		}
		sort.SliceStable(errs, func(i, j int) bool { return errLine(errs[i]) < errLine(errs[j]) })
		return nil, errors.Join(errs...)
	}
	return cmds, nil
}

// openRegular opens a regular file for reading without ever blocking.
func openRegular(file string) (*os.File, error) {
	fd, err := syscall.Open(file, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: file, Err: err}
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return nil, &os.PathError{Op: "stat", Path: file, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		syscall.Close(fd)
		return nil, fmt.Errorf("%s: not a regular file", file)
	}
	return os.NewFile(uintptr(fd), file), nil
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
// they name as ports, and which of them they set down; the errors are the
// config's (FILE:LINE: reason), a device the check exists refuses is
// `Cannot find device "X"`.
func portNames(cmds []config.Command, eo l3.EngineOptions, exists func(string) bool) (names []string, down map[string]bool, err error) {
	eo.Clock = nil
	scratch := apply.New(l3.NewEngine(eo))
	scratch.SetDeviceCheck(exists)
	if err := scratch.Apply(cmds); err != nil {
		return nil, nil, err
	}
	down = map[string]bool{}
	for _, p := range scratch.Engine().Domain().Ports() {
		names = append(names, p.Name)
		if scratch.AdminDown(p.Name) {
			down[p.Name] = true
		}
	}
	return names, down, nil
}

// Engine returns the forwarding engine.
func (d *Daemon) Engine() *l3.Engine { return d.e }

// Controller returns the configuration controller.
func (d *Daemon) Controller() *apply.Controller { return d.ctl }

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

// Run forwards until ctx ends, then shuts down: listeners closed, workers
// stopped, sockets closed. It returns nil after a clean shutdown. Shutdown
// never waits for a reload in progress (its file may never finish reading).
func (d *Daemon) Run(ctx context.Context) error {
	d.mu.Lock()
	if d.running || d.stopped {
		d.mu.Unlock()
		return errors.New("daemon: Run called twice")
	}
	d.running = true
	d.mu.Unlock()

	if d.succ != nil {
		// Everything is ready: from here the old daemon's readers pause
		// and the frames wait in the rings until the workers start.
		if err := d.takeOver(); err != nil {
			d.succ.cl.Close() // the old daemon resumes
			d.succ = nil
			d.mu.Lock()
			d.running = false
			d.mu.Unlock()
			d.Close()
			if !strings.HasPrefix(err.Error(), "hot restart") {
				err = fmt.Errorf("hot restart: %w", err)
			}
			return err
		}
	}
	for _, w := range d.workers {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			w.run()
		}()
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.hk.run()
	}()
	if d.succ != nil {
		d.catchUp(catchUpLimit)
	}
	var servers sync.WaitGroup
	var httpSrvs []*http.Server
	serve := func(ln net.Listener, h http.Handler, what string) {
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		httpSrvs = append(httpSrvs, srv)
		servers.Add(1)
		go func() {
			defer servers.Done()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				d.log.Error(what+" server", "err", err)
			}
		}()
	}
	if d.metricsLn != nil {
		serve(d.metricsLn, metrics.Handler(metrics.NewCollector(d.metricsSource())), "metrics")
	}
	if d.pprofLn != nil {
		serve(d.pprofLn, metrics.PprofHandler(), "pprof")
	}
	if d.ctlSrv != nil {
		servers.Add(1)
		go func() {
			defer servers.Done()
			d.ctlSrv.Serve()
		}()
	}
	if d.handoverSrv != nil {
		servers.Add(1)
		go func() {
			defer servers.Done()
			d.handoverSrv.Serve()
		}()
	}
	if d.linkmon != nil {
		servers.Add(1)
		go func() {
			defer servers.Done()
			d.linkmon.run(d.stop, d.linkChanged)
		}()
	}
	d.startRouteSources(&servers)
	if d.hp != nil {
		servers.Add(1)
		go func() {
			defer servers.Done()
			d.hp.syncLoop(d.stop)
		}()
	}
	servers.Add(1)
	go func() {
		defer servers.Done()
		d.ringWatch.run(d.stop)
	}()
	// The workers bind their queues (AF_XDP: UMEM and sockets, retried
	// while the kernel still releases a previous process's) on their first
	// sweep; until then an XDP port passes its frames to the kernel. Say
	// "running" when they forward.
	d.waitWorkers(d.ports.Load().gen)
	if d.succ != nil {
		d.finishTakeover()
		sdNotify(fmt.Sprintf("MAINPID=%d\nREADY=1", os.Getpid()))
	} else {
		sdNotify("READY=1")
	}
	d.log.Info("netfwd running", "config", d.opts.ConfigFile, "ports", d.Ports(), "workers", d.opts.Workers,
		"io", d.opts.IO, "fib", d.opts.FIB, "metrics", d.MetricsAddr(), "ctl", d.opts.Ctl, "fpm", d.FPMAddr(),
		"mirror_kernel", d.opts.MirrorKernel, "host_path", d.opts.HostPath)
	if d.opts.Running != nil {
		d.opts.Running()
	}

	d.waitEnd(ctx)
	d.mu.Lock()
	d.stopped = true
	close(d.stop)
	d.mu.Unlock()
	d.stopping.Store(true)
	for _, w := range d.workers {
		w.wake()
	}
	for _, srv := range httpSrvs {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		srv.Shutdown(sctx)
		cancel()
	}
	if d.ctlSrv != nil {
		d.ctlSrv.Close()
	}
	if d.handoverSrv != nil {
		d.handoverSrv.Close()
	}
	d.closeRouteSources()
	t0 := time.Now()
	if err := d.hp.close(); err != nil {
		d.log.Error("host path", "err", err)
	}
	ps := d.ports.Load().list
	parallel(len(ps), func(i int) { ps[i].shutdown() })
	d.wg.Wait()
	servers.Wait()
	err := d.closePorts()
	d.log.Info("netfwd stopped", "took", time.Since(t0).Round(time.Millisecond))
	select {
	case <-d.finish:
		err = errors.Join(d.finishErr, err)
	default:
	}
	return err
}

// waitEnd waits until ctx ends or a successor took the ports over.
func (d *Daemon) waitEnd(ctx context.Context) {
	select {
	case <-ctx.Done():
		d.log.Info("netfwd shutting down")
		sdNotify("STOPPING=1")
	case <-d.finish:
		if d.finishErr != nil {
			d.log.Error("netfwd shutting down: the new process took the ports over and failed (hot restart)", "err", d.finishErr)
		} else {
			d.log.Info("netfwd shutting down: a new process took the ports over (hot restart)")
		}
	}
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
	for _, ln := range []net.Listener{d.metricsLn, d.pprofLn} {
		if ln != nil {
			errs = append(errs, ln.Close())
		}
	}
	if d.ctlSrv != nil {
		errs = append(errs, d.ctlSrv.Close())
	}
	if d.handoverSrv != nil {
		errs = append(errs, d.handoverSrv.Close())
	}
	if d.succ != nil {
		d.succ.cl.Close()
		d.succ = nil
	}
	if d.linkmon != nil {
		errs = append(errs, d.linkmon.close())
	}
	for _, w := range d.workers {
		w.release()
	}
	errs = append(errs, d.closeRouteSources())
	errs = append(errs, d.hp.close())
	errs = append(errs, d.closePorts())
	return errors.Join(errs...)
}

// closePorts closes every port, concurrently.
func (d *Daemon) closePorts() error {
	d.mu.Lock()
	ps := d.ports.Load().list
	d.ports.Store(&portTable{gen: d.ports.Load().gen + 1})
	d.mu.Unlock()
	err := closePortsParallel(ps)
	if d.linkmon != nil {
		d.linkmon.close()
	}
	d.closeEarlyGuards() // after the link monitor: it attaches them
	return err
}

// listenRetry listens on addr, retrying while the address is in use for up
// to wait: a daemon restarted right after kill -9 races the old process's
// exit.
func listenRetry(addr string, wait time.Duration, log *slog.Logger) (net.Listener, error) {
	deadline := time.Now().Add(wait)
	logged := false
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			return ln, err
		}
		if !logged {
			log.Warn("address in use, retrying", "addr", addr, "for", wait)
			logged = true
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// metricsSource is what the collector reads.
func (d *Daemon) metricsSource() metrics.Source {
	src := metrics.Source{Engine: d.e, Controller: d.ctl, Ports: func() []metrics.PortIO {
		var out []metrics.PortIO
		for _, p := range d.ports.Load().list {
			pio := metrics.PortIO{Name: p.name, IO: p.ioName(), RingOverflows: d.ringWatch.Overflows(p.name)}
			if p.xp != nil {
				x := p.xp.XDPStats()
				pio.Stats, pio.XDP = x.Stats, &x
			} else {
				pio.Stats = p.pk.Stats()
			}
			if p.ctl != nil {
				pio.Control = new(p.ctl.Stats())
			}
			out = append(out, pio)
		}
		return out
	}, XDPWaits: func() afxdp.WaitStats {
		var sum afxdp.WaitStats
		for _, w := range d.workers {
			ws := w.xdp.waitStats()
			sum.Waits += ws.Waits
			sum.Blocked += ws.Blocked
		}
		return sum
	}}
	if d.hp != nil {
		src.Twins = d.hp.m.Twins
	}
	rs := d.RouteSources()
	src.FPM, src.Mirror = rs.FPM, rs.Mirror
	return src
}
