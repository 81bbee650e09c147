package afxdp

// xdpport: an Port is one Linux interface opened for AF_XDP: its socket
// map (XSKMAP, one slot per queue), the steering program and the bpf_link
// that attaches it. The sockets themselves belong to workers (Worker.Bind
// registers a worker's socket in slot q); the port only keeps the list, for
// its counters and for detaching.
//
// Flow: Open -> queue count (ethtool channels) -> map -> program ->
// attach (native, else generic; a stale netfwd program is replaced) ->
// NAPI deferral when asked (napidefer.go) -> registry
// (DetachXDPPrograms). Close detaches, puts the NAPI deferral back and
// closes map and program;
// sockets keep their rings until their workers close them (they simply get
// no more frames).
//
// Locking: mu guards the socket list, the link and the AF_PACKET transmit
// port; the datapath never takes it.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/pktio/afpacket"
)

// Port is one interface opened for AF_XDP.
type Port struct {
	// Name, Index, MAC and MTU describe the interface at Open.
	Name  string
	Index int
	MAC   net.HardwareAddr
	MTU   int

	cfg    PortConfig
	ifi    *net.Interface
	netns  *os.File // sockets must be created in the interface's namespace
	queues int
	attach Attach
	// restoresVLAN: the program puts offloaded VLAN tags back into the bytes.
	restoresVLAN bool
	xsks         *ebpf.Map
	prog         *ebpf.Program
	// napiOld: the NAPI deferral the interface had before NAPIDefer,
	// written back at Close.
	napiOld []napiSetting
	// shared: another process holds the same map and link (a hot
	// restart, handover.go): closing leaves the kernel state alone.
	shared atomic.Bool

	mu      sync.Mutex
	lnk     link.Link            // guarded by mu; nil once detached
	socks   map[*Socket]struct{} // guarded by mu
	retired XDPStats             // counters of closed sockets; guarded by mu
	tx      *afpacket.Port       // AF_PACKET transmit port, opened lazily; guarded by mu
	closed  bool                 // guarded by mu
}

// Open attaches netfwd's steering program to the interface named name
// in the calling goroutine's network namespace (see InNetns). Frames of
// queues without a bound socket go on to the kernel (XDP_PASS).
func Open(name string, cfg PortConfig) (*Port, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("pktio: interface %q: %w", name, err)
	}
	n, err := deviceQueues(ifi.Name, ifi.Index)
	if err != nil {
		return nil, fmt.Errorf("pktio: %s: %w", name, err)
	}
	switch {
	case cfg.Queues < 0 || cfg.Queues > pktio.MaxQueues:
		return nil, fmt.Errorf("pktio: %s: XDP Queues %d out of range 0..%d", name, cfg.Queues, pktio.MaxQueues)
	case cfg.Queues > n:
		return nil, fmt.Errorf("pktio: %s has %d queues, %d asked for", name, n, cfg.Queues)
	case cfg.Queues > 0:
		n = cfg.Queues
	}
	n = min(n, pktio.MaxQueues)
	ns, err := pktio.CurrentNetns()
	if err != nil {
		return nil, fmt.Errorf("pktio: %s: %w", name, err)
	}
	p := &Port{Name: ifi.Name, Index: ifi.Index, MAC: ifi.HardwareAddr, MTU: ifi.MTU,
		cfg: cfg, ifi: ifi, netns: ns, queues: n, socks: map[*Socket]struct{}{}}
	fail := func(err error) (*Port, error) {
		p.closeObjects()
		return nil, fmt.Errorf("pktio: %s: %w", name, err)
	}
	if p.xsks, err = newXSKMap(n); err != nil {
		return fail(err)
	}
	var a xskAttachment
	if p.lnk, p.prog, a, err = attachXSK(p.xsks, ifi.Index, cfg.Attach); err != nil {
		return fail(fmt.Errorf("attach XDP: %w", err))
	}
	p.attach, p.restoresVLAN = a.mode, a.restoreVLAN
	if nd, err := cfg.NAPIDefer.withDefaults(); err != nil || nd.HardIRQs > 0 {
		// After the attach: veth creates its NAPI instances with the program.
		if err == nil {
			p.napiOld, err = applyNAPIDefer(ifi.Index, nd)
		}
		if err != nil {
			p.detach()
			return fail(err)
		}
	}
	registerXDP(p)
	return p, nil
}

