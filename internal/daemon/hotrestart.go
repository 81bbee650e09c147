package daemon

// Hot restart (internal/handover): both sides of taking the ports over
// from a running netfwd while it forwards.
//
// The running daemon (handoverSource) serves its handover socket: it
// describes its ports (AF_PACKET: receive sockets, ring layout; AF_XDP:
// socket map, program, link; both: the port lock) and listeners; on pause
// its workers park at a batch boundary (the frames of their last batch
// released) and it reports the rings' positions, each worker's AF_XDP
// state (UMEM memfd, frame states, free list, XDP sockets) and the
// neighbours learned since prepare (prepare carried the others); it
// resumes if the successor has not committed within
// handover.CommitTimeout (or goes away before); committed, it drops to
// the background priority (priority.go) until done and closes its
// descriptors of the receive sockets, whose wake-ups its parked workers
// had already taken out of their epoll sets (each frame the successor
// reads would wake this process); on done it marks its AF_XDP ports
// handed over (their Close leaves map entries, program and NAPI settings
// to the successor)
// and shuts down as on SIGTERM, closing only its own copies of the
// descriptors (and exits 1 if the connection ends without done after the
// commit: the rings are the successor's, this process cannot resume them).
//
// The new daemon (Options.Takeover) prepares in New: the same sockets are
// adopted (afpacket.Adopt) instead of opened, the listeners taken instead of
// bound, the twins taken from the keeper or the old process
// (hostpath.Options.Predecessor), the control and handover sockets opened
// under temporary names (ctlsock.ListenAside). Run pauses the old
// daemon, continues each ring where it stopped, builds each worker's
// AF_XDP worker around the old one's UMEM (the same memfd pages) and
// sockets (afxdp.AdoptWorker; worker i continues worker i's, so --workers
// must match): all of it this process's own state, nothing the old daemon
// would notice if it resumed. Then it commits (handover.Client.Commit):
// only once the old daemon answered that it never reads the rings again
// does this one rename its control and handover sockets over the old
// ones, bind its AF_XDP queues (bindTakenOver) and start the workers; a
// commit not taken (the old daemon resumed: this process stalled past
// handover.CommitTimeout) fails the takeover before any read. The workers
// catch up with the rings before anything else starts (catchUp), then it
// says done.
// From its takeover until the predecessor has exited it refuses successors
// of its own (handover.Server.Hold); the running daemon refuses a second
// successor while one's restart is in progress (handover.BusyError).
// Frames that arrive in between wait in the rings: the gap is what Run
// measures and logs (takeover_gap, caught_up).
//
// Locking: pause/resume are atomics and a channel the workers wait on; a
// parking worker sends on parkedNote (buffered, never blocks), which the
// pause waits on; handoverSource's methods run on the handover server's
// goroutine of the successor holding it, one successor at a time;
// successor belongs to Run's goroutine, but for its priority guard, a
// timer ordered against the takeover's priority change by prioMu.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/handover"
	"github.com/netfwd/netfwd/internal/pktio/afpacket"
	"github.com/netfwd/netfwd/internal/pktio/afxdp"
	"github.com/netfwd/netfwd/neigh"
)

// pauseState is the workers' pause switch: paused is read once per sweep;
// resume is closed to let them go on.
type pauseState struct {
	resume chan struct{}
}

// parkIfPaused holds a worker while the daemon is paused for a handover:
// it has released its last batch (the loop's top), so the ring positions
// are final until it returns. It returns false when the daemon stops
// meanwhile (the successor took over): the worker must then exit without
// reading its rings again, which are the successor's now (a last read
// here released slots under the new reader, which then waited for the
// kernel to come round the ring: found by the combined test).
func (iw *ioWorker) parkIfPaused() bool {
	if !iw.d.paused.Load() {
		return true
	}
	d := iw.d
	d.pauseMu.Lock()
	resume := d.pause.resume
	d.pauseMu.Unlock()
	// The queues' wake-ups stop reaching this process before the pause
	// is answered: the successor reads the same sockets, and each frame
	// it receives would wake this process's netpoller (perf: 19 ms of a
	// CPU in 60 ms while the new workers caught up). Before the note, so
	// before a commit lets Yield close the descriptors (an epoll
	// registration of a socket another process holds cannot be removed
	// once this process's descriptor is closed).
	iw.detachQueues()
	iw.parked.Store(true)
	defer iw.parked.Store(false)
	select { // Pause waits for this, without spinning on the CPU we forward on
	case d.parkedNote <- struct{}{}:
	default:
	}
	select {
	case <-resume:
		iw.attachQueues()
		return true
	case <-d.stop:
		return false
	}
}

