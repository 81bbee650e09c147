package daemon

// Ports: the real interfaces the config names, opened with pktio (one
// PACKET_FANOUT group of Workers queues each) in the daemon's namespace, and
// the immutable table the workers read to find the pktio port of an engine
// port.
//
// Flow: openPorts checks that every interface exists and opens them all (or
// closes what it opened and fails, naming the interface); addPorts
// publishes a new table with them (workers notice the new generation at
// their next batch and open transmit handles for the new ports);
// startPortLocked starts one goroutine per queue.
//
// Locking: the table is copy-on-write behind Daemon.ports (atomic); writers
// hold Daemon.mu.

import (
	"errors"
	"fmt"
	"net"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/l2"
)

// port is one opened interface.
type port struct {
	name    string
	io      *pktio.Port
	l2      *l2.Port
	carrier bool // at open (the link monitor follows changes)
	started bool // guarded by Daemon.mu
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

// openPorts opens the named interfaces that are not open yet.
func (d *Daemon) openPorts(names []string) ([]*port, error) {
	cur := d.ports.Load()
	var out []*port
	fail := func(err error) ([]*port, error) {
		for _, p := range out {
			p.io.Close()
		}
		return nil, err
	}
	cfg := d.opts.PktIO
	cfg.Queues = d.opts.Workers
	for _, name := range names {
		if cur.byName(name) != nil {
			continue
		}
		var p *port
		err := pktio.InNetns(d.opts.Netns, func() error {
			ifi, err := net.InterfaceByName(name)
			if err != nil {
				return fmt.Errorf("%s: no such interface", name)
			}
			io, err := pktio.Open(name, cfg)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			p = &port{name: name, io: io, carrier: ifi.Flags&net.FlagRunning != 0}
			return nil
		})
		if err != nil {
			if d.opts.Netns != "" && !errors.Is(err, pktio.ErrClosed) {
				err = fmt.Errorf("%w (in netns %s)", err, d.opts.Netns)
			}
			return fail(err)
		}
		out = append(out, p)
	}
	return out, nil
}

// addPorts publishes a table with the new ports (they must exist in the
// engine's domain: the config naming them has been applied).
func (d *Daemon) addPorts(ps []*port) error {
	if len(ps) == 0 {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	old := d.ports.Load()
	next := &portTable{gen: old.gen + 1, list: append(append([]*port(nil), old.list...), ps...)}
	for _, p := range ps {
		if p.l2 = d.e.Domain().Port(p.name); p.l2 == nil {
			for _, q := range ps {
				q.io.Close()
			}
			return fmt.Errorf("%s: not a port of the engine", p.name)
		}
	}
	for _, p := range next.list {
		for int(p.l2.ID) >= len(next.byID) {
			next.byID = append(next.byID, nil)
		}
		next.byID[p.l2.ID] = p
	}
	d.ports.Store(next)
	if d.running && !d.stopped {
		for _, p := range ps {
			d.startPortLocked(p)
		}
	}
	return nil
}

// startPortLocked starts the receive goroutines of a port.
func (d *Daemon) startPortLocked(p *port) {
	if p.started {
		return
	}
	p.started = true
	for i := range p.io.Queues() {
		qw := newQueueWorker(d, p, p.io.Queue(i))
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			qw.run()
		}()
	}
}
