package pktio

// port: a Port is one Linux interface opened for the daemon: Queues sockets
// in one PACKET_FANOUT hash group (each with its own RX ring, one per worker
// goroutine) plus the Tx handles workers create to send on it.
//
// Flow: Open -> per queue: openSocket (drop-all filter), ring, mmap,
// PACKET_IGNORE_OUTGOING, promiscuous membership, fanout join, real filter.
// Shutdown closes the sockets (blocked owners return ErrClosed); Close also
// unmaps the rings once the owners are gone.
//
// Locking: mu guards txs and the shutdown/closed state; the datapath
// (Queue.Recv, Tx.Send) never takes it.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Port is one interface opened for packet I/O.
type Port struct {
	// Name, Index, MAC and MTU describe the interface at Open.
	Name  string
	Index int
	MAC   net.HardwareAddr
	MTU   int

	cfg      Config
	ifi      *net.Interface
	netns    *os.File // the namespace the port was opened in: Tx sockets go there too
	queues   []*Queue
	fanoutID int // -1 without fanout

	mu       sync.Mutex
	txs      []*Tx // guarded by mu
	shutdown bool  // guarded by mu
	closed   bool  // guarded by mu
	// Ring statistics already read from the kernel (clear-on-read), and
	// counters of closed Tx handles; guarded by mu.
	retiredTx TxStats
}

// Open opens the interface named name in the calling goroutine's network
// namespace (see InNetns for another one).
func Open(name string, cfg Config) (*Port, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("pktio: interface %q: %w", name, err)
	}
	ns, err := currentNetns()
	if err != nil {
		return nil, fmt.Errorf("pktio: %s: %w", name, err)
	}
	p := &Port{Name: ifi.Name, Index: ifi.Index, MAC: ifi.HardwareAddr, MTU: ifi.MTU,
		cfg: cfg, ifi: ifi, netns: ns, fanoutID: -1}
	for i := range cfg.Queues {
		q, err := p.openQueue(i)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("pktio: %s queue %d: %w", name, i, err)
		}
		p.queues = append(p.queues, q)
	}
	return p, nil
}

func (p *Port) openQueue(i int) (*Queue, error) {
	s, err := openSocket(p.ifi, ethPAll)
	if err != nil {
		return nil, err
	}
	q, err := newQueue(p, i, s, &p.cfg)
	if err != nil {
		s.close()
		return nil, err
	}
	fail := func(err error) (*Queue, error) {
		q.sock.close()
		q.unmap()
		return nil, err
	}
	if err := s.setInt(unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1, "PACKET_IGNORE_OUTGOING"); err != nil {
		return fail(err)
	}
	if !p.cfg.NotPromiscuous {
		if err := s.conn.SetPromiscuous(true); err != nil {
			return fail(fmt.Errorf("promiscuous: %w", err))
		}
	}
	if p.cfg.Queues > 1 {
		id, err := s.joinFanout(p.fanoutID)
		if err != nil {
			return fail(err)
		}
		p.fanoutID = id
	}
	if err := s.setFilter(p.cfg.Filter); err != nil {
		return fail(err)
	}
	return q, nil
}

// Queues is the number of receive queues (Config.Queues).
func (p *Port) Queues() int { return len(p.queues) }

// Queue returns receive queue i, 0 <= i < Queues().
func (p *Port) Queue(i int) *Queue { return p.queues[i] }

// Config returns the effective configuration (defaults filled).
func (p *Port) Config() Config { return p.cfg }

// FanoutID is the kernel fanout group id of the port's queues, -1 with one
// queue.
func (p *Port) FanoutID() int { return p.fanoutID }

// NewTx opens a transmit handle on the port for one owner goroutine. Its
// socket is created in the port's network namespace, whichever namespace
// the caller runs in.
func (p *Port) NewTx() (*Tx, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shutdown {
		return nil, ErrClosed
	}
	var t *Tx
	err := inNetnsFile(p.netns, p.Name, func() error {
		var err error
		t, err = newTx(p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pktio: %s tx: %w", p.Name, err)
	}
	p.txs = append(p.txs, t)
	return t, nil
}

// Shutdown closes every socket of the port: owners blocked in Recv or Send
// return ErrClosed, later calls too. Ring memory stays mapped until Close.
// Safe from any goroutine, any number of times.
func (p *Port) Shutdown() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shutdownLocked()
}

func (p *Port) shutdownLocked() {
	if p.shutdown {
		return
	}
	p.shutdown = true
	for _, q := range p.queues {
		q.closed.Store(true)
		q.sock.close()
	}
	for _, t := range p.txs {
		t.closed.Store(true) // owners see it within one poll timeout
	}
}

// Close shuts the port down and unmaps its rings. Call it after the owner
// goroutines of its queues and Tx handles have returned: frames they still
// hold point into the rings.
func (p *Port) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shutdownLocked()
	if p.closed {
		return nil
	}
	p.closed = true
	var errs []error
	for _, q := range p.queues {
		errs = append(errs, q.unmap())
	}
	for _, t := range p.txs {
		t.closeSockets()
		errs = append(errs, t.unmap())
	}
	errs = append(errs, p.netns.Close())
	return errors.Join(errs...)
}