// detachQueues takes the worker's queues out of its waiters' epoll sets
// (pktio.Poller.Detach; the waiter may be the poller itself, and both
// calls are idempotent); attachQueues puts them back when a pause ends
// without a takeover.
func (iw *ioWorker) detachQueues() {
	iw.waiter.Detach()
	iw.poller.Detach()
}

func (iw *ioWorker) attachQueues() {
	if err := errors.Join(iw.waiter.Attach(), iw.poller.Attach()); err != nil {
		iw.d.log.Error("worker resumes: its queues' wake-ups", "worker", iw.idx, "err", err)
	}
}

// handoverSource is the running daemon's side of a hot restart.
type handoverSource struct{ d *Daemon }

// listenerFD is the descriptor of a listener (-1: none): the number in
// this process, for the successor's pidfd_getfd.
func listenerFD(ln net.Listener) int {
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return -1
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	rc.Control(func(f uintptr) { fd = int(f) })
	return fd
}

func (s handoverSource) Prepare() (handover.Prepared, error) {
	d := s.d
	p := handover.Prepared{PID: os.Getpid(), Listeners: map[string]handover.Listener{}}
	p.Workers = d.opts.Workers
	for _, pt := range d.ports.Load().list {
		if pt.xp != nil {
			st, err := pt.xp.Describe()
			if err != nil {
				return p, err
			}
			p.Ports = append(p.Ports, handover.Port{PortState: afpacket.PortState{Name: pt.name}, IO: "afxdp",
				XDP: &st, LockFD: listenerFD(pt.lock.ln)})
			continue
		}
		st, err := pt.pk.Describe()
		if err != nil {
			return p, err
		}
		hp := handover.Port{PortState: st, IO: "afpacket", LockFD: listenerFD(pt.lock.ln)}
		if pt.ctl != nil {
			cst, err := pt.ctl.Describe()
			if err != nil {
				return p, err
			}
			hp.Control = &cst
		}
		p.Ports = append(p.Ports, hp)
	}
	for _, w := range d.workers {
		if xw := w.xdp.pub.Load(); xw != nil {
			if p.XDPMemFDs == nil {
				p.XDPMemFDs = map[int]int{}
			}
			p.XDPMemFDs[w.idx] = xw.MemFD() // fixed for the worker's life
		}
	}
	add := func(name string, ln net.Listener) {
		if ln != nil {
			p.Listeners[name] = handover.Listener{Addr: ln.Addr().String(), FD: listenerFD(ln)}
		}
	}
	// The neighbours learned so far: the successor installs them before
	// the pause; the pause sends what changed since (pauseNeighbours).
	p.Neighbours = d.learnedNeighbours()
	d.handoverNeigh = make(map[handover.Neighbour]bool, len(p.Neighbours))
	for _, n := range p.Neighbours {
		d.handoverNeigh[n] = true
	}
	// What ctl changed since start (journal.go): the handover server
	// holds the daemon already, so later ctl changes are refused.
	p.Journal = d.journalCopy()
	add("metrics", d.metricsLn)
	add("pprof", d.pprofLn)
	if d.routes.fpm != nil {
		add("fpm", d.routes.fpm.Listener())
	}
	return p, nil
}

