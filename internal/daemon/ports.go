package daemon

// Ports: the real interfaces the config names, opened with pktio in the
// daemon's namespace, and the immutable table the workers read.
//
// Flow: openPorts takes each interface's lock (portlock.go: a second daemon
// on the same interface is refused) and opens all of them in parallel (all
// or none, naming the interface that failed); publish installs a new table;
// workers notice the new generation before their next batch, bind the
// queues and transmit handles of new ports and drop those of ports that
// left, then acknowledge the generation. retire waits for every worker's
// acknowledgement before it unmaps a port's rings: a worker may still hold
// frames in them until then.
//
// Opening and closing packet sockets costs an RCU grace period each in the
// kernel (packet_set_ring and packet_release call synchronize_net), so
// ports are opened and closed concurrently: a 48-port router starts and
// stops in about the time of one port.
//
// Locking: the table is copy-on-write behind Daemon.ports (atomic); writers
// hold Daemon.mu.

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/pktio/afpacket"
	"github.com/netfwd/netfwd/internal/pktio/afxdp"
	"github.com/netfwd/netfwd/l2"
)

// port is one opened interface. Immutable once published, except the
// fields the link monitor's goroutine owns.
type port struct {
	name    string
	capture atomic.Pointer[captureSession] // a running `capture` (capture.go), or nil
	pk      *afpacket.Port                 // AF_PACKET, or nil (portio.go)
	ctl     *afpacket.Port                 // AF_PACKET with a host path: the control ring (controlworker.go), or nil
	xp      *afxdp.Port                    // AF_XDP, or nil
	ioWhy   string                         // why --io auto took AF_PACKET ("" when it did not)
	l2      *l2.Port
	ifindex int // the kernel's index at open; a re-created interface gets a new one
	mtu     int // the kernel's MTU at open
	carrier bool
	lock    *portLock
	guard   *kernelGuard // with a host path: the kernel's own input on the port dropped (kernelguard.go; nil: none)
}

// portTable is one published set of ports. Immutable.
type portTable struct {
	gen  uint64
	list []*port
	byID []*port // by l2.PortID; nil holes
}

func (t *portTable) byName(name string) *port {
	for _, p := range t.list {
		if p.name == name {
			return p
		}
	}
	return nil
}

func (t *portTable) get(id l2.PortID) *port {
	if int(id) < len(t.byID) {
		return t.byID[id]
	}
	return nil
}

// openPorts opens the named interfaces that are not open yet, in parallel.
// On error nothing stays open.
func (d *Daemon) openPorts(names []string) ([]*port, error) {
	cur := d.ports.Load()
	var todo []string
	for _, name := range names {
		if cur.byName(name) == nil {
			todo = append(todo, name)
		}
	}
	out := make([]*port, len(todo))
	errs := make([]error, len(todo))
	parallel(len(todo), func(i int) { out[i], errs[i] = d.openPort(todo[i]) })
	if err := errors.Join(errs...); err != nil {
		closePortsParallel(out)
		return nil, err
	}
	for _, p := range out {
		switch {
		case p.ioWhy == errVethAuto.Error():
			d.log.Info("port opened with AF_PACKET, the default on veth", "dev", p.name, "queues", p.queues(), "why", p.ioWhy)
		case p.ioWhy != "":
			d.log.Warn("port opened with AF_PACKET: AF_XDP is not available", "dev", p.name, "why", p.ioWhy)
		default:
			d.log.Info("port opened", "dev", p.name, "io", p.ioName(), "queues", p.queues())
		}
	}
	return out, nil
}

