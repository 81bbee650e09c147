package daemon

// Hot restart (internal/handover): both sides of taking the ports over
// from a running netfwd while it forwards.
//
// The running daemon (handoverSource) serves its handover socket: it
// describes its AF_PACKET ports (receive sockets, ring layout, port lock)
// and listeners; on pause its workers park at a batch boundary (the frames
// of their last batch released) and it reports the rings' positions and
// its learned neighbours; on done it shuts down as on SIGTERM, closing only
// its own copies of the descriptors.
//
// The new daemon (Options.Takeover) prepares in New: the same sockets are
// adopted (afpacket.Adopt) instead of opened, the listeners taken instead of
// bound, the twins taken from the keeper or the old process
// (hostpath.Options.Predecessor), the control socket renamed over the old
// one. Run pauses the old daemon, continues each ring where it stopped,
// starts the workers and says done. Frames that arrive in between wait in
// the rings: the gap is what Run measures and logs (takeover_gap).
//
// AF_XDP ports are not handed over (their UMEM is the old process's
// memory): the old daemon refuses, and the new one reports it.
//
// Locking: pause/resume are atomics and a channel the workers wait on;
// handoverSource's methods run on the handover server's goroutine.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/handover"
	"github.com/netfwd/netfwd/internal/pktio/afpacket"
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
	iw.parked.Store(true)
	defer iw.parked.Store(false)
	select {
	case <-resume:
		return true
	case <-d.stop:
		return false
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
	for _, pt := range d.ports.Load().list {
		if pt.pk == nil {
			return p, fmt.Errorf("%s uses AF_XDP: a hot restart hands over AF_PACKET rings only (restart it: SIGTERM and start)", pt.name)
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
	add := func(name string, ln net.Listener) {
		if ln != nil {
			p.Listeners[name] = handover.Listener{Addr: ln.Addr().String(), FD: listenerFD(ln)}
		}
	}
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
	d.paused.Store(true)
	deadline := time.Now().Add(3 * time.Second)
	for _, w := range d.workers {
		for !w.parked.Load() && !w.exited() {
			if time.Now().After(deadline) {
				s.Resume()
				return handover.Paused{}, fmt.Errorf("worker %d did not pause", w.idx)
			}
			w.wake()
			time.Sleep(50 * time.Microsecond)
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
	out.Neighbours = d.learnedNeighbours()
	return out, nil
}

func (s handoverSource) Resume() {
	d := s.d
	d.paused.Store(false)
	d.pauseMu.Lock()
	close(d.pause.resume)
	d.pause.resume = nil
	d.pauseMu.Unlock()
	for _, w := range d.workers {
		w.wake()
	}
}

func (s handoverSource) Finish() {
	setProcessNice(niceIdle) // the shutdown must not take CPU from the successor's workers (nice.go)
	s.d.handedOver.Store(true)
	s.d.finishOnce.Do(func() { close(s.d.finish) })
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
	d.log.Info("hot restart: taking over", "from_pid", prep.PID, "ports", len(prep.Ports))
	return nil
}

// adoptPort takes a port's receive sockets (and control ring) over from
// the running daemon; ok is false when it does not hold the port.
func (d *Daemon) adoptPort(name string) (pk, ctl *afpacket.Port, ok bool, err error) {
	hp, found := d.succ.ports[name]
	if !found {
		return nil, nil, false, nil
	}
	if hp.Config.Queues != d.opts.Workers {
		return nil, nil, true, fmt.Errorf("%s: the running netfwd reads it with %d queues, this one has %d workers: a hot restart keeps the rings (start with --workers %d)",
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
		return nil, nil, true, err
	}
	if hp.Control != nil && d.opts.HostPath {
		if ctl, err = adopt(*hp.Control); err != nil {
			pk.Shutdown()
			pk.Close()
			return nil, nil, true, err
		}
	}
	return pk, ctl, true, nil
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
func (d *Daemon) takeOver() (time.Time, error) {
	// The predecessor's priority from now on (nice.go): this process
	// forwards next.
	if nice, err := processNice(d.succ.prep.PID); err == nil {
		setProcessNice(nice)
	}
	t0 := time.Now()
	paused, err := d.succ.cl.Pause()
	if err != nil {
		return t0, err
	}
	d.pauseTook = time.Since(t0)
	for _, p := range d.ports.Load().list {
		if pos, ok := paused.Positions[p.name]; ok && p.pk != nil {
			if err := p.pk.SetQueuePositions(pos); err != nil {
				return t0, err
			}
		}
		if pos, ok := paused.ControlPositions[p.name]; ok && p.ctl != nil {
			if err := p.ctl.SetQueuePositions(pos); err != nil {
				return t0, err
			}
		}
	}
	if len(paused.Neighbours) > 0 {
		if err := d.installNeighbours(paused.Neighbours); err != nil {
			d.log.Warn("hot restart: neighbours of the previous process", "err", err)
		}
	}
	return t0, nil
}

// finishTakeover tells the old daemon to exit and forgets it.
func (d *Daemon) finishTakeover(t0 time.Time, gap time.Duration) {
	s := d.succ
	d.succ = nil
	if err := s.cl.Done(); err != nil {
		d.log.Warn("hot restart: the previous process did not confirm", "err", err)
	}
	exited := s.cl.WaitExit(10 * time.Second)
	s.cl.Close()
	d.log.Info("hot restart: took over", "from_pid", s.prep.PID, "takeover_gap", gap.Round(time.Microsecond),
		"pause", d.pauseTook.Round(time.Microsecond), "previous_exit", time.Since(t0).Round(time.Millisecond), "previous_exited", exited)
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