func (s handoverSource) Pause() (handover.Paused, error) {
	d := s.d
	d.pauseMu.Lock()
	d.pause.resume = make(chan struct{})
	d.pauseMu.Unlock()
	for len(d.parkedNote) > 0 { // notes of an earlier pause
		<-d.parkedNote
	}
	d.paused.Store(true)
	for _, w := range d.workers {
		w.wake()
	}
	// A worker parks within one batch and says so on parkedNote: waiting
	// for that note neither spins on a CPU the busy worker needs (two
	// cores here) nor sleeps in the netpoller's millisecond steps. The
	// tick re-checks workers that exited instead.
	deadline := time.NewTimer(3 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !d.allWorkers(func(w *ioWorker) bool { return w.parked.Load() }) {
		select {
		case <-d.parkedNote:
		case <-tick.C:
			for _, w := range d.workers {
				w.wake()
			}
		case <-deadline.C:
			s.Resume()
			return handover.Paused{}, errors.New("the workers did not pause within 3 s")
		}
	}
	out := handover.Paused{Positions: map[string][]afpacket.QueuePosition{}, ControlPositions: map[string][]afpacket.QueuePosition{}}
	for _, pt := range d.ports.Load().list {
		if pt.pk == nil {
			continue
		}
		pos, err := pt.pk.QueuePositions()
		if err != nil {
			s.Resume()
			return handover.Paused{}, err
		}
		out.Positions[pt.name] = pos
		if pt.ctl != nil {
			if pos, err = pt.ctl.QueuePositions(); err != nil {
				s.Resume()
				return handover.Paused{}, err
			}
			out.ControlPositions[pt.name] = pos
		}
	}
	// The AF_XDP workers: their owners are parked (or gone), so their
	// frame states hold still until Resume.
	for _, w := range d.workers {
		xw := w.xdp.pub.Load()
		if xw == nil || w.exited() {
			continue
		}
		st, err := xw.Describe()
		if err != nil {
			s.Resume()
			return handover.Paused{}, fmt.Errorf("worker %d: %w", w.idx, err)
		}
		if out.XDP == nil {
			out.XDP = map[int]afxdp.WorkerState{}
		}
		out.XDP[w.idx] = st
	}
	out.Neighbours = d.pauseNeighbours()
	return out, nil
}

// Yield: the successor reads the rings from now on (it committed), and
// this process only waits for done: its other goroutines (housekeeping,
// route sources) must not take CPU from the successor's workers while
// they catch up with the rings. Not at the pause: until the commit this
// process must answer at once (the successor's workers wait for it).
//
// Committed, it also closes its descriptors of the AF_PACKET ports'
// receive sockets (afpacket.Port.HandedOver): each is in this process's
// Go netpoller, which every frame the successor receives would wake. The
// workers took the queues out of their own epoll sets when they parked.
func (s handoverSource) Yield(committed bool) {
	d := s.d
	if p, err := priorityOf(os.Getpid()); err == nil && d.priorityBeforePause == nil {
		d.priorityBeforePause = &p
		setPriority(backgroundProcess())
	}
	if !committed {
		return
	}
	for _, p := range d.ports.Load().list {
		for _, pk := range []*afpacket.Port{p.pk, p.ctl} {
			if pk == nil {
				continue
			}
			if err := pk.HandedOver(); err != nil {
				d.log.Warn("hot restart: closing the handed-over receive sockets", "dev", p.name, "err", err)
			}
		}
	}
}

// pauseNeighbours are the learned neighbours prepare did not send as they
// are now.
func (d *Daemon) pauseNeighbours() []handover.Neighbour {
	var out []handover.Neighbour
	for _, n := range d.learnedNeighbours() {
		if !d.handoverNeigh[n] {
			out = append(out, n)
		}
	}
	return out
}

func (s handoverSource) Resume() {
	d := s.d
	if d.priorityBeforePause != nil {
		if err := setPriority(*d.priorityBeforePause); err != nil {
			d.log.Warn("hot restart: restoring the priority after the pause", "err", err)
		}
		d.priorityBeforePause = nil
	}
	d.paused.Store(false)
	d.pauseMu.Lock()
	close(d.pause.resume)
	d.pause.resume = nil
	d.pauseMu.Unlock()
	for _, w := range d.workers {
		w.wake()
	}
}

// Finish: the successor took the rings over (err: and failed before it
// said done); this process shuts down, leaving the ports to it, and Run
// returns err.
func (s handoverSource) Finish(err error) {
	setPriority(backgroundProcess()) // the shutdown must not take CPU from the successor's workers (priority.go)
	for _, pt := range s.d.ports.Load().list {
		if pt.xp != nil {
			pt.xp.HandOver() // the successor holds map, program and link now
		}
	}
	s.d.handedOver.Store(true)
	s.d.finishOnce.Do(func() {
		s.d.finishErr = err
		close(s.d.finish)
	})
}

// learnedNeighbours are the neighbours the datapath learned (not the
// config's permanent ones) with a link-layer address.
func (d *Daemon) learnedNeighbours() []handover.Neighbour {
	names := map[uint32]string{}
	for _, i := range d.e.Router().Ifaces() {
		names[i.Index] = i.Name
	}
	var out []handover.Neighbour
	for _, n := range d.e.Router().Neighbours().Dump(d.e.Domain().Clock().Now()) {
		switch n.State {
		case neigh.NUDReachable, neigh.NUDStale, neigh.NUDDelay, neigh.NUDProbe:
		default:
			continue // permanent/noarp: from the config; incomplete/failed: nothing to keep
		}
		if dev, ok := names[n.IfIndex]; ok && n.HasLLAddr {
			out = append(out, handover.Neighbour{Dev: dev, IP: n.IP.Netip(), LLAddr: n.LLAddr})
		}
	}
	return out
}

// installNeighbours puts a predecessor's learned neighbours in the table,
// STALE.
func (d *Daemon) installNeighbours(ns []handover.Neighbour) error {
	cmds := make([]config.Command, 0, len(ns))
	for _, n := range ns {
		cmds = append(cmds, config.Command{Pos: config.Pos{File: "hot-restart"},
			Neigh: &config.NeighCmd{Op: "replace", IP: n.IP, Dev: n.Dev, LLAddr: n.LLAddr, HasLLAddr: true, State: neigh.NUDStale}})
	}
	return d.ctl.Apply(cmds)
}

// successor is the new daemon's side: the connection to the running one
// and what it described.
type successor struct {
	cl    *handover.Client
	prep  handover.Prepared
	ports map[string]handover.Port
	// umems are the predecessor's AF_XDP UMEMs by worker index, mapped
	// before the pause (mapUMEMs); adoptXDPWorkers hands them on.
	umems map[int]*afxdp.UMEM
	// What the takeover took, for its log line: from start (the pause
	// request) the pause (pauseInPredecessor of it in the old process),
	// the commit's round trip, the gap to the last worker's first read
	// and the time until every worker had caught up; the ring drops read
	// at the pause (those the old process had not read) and once caught
	// up (cumulative).
	start                       time.Time
	pause, pauseInPredecessor   time.Duration
	commit                      time.Duration
	gap, caughtUp               time.Duration
	dropsAtPause, dropsCaughtUp uint64
	// idleGuard raises a start still at SCHED_IDLE after
	// prepareIdleLimit to nice 19 (guardIdleStart); tookPriority, under
	// prioMu, says the takeover set the predecessor's priority already.
	idleGuard    *time.Timer
	prioMu       sync.Mutex
	tookPriority bool
}

// mapUMEMs maps the predecessor's UMEMs while it still forwards: the
// pause then does not wait for the page tables of tens of MiB.
func (d *Daemon) mapUMEMs() error {
	for idx, fd := range d.succ.prep.XDPMemFDs {
		n, err := d.succ.cl.TakeFD(fd)
		if err != nil {
			return fmt.Errorf("worker %d: UMEM: %w", idx, err)
		}
		u, err := afxdp.MapUMEM(n)
		if err != nil {
			return fmt.Errorf("worker %d: %w", idx, err)
		}
		if d.succ.umems == nil {
			d.succ.umems = map[int]*afxdp.UMEM{}
		}
		d.succ.umems[idx] = u
	}
	return nil
}

// closeUMEMs releases the mapped UMEMs no worker took.
func (s *successor) closeUMEMs() {
	for idx, u := range s.umems {
		u.Close()
		delete(s.umems, idx)
	}
}

// dialPredecessor connects to the running daemon and asks what it holds.
func (d *Daemon) dialPredecessor() error {
	if d.opts.Ctl == "" {
		return errors.New("hot restart: needs the control socket (--ctl): the handover socket lives beside it")
	}
	cl, err := handover.Dial(handover.Path(d.opts.Ctl))
	if err != nil {
		return err
	}
	prep, err := cl.Prepare()
	if err != nil {
		cl.Close()
		return err
	}
	s := &successor{cl: cl, prep: prep, ports: map[string]handover.Port{}}
	for _, p := range prep.Ports {
		s.ports[p.Name] = p
	}
	d.succ = s
	d.guardIdleStart(prepareIdleLimit)
	d.log.Info("hot restart: taking over", "from_pid", prep.PID, "ports", len(prep.Ports), "protocol", cl.Peer())
	return nil
}

// prepareIdleLimit is how long a successor prepares at SCHED_IDLE
// (priority.go) before it goes on at nice 19: about ten times its start
// on a quiet 2-vCPU VM.
const prepareIdleLimit = 2 * time.Second

// guardIdleStart: a successor still preparing at SCHED_IDLE after
// limit goes on at the background priority, nice 19 (the
// forwarding fills the CPUs: at SCHED_IDLE it would wait for a gap in
// the traffic). A successor started otherwise keeps its priority.
func (d *Daemon) guardIdleStart(limit time.Duration) {
	s := d.succ
	s.idleGuard = time.AfterFunc(limit, func() {
		s.prioMu.Lock()
		defer s.prioMu.Unlock()
		if p, err := threadPriority(os.Getpid()); s.tookPriority || err != nil || p.policy != unix.SCHED_IDLE {
			return
		}
		if err := setProcessPriority(background()); err != nil {
			d.log.Warn("hot restart: leaving SCHED_IDLE", "err", err)
			return
		}
		d.log.Info("hot restart: still preparing, at nice 19 from now on (SCHED_IDLE before)", "after", limit)
	})
}

// adoptPort takes a port over from the running daemon: its receive
// sockets (and control ring), or its AF_XDP map, program and link (the
// sockets come with the workers, takeOver); ok is false when it does not
// hold the port.
func (d *Daemon) adoptPort(name string) (pk, ctl *afpacket.Port, xp *afxdp.Port, ok bool, err error) {
	hp, found := d.succ.ports[name]
	if !found {
		return nil, nil, nil, false, nil
	}
	if hp.IO == "afxdp" {
		xp, err = d.adoptXDPPort(hp)
		return nil, nil, xp, true, err
	}
	if hp.Config.Queues != d.opts.Workers {
		return nil, nil, nil, true, fmt.Errorf("%s: the running netfwd reads it with %d queues, this one has %d workers: a hot restart keeps the rings (start with --workers %d)",
			name, hp.Config.Queues, d.opts.Workers, hp.Config.Queues)
	}
	adopt := func(st afpacket.PortState) (*afpacket.Port, error) {
		fds := make([]int, 0, len(st.FDs))
		for _, fd := range st.FDs {
			n, err := d.succ.cl.TakeFD(fd)
			if err != nil {
				for _, f := range fds {
					unix.Close(f)
				}
				return nil, err
			}
			fds = append(fds, n)
		}
		return afpacket.Adopt(st, fds)
	}
	if pk, err = adopt(hp.PortState); err != nil {
		return nil, nil, nil, true, err
	}
	if hp.Control != nil && d.opts.HostPath {
		if ctl, err = adopt(*hp.Control); err != nil {
			pk.Shutdown()
			pk.Close()
			return nil, nil, nil, true, err
		}
	}
	return pk, ctl, nil, true, nil
}

// adoptXDPPort takes an AF_XDP port's map, program and link over: the
// program stays attached when the old daemon exits.
func (d *Daemon) adoptXDPPort(hp handover.Port) (*afxdp.Port, error) {
	if hp.XDP == nil {
		return nil, fmt.Errorf("%s: the running netfwd described no AF_XDP state", hp.Name)
	}
	if d.succ.prep.Workers != d.opts.Workers {
		return nil, fmt.Errorf("%s: the running netfwd serves its AF_XDP queues with %d workers, this one has %d: a hot restart keeps each worker's UMEM and sockets (start with --workers %d)",
			hp.Name, d.succ.prep.Workers, d.opts.Workers, d.succ.prep.Workers)
	}
	var fds []int
	for _, fd := range []int{hp.XDP.MapFD, hp.XDP.ProgFD, hp.XDP.LinkFD} {
		n, err := d.succ.cl.TakeFD(fd)
		if err != nil {
			for _, f := range fds {
				unix.Close(f)
			}
			return nil, err
		}
		fds = append(fds, n)
	}
	return afxdp.AdoptPort(*hp.XDP, fds[0], fds[1], fds[2])
}

// adoptXDPWorkers builds each worker's AF_XDP worker around the running
// daemon's (paused: its state is final): the same UMEM pages, frame states
// and sockets, handed to the worker's ensureXDP. It maps and reads, and
// changes nothing the predecessor would see if it resumed; the binding
// (bindTakenOver: new sockets in the XSKMAP) waits for the commit.
func (d *Daemon) adoptXDPWorkers(ws map[int]afxdp.WorkerState) error {
	byName := map[string]*afxdp.Port{}
	for _, p := range d.ports.Load().list {
		if p.xp != nil {
			byName[p.name] = p.xp
		}
	}
	for _, w := range d.workers {
		st, ok := ws[w.idx]
		if !ok || w.control {
			continue
		}
		u := d.succ.umems[w.idx]
		delete(d.succ.umems, w.idx)
		if u == nil || d.succ.prep.XDPMemFDs[w.idx] != st.MemFD { // created after prepare
			u.Close()
			memfd, err := d.succ.cl.TakeFD(st.MemFD)
			if err != nil {
				return fmt.Errorf("worker %d: UMEM: %w", w.idx, err)
			}
			if u, err = afxdp.MapUMEM(memfd); err != nil {
				return fmt.Errorf("worker %d: %w", w.idx, err)
			}
		}
		var err error
		socks := make([]afxdp.AdoptedSocket, len(st.Sockets))
		for i, ss := range st.Sockets {
			socks[i] = afxdp.AdoptedSocket{Port: byName[ss.Port], FD: -1}
			if socks[i].Port == nil {
				continue // a port this configuration drops: its socket closes with the old daemon
			}
			if socks[i].FD, err = d.succ.cl.TakeFD(ss.FD); err != nil {
				socks[i].FD = -1
				break
			}
		}
		if err != nil {
			u.Close()
			for _, a := range socks {
				if a.FD >= 0 {
					unix.Close(a.FD)
				}
			}
			return fmt.Errorf("worker %d: XDP socket: %w", w.idx, err)
		}
		xw, err := afxdp.AdoptWorkerUMEM(st, u, socks)
		if err != nil {
			return fmt.Errorf("worker %d: %w", w.idx, err)
		}
		w.xdp.adopted = xw
	}
	return nil
}

// bindTakenOver binds the worker's AF_XDP queues after the takeover (the
// adopted sockets, or new ones for queues the predecessor did not serve)
// and makes its sockets its transmit handles on their ports instead of the
// AF_PACKET ones New opened meanwhile (closed in the background: a packet
// socket's close waits for an RCU grace period). Before the worker runs.
func (iw *ioWorker) bindTakenOver() {
	if !iw.xdp.awaitTakeover {
		return
	}
	iw.xdp.awaitTakeover = false
	iw.bind(iw.d.ports.Load())
	var stale []txHandle
	for id, p := range iw.txs.ports {
		if p == nil || p.xp == nil || iw.txs.own[id] == nil {
			continue
		}
		if xs := iw.sockets(p); xs != nil {
			stale = append(stale, iw.txs.own[id])
			iw.txs.txs[id], iw.txs.own[id] = xs, nil
		}
	}
	if len(stale) > 0 {
		go closeTxs(stale)
	}
}

// adoptLock takes the port lock's socket over (the old daemon's copy goes
// with it).
func (d *Daemon) adoptLock(name string) (*portLock, bool, error) {
	hp, found := d.succ.ports[name]
	if !found || hp.LockFD < 0 {
		return nil, false, nil
	}
	fd, err := d.succ.cl.TakeFD(hp.LockFD)
	if err != nil {
		return nil, true, err
	}
	f := os.NewFile(uintptr(fd), "port lock "+name)
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return nil, true, err
	}
	ul, ok := ln.(*net.UnixListener)
	if !ok {
		ln.Close()
		return nil, true, fmt.Errorf("%s: the port lock handed over is not a unix socket", name)
	}
	ul.SetUnlinkOnClose(false)
	l := &portLock{ln: ul}
	go l.serve()
	return l, true, nil
}