// openPort opens one interface in the daemon's namespace.
func (d *Daemon) openPort(name string) (*port, error) {
	var p *port
	err := pktio.InNetns(d.opts.Netns, func() error {
		ifi, err := net.InterfaceByName(name)
		if err != nil {
			return fmt.Errorf("Cannot find device %q", name) // iproute2's words
		}
		// With a host path, the box's stack has the router's addresses (on
		// the twins): it must not also answer on the port itself, from
		// before the port's sockets exist (kernelguard.go).
		var guard *kernelGuard
		if d.opts.HostPath {
			if guard = d.takeEarlyGuard(name, ifi.Index); guard == nil {
				if guard, err = attachKernelGuard(ifi.Index); err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
			}
		}
		fail := func(err error) error {
			if guard != nil {
				guard.Close()
			}
			return fmt.Errorf("%s: %w", name, err)
		}
		var lock *portLock
		var pk, ctl *afpacket.Port
		var xp *afxdp.Port
		var why string
		adopted := false
		if d.succ != nil { // hot restart: the running daemon's port, if it has it
			var err error
			if lock, adopted, err = d.adoptLock(name); err != nil {
				return fail(err)
			}
			if adopted {
				if pk, ctl, xp, _, err = d.adoptPort(name); err != nil {
					lock.release()
					return fail(err)
				}
			}
		}
		if !adopted {
			var err error
			if lock, err = lockPort(ifi, d.opts.PortLockWait); err != nil {
				if guard != nil {
					guard.Close()
				}
				return err
			}
			if pk, ctl, xp, why, err = d.openIO(ifi); err != nil {
				lock.release()
				return fail(err)
			}
		}
		p = &port{name: name, pk: pk, ctl: ctl, xp: xp, ioWhy: why, ifindex: ifi.Index, mtu: ifi.MTU,
			carrier: ifi.Flags&net.FlagRunning != 0, lock: lock, guard: guard}
		return nil
	})
	if err != nil && d.opts.Netns != "" && !errors.Is(err, pktio.ErrClosed) {
		err = fmt.Errorf("%w (in netns %s)", err, d.opts.Netns)
	}
	return p, err
}

// close releases everything of a port no worker uses any more.
func (p *port) close() error {
	err := p.closeIO()
	if p.guard != nil {
		err = errors.Join(err, p.guard.Close())
	}
	p.lock.release()
	return err
}

// closePortsParallel closes ports (nil entries skipped) concurrently.
func closePortsParallel(ps []*port) error {
	errs := make([]error, len(ps))
	parallel(len(ps), func(i int) {
		if ps[i] != nil {
			errs[i] = ps[i].close()
		}
	})
	return errors.Join(errs...)
}

// parallel runs fn(0..n-1) on at most 64 goroutines and waits.
func parallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(i)
		}()
	}
	wg.Wait()
}

// publishLocked installs a table with ports added and ports removed (by
// pointer) and wakes the workers. The added ports must exist in the
// engine's domain (the config naming them has been applied).
func (d *Daemon) publishLocked(add []*port, remove []*port) (*portTable, error) {
	old := d.ports.Load()
	next := &portTable{gen: old.gen + 1}
	for _, p := range old.list {
		keep := true
		for _, r := range remove {
			keep = keep && p != r
		}
		if keep {
			next.list = append(next.list, p)
		}
	}
	for _, p := range add {
		if p.l2 = d.e.Domain().Port(p.name); p.l2 == nil {
			return nil, fmt.Errorf("%s: not a port of the engine", p.name)
		}
		next.list = append(next.list, p)
	}
	for _, p := range next.list {
		for int(p.l2.ID) >= len(next.byID) {
			next.byID = append(next.byID, nil)
		}
		next.byID[p.l2.ID] = p
	}
	d.ports.Store(next)
	for _, u := range d.tableUsers() {
		u.wake()
	}
	return next, nil
}

// addPorts publishes the opened ports; on error they are closed.
func (d *Daemon) addPorts(ps []*port) error {
	if len(ps) == 0 {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		closePortsParallel(ps)
		return errors.New("daemon is shutting down")
	}
	if _, err := d.publishLocked(ps, nil); err != nil {
		closePortsParallel(ps)
		return err
	}
	return nil
}

// retire removes a port from the table and closes it once no worker can
// touch its rings any more.
func (d *Daemon) retire(p *port) error {
	d.mu.Lock()
	t, err := d.publishLocked(nil, []*port{p})
	running := d.running && !d.stopped
	d.mu.Unlock()
	if err != nil {
		return err
	}
	p.shutdown() // a worker blocked on it returns at once
	if running {
		d.waitWorkers(t.gen)
	}
	return p.close()
}

// waitWorkers waits until every goroutine that holds port resources runs
// with table generation gen or later (or has exited), for at most a few
// seconds: a worker is never blocked for long (its sends give up once the
// port is shut down).
func (d *Daemon) waitWorkers(gen uint64) {
	deadline := time.Now().Add(5 * time.Second)
	for _, u := range d.tableUsers() {
		for !u.caughtUp(gen) && time.Now().Before(deadline) {
			u.wake()
			time.Sleep(time.Millisecond)
		}
	}
}