// Queues is the number of queues sockets may be bound to (0..Queues-1).
func (p *Port) Queues() int { return p.queues }

// Attach is the mode the program got: AttachNative or AttachGeneric.
func (p *Port) Attach() Attach { return p.attach }

// RestoresVLAN reports whether the program puts a VLAN tag that the driver
// moved into metadata back into the frame (native mode with the kfunc);
// without it such a tag is lost (see docs/pktio.md).
func (p *Port) RestoresVLAN() bool { return p.restoresVLAN }

// NewTx opens an AF_PACKET transmit handle on the interface for a goroutine
// that owns no XDP socket on it (housekeeping, a worker whose queue index
// the port does not have). Frames sent through it are copied by the kernel;
// they leave beside the XDP sockets' frames.
func (p *Port) NewTx() (*afpacket.Tx, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, pktio.ErrClosed
	}
	if p.tx == nil {
		// The transmit port closes its own namespace handle.
		nsfd, err := unix.FcntlInt(p.netns.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			p.mu.Unlock()
			return nil, fmt.Errorf("pktio: %s: %w", p.Name, err)
		}
		ns := os.NewFile(uintptr(nsfd), "netns")
		if p.tx, err = afpacket.NewTxPort(p.ifi, ns, p.cfg.Tx); err != nil {
			ns.Close()
			p.mu.Unlock()
			return nil, err
		}
	}
	tx := p.tx
	p.mu.Unlock()
	return tx.NewTx()
}

// addSocket registers s (bound to queue q) in the map and the list.
func (p *Port) addSocket(s *Socket) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return pktio.ErrClosed
	}
	if err := p.xsks.Put(uint32(s.queue), uint32(s.fd)); err != nil {
		return fmt.Errorf("XSKMAP slot %d: %w", s.queue, err)
	}
	p.socks[s] = struct{}{}
	return nil
}

// removeSocket takes s out of the map and the list before its fd closes,
// keeping its counters.
func (p *Port) removeSocket(s *Socket) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.socks[s]; !ok {
		return
	}
	delete(p.socks, s)
	if !p.closed && !p.shared.Load() {
		p.xsks.Delete(uint32(s.queue)) // the kernel also drops it when the socket closes
	}
	p.retired.add(s.statsLocked())
}

// Stats sums the counters of the port's sockets, closed ones included, in
// the same form as an AF_PACKET Port's.
func (p *Port) Stats() pktio.Stats { return p.XDPStats().Stats }

// XDPStats is Stats with the AF_XDP-only counters.
func (p *Port) XDPStats() XDPStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.retired
	for x := range p.socks {
		s.add(x.statsLocked())
	}
	if p.tx != nil {
		s.Tx.Add(p.tx.Stats().Tx)
	}
	return s
}

// detach removes the program from the interface (idempotent).
func (p *Port) detach() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lnk == nil {
		return nil
	}
	err := p.lnk.Close()
	p.lnk = nil
	return err
}

// Close detaches the program and releases map and program. The sockets
// bound to the port get no frames afterwards; their workers close them.
// Safe to call more than once.
func (p *Port) Close() error {
	unregisterXDP(p)
	err := p.detach()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return err
	}
	p.closed = true
	if p.tx != nil {
		err = errors.Join(err, p.tx.Close())
	}
	return errors.Join(err, p.closeObjectsLocked())
}

func (p *Port) closeObjects() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeObjectsLocked()
}

func (p *Port) closeObjectsLocked() error {
	var errs []error
	if p.napiOld != nil && p.netns != nil && !p.shared.Load() {
		old := p.napiOld
		p.napiOld = nil
		errs = append(errs, pktio.InNetnsFile(p.netns, p.Name, func() error { return restoreNAPIDefer(old) }))
	}
	if p.prog != nil {
		errs = append(errs, p.prog.Close())
		p.prog = nil
	}
	if p.xsks != nil {
		errs = append(errs, p.xsks.Close())
		p.xsks = nil
	}
	if p.netns != nil {
		errs = append(errs, p.netns.Close())
		p.netns = nil
	}
	return errors.Join(errs...)
}
