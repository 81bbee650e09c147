package afpacket

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
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/pktio"
)

// Port is one interface opened for packet I/O.
type Port struct {
	// Name, Index, MAC and MTU describe the interface at Open.
	Name  string
	Index int
	MAC   net.HardwareAddr
	MTU   int

	cfg      Config
	mtu      atomic.Int32 // the device's MTU as last known (SetMTU); Tx refuses longer frames
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
	retiredTx pktio.TxStats
}

// NewTxPort returns a transmit-only Port on ifi (no receive queues, no
// fanout group) for the goroutines of another backend that own no socket
// on the interface (afxdp.Port.NewTx). It takes netns, a handle of the
// interface's namespace, and closes it with the Port.
func NewTxPort(ifi *net.Interface, netns *os.File, cfg Config) (*Port, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &Port{Name: ifi.Name, Index: ifi.Index, MAC: ifi.HardwareAddr, MTU: ifi.MTU, cfg: cfg, ifi: ifi,
		netns: netns, fanoutID: -1}
	p.mtu.Store(int32(ifi.MTU))
	return p, nil
}

// Open opens the interface named name in the calling goroutine's network
// namespace (see InNetns for another one).
func Open(name string, cfg Config) (*Port, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("pktio: interface %q: %w", name, err)
	}
	if cfg, err = cfg.withDefaultsFor(ifi.MTU); err != nil {
		return nil, err
	}
	ns, err := pktio.CurrentNetns()
	if err != nil {
		return nil, fmt.Errorf("pktio: %s: %w", name, err)
	}
	p := &Port{Name: ifi.Name, Index: ifi.Index, MAC: ifi.HardwareAddr, MTU: ifi.MTU,
		cfg: cfg, ifi: ifi, netns: ns, fanoutID: -1}
	p.mtu.Store(int32(ifi.MTU))
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
		id, err := s.joinFanout(p.fanoutID, !p.cfg.NoRollover)
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

// SetMTU tells the port the device's MTU changed (the daemon follows the
// kernel's link messages): transmit handles refuse, and count, frames
// longer than the device takes instead of letting the kernel drop them
// silently.
func (p *Port) SetMTU(mtu int) { p.mtu.Store(int32(mtu)) }

// Queues is the number of receive queues (Config.Queues).
func (p *Port) Queues() int { return len(p.queues) }

// Queue returns receive queue i, 0 <= i < Queues().
func (p *Port) Queue(i int) *Queue { return p.queues[i] }

// Config returns the effective configuration (defaults filled).
func (p *Port) Config() Config { return p.cfg }

// FanoutID is the kernel fanout group id of the port's queues, -1 with one
// queue.
func (p *Port) FanoutID() int { return p.fanoutID }

// NewTx opens a transmit handle on the port for one owner goroutine, in the
// configured mode (Config.Tx). Its socket is created in the port's network
// namespace, whichever namespace the caller runs in.
func (p *Port) NewTx() (*Tx, error) { return p.NewTxMode(p.cfg.Tx) }

// NewTxMode is NewTx with another transmit mode: TxSendmmsg handles have no
// ring memory, for goroutines that send little.
func (p *Port) NewTxMode(mode TxMode) (*Tx, error) {
	p.mu.Lock()
	shutdown := p.shutdown
	p.mu.Unlock()
	if shutdown {
		return nil, pktio.ErrClosed
	}
	// Set up without the lock: a ring costs an RCU grace period in the
	// kernel, and the workers open their handles concurrently.
	var t *Tx
	err := pktio.InNetnsFile(p.netns, p.Name, func() error {
		var err error
		t, err = newTx(p, mode)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pktio: %s tx: %w", p.Name, err)
	}
	p.mu.Lock()
	if p.shutdown {
		p.mu.Unlock()
		t.release()
		return nil, pktio.ErrClosed
	}
	p.txs = append(p.txs, t)
	p.mu.Unlock()
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
	// The sockets stay open until Close: a packet socket whose ring is
	// still mapped is released by the munmap, which then waits for RCU
	// grace periods and serialises on the address space (~25 ms each here);
	// unmapped first, it closes quickly and concurrently. A blocked Recv is
	// woken by an expired deadline instead.
	for _, q := range p.queues {
		q.closed.Store(true)
		q.sock.wake()
	}
	for _, t := range p.txs {
		t.closed.Store(true) // owners see it within one poll timeout
	}
}

// HandedOver: another process reads the port's queues from now on (a hot
// restart's successor committed; it holds the same sockets). The port
// shuts down, and this process closes its descriptors of the receive
// sockets at once, not at Close: a descriptor in the Go netpoller is woken
// by every frame the other process receives (sock_def_readable reaches
// every epoll set of the socket), and the kernel's clear-on-read ring
// statistics are the other process's to read. The rings stay mapped until
// Close. The owners of the queues must not read them again (they are
// parked, and exit).
func (p *Port) HandedOver() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shutdownLocked()
	var errs []error
	for _, q := range p.queues {
		errs = append(errs, q.sock.close())
	}
	return errors.Join(errs...)
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
	errs := make([]error, len(p.queues)+len(p.txs)+1)
	var wg sync.WaitGroup
	for i, q := range p.queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = errors.Join(q.unmap(), q.sock.close())
		}()
	}
	for i, t := range p.txs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[len(p.queues)+i] = t.release()
		}()
	}
	wg.Wait()
	errs[len(errs)-1] = p.netns.Close()
	return errors.Join(errs...)
}