// takeListener returns the running daemon's listener for purpose if it
// listens on addr (nil: bind anew).
func (d *Daemon) takeListener(purpose, addr string) (net.Listener, error) {
	if d.succ == nil {
		return nil, nil
	}
	l, ok := d.succ.prep.Listeners[purpose]
	if !ok || l.FD < 0 || !sameAddr(l.Addr, addr) {
		return nil, nil
	}
	fd, err := d.succ.cl.TakeFD(l.FD)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), purpose+" listener")
	defer f.Close()
	return net.FileListener(f)
}

// sameAddr: the listener bound to have (host:port, as Addr prints it)
// serves the address want (as configured: a name or :port).
func sameAddr(have, want string) bool {
	if have == want {
		return true
	}
	a, err1 := net.ResolveTCPAddr("tcp", have)
	b, err2 := net.ResolveTCPAddr("tcp", want)
	return err1 == nil && err2 == nil && a.Port == b.Port && (a.IP.Equal(b.IP) || len(b.IP) == 0)
}

// takeOver pauses the running daemon and continues its rings; Run calls it
// right before the workers start, and finish once they forward.
func (d *Daemon) takeOver() error {
	// The handover socket's name is this process's since New: a restart
	// of this one asked for meanwhile is refused, naming this process,
	// until the predecessor is gone (finishTakeover).
	if d.handoverSrv != nil {
		d.handoverSrv.Hold(os.Getpid())
	}
	// The priority of the predecessor (read before it changes).
	prio, prioErr := priorityOf(d.succ.prep.PID)
	defer d.succ.closeUMEMs() // those of workers that did not take theirs
	if err := d.mapUMEMs(); err != nil {
		return err
	}
	// The neighbours the predecessor had learned at prepare: installed
	// now, while it forwards, not in the gap.
	if len(d.succ.prep.Neighbours) > 0 {
		if err := d.installNeighbours(d.succ.prep.Neighbours); err != nil {
			d.log.Warn("hot restart: neighbours of the previous process", "err", err)
		}
	}
	// Collect now, not in the milliseconds the rings fill up while
	// nobody reads them: the start made garbage (config, engine, FIB).
	runtime.GC()
	// The predecessor's priority from now on (priority.go): this process
	// forwards next. Not earlier: everything above ran with what the
	// forwarder leaves. Not knowing it, the default: never the background.
	if prioErr != nil {
		d.log.Warn("hot restart: the previous process's priority; taking the default", "err", prioErr)
		prio = processPriority{threads: schedPriority{policy: unix.SCHED_NORMAL}, hasGroup: true}
	}
	s := d.succ
	s.prioMu.Lock()
	s.tookPriority = true // the guard leaves the priority alone from now on
	s.prioMu.Unlock()
	s.idleGuard.Stop()
	if err := setPriority(prio); err != nil {
		d.log.Warn("hot restart: taking the previous process's priority", "err", err)
	}
	s.start = time.Now()
	paused, err := s.cl.Pause()
	if err != nil {
		return err
	}
	s.pause, s.pauseInPredecessor = time.Since(s.start), paused.Took
	if d.opts.AfterPause != nil {
		d.opts.AfterPause()
	}
	s.dropsAtPause = d.ringDrops()
	for _, p := range d.ports.Load().list {
		if pos, ok := paused.Positions[p.name]; ok && p.pk != nil {
			if err := p.pk.SetQueuePositions(pos); err != nil {
				return err
			}
		}
		if pos, ok := paused.ControlPositions[p.name]; ok && p.ctl != nil {
			if err := p.ctl.SetQueuePositions(pos); err != nil {
				return err
			}
		}
	}
	if err := d.adoptXDPWorkers(paused.XDP); err != nil {
		return err
	}
	if len(paused.Neighbours) > 0 {
		if err := d.installNeighbours(paused.Neighbours); err != nil {
			d.log.Warn("hot restart: neighbours of the previous process", "err", err)
		}
	}
	// Everything so far is this process's own (positions, mappings,
	// descriptor copies): the predecessor may still resume. From the
	// commit's answer on, the rings are this process's (handover.go).
	t0 := time.Now()
	if err := s.cl.Commit(); err != nil {
		return err
	}
	if s.cl.Commits() {
		s.commit = time.Since(t0)
	}
	// The sockets' names: a client finds this process from now on.
	if d.ctlSrv != nil {
		if err := d.ctlSrv.Install(); err != nil {
			d.log.Error("hot restart: the control socket keeps a temporary name", "err", err)
		}
	}
	if d.handoverSrv != nil {
		if err := d.handoverSrv.Install(); err != nil {
			d.log.Error("hot restart: the handover socket keeps a temporary name", "err", err)
		}
	}
	for _, w := range d.workers {
		w.bindTakenOver()
	}
	return nil
}

// allWorkers reports whether every worker that has not exited is ok.
func (d *Daemon) allWorkers(ok func(*ioWorker) bool) bool {
	for _, w := range d.workers {
		if !w.exited() && !ok(w) {
			return false
		}
	}
	return true
}

// catchUpLimit bounds catchUp: at saturation the rings never empty.
const catchUpLimit = 200 * time.Millisecond

// catchUp waits, at most limit, until every new worker has bound its
// queues and once found them all empty: the backlog the gap left in the
// rings is worked off. Until then nothing else of this process starts
// (servers, route sources) and the predecessor is not told to exit, so
// the workers have the CPU while the rings are fullest.
func (d *Daemon) catchUp(limit time.Duration) {
	s := d.succ
	deadline := time.Now().Add(limit)
	for !d.allWorkers(func(w *ioWorker) bool { return w.startedAt.Load() != 0 && w.idle.Load() }) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
	s.caughtUp = time.Since(s.start)
	s.dropsCaughtUp = d.ringDrops()
	for _, w := range d.workers {
		if b := w.startedAt.Load(); b != 0 {
			s.gap = max(s.gap, time.Unix(0, b).Sub(s.start))
		}
	}
}

// finishTakeover tells the old daemon to exit and forgets it.
func (d *Daemon) finishTakeover() {
	s := d.succ
	d.succ = nil
	if err := s.cl.Done(); err != nil {
		d.log.Warn("hot restart: the previous process did not confirm", "err", err)
	}
	for _, p := range d.ports.Load().list {
		if p.xp != nil {
			p.xp.Own() // the old daemon lets go: this one detaches and restores at its exit
		}
	}
	exited := s.cl.WaitExit(10 * time.Second)
	s.cl.Close()
	if d.handoverSrv != nil {
		d.handoverSrv.Release(os.Getpid()) // a restart of this process may begin
	}
	d.log.Info("hot restart: took over", "from_pid", s.prep.PID, "takeover_gap", s.gap.Round(time.Microsecond),
		"pause", s.pause.Round(time.Microsecond), "pause_in_predecessor", s.pauseInPredecessor.Round(time.Microsecond),
		"commit", s.commit.Round(time.Microsecond), "protocol", s.cl.Peer(),
		"caught_up", s.caughtUp.Round(time.Microsecond),
		"ring_drops_unread_at_pause", s.dropsAtPause, "ring_drops_catching_up", s.dropsCaughtUp-s.dropsAtPause,
		"previous_exit", time.Since(s.start).Round(time.Millisecond), "previous_exited", exited)
}

// listen binds a TCP listener for purpose, or takes the running daemon's
// over in a hot restart.
func (d *Daemon) listen(purpose, addr string) (net.Listener, error) {
	ln, err := d.takeListener(purpose, addr)
	if ln != nil || err != nil {
		return ln, err
	}
	return listenRetry(addr, d.opts.ListenWait, d.log)
}

// predecessorPID is the pid of the daemon a hot restart takes over from
// (0: none).
func (d *Daemon) predecessorPID() int {
	if d.succ == nil {
		return 0
	}
	return d.succ.prep.PID
}

// ringDrops sums the frames the kernel could not put in the receive rings
// (what the rings lost since the last read, whichever process read it).
func (d *Daemon) ringDrops() uint64 {
	var n uint64
	for _, p := range d.ports.Load().list {
		if p.pk != nil {
			n += p.pk.Stats().Rx.RingDrops
		}
	}
	return n
}
