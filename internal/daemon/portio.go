package daemon

// Port I/O backends: a port is opened with AF_XDP or AF_PACKET (--io). This
// file is the one place in the daemon that names a backend: it opens ports,
// a worker's queues (openQueue), its AF_XDP worker (ensureXDP) and transmit
// handles (newTx), and hands them to worker.go as pktio.Receiver, Sender,
// Waitable and Waiter.
//   - afpacket: an afpacket.Port: a PACKET_FANOUT group of Workers receive
//     queues (worker i reads queue i) and transmit handles per owner;
//   - afxdp: an afxdp.Port: the steering program on the interface; each
//     worker binds an XDP socket on its queue of the port (sharing the
//     worker's UMEM, so forwarded frames leave by descriptor) and sends on
//     it; a worker whose queue number the interface lacks, and the
//     housekeeping, send through AF_PACKET handles;
//   - auto: AF_XDP where the program attaches in native (driver) mode and
//     the MTU fits its frames, else AF_PACKET, with the reason logged. Not on
//     veth: a veth hands the sender's CHECKSUM_PARTIAL frames to XDP with
//     the checksum unfinished and nothing to tell so (no XDP metadata for
//     it), and with a program attached its peer stops sending GSO
//     super-frames; AF_PACKET sees both in the virtio-net header, so local
//     TCP through a veth keeps working and keeps its 64 KiB segments.
//     `--io afxdp` takes AF_XDP on veth too (native, else generic): for
//     traffic from generators and stacks without checksum offload.
// AF_XDP hands every frame of the port to netfwd: the kernel of the
// router's namespace sees none of them (the host path decides what it
// gets), exactly as with AF_PACKET, where routed frames are PACKET_OTHERHOST
// for it.
//
// Locking: a port's backend is fixed when it opens; the methods are safe
// where their backends' counterparts are; an ioWorker's xdpWorker belongs
// to its goroutine, except wake and waitStats (any goroutine).

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/pktio/afpacket"
	"github.com/netfwd/netfwd/internal/pktio/afxdp"
)

// xdpFrameMTU is the largest MTU an AF_XDP port takes with the default
// 2 KiB UMEM frames (the kernel keeps 256 bytes of headroom; two VLAN tags
// may be pushed).
const xdpFrameMTU = 2048 - 256 - 14 - 8

// errVethAuto is why --io auto takes AF_PACKET on veth: the documented
// default there (docs/daemon.md), logged as information, not a warning.
var errVethAuto = errors.New("veth: partial checksums and GSO super-frames of local senders cannot cross AF_XDP (--io afxdp forces it)")

// xdpPortUMEM is the UMEM an AF_XDP port brings to the workers that serve
// its queues (afxdp.WorkerConfig.WithUMEMBytes: 8 to 64 MiB a worker):
// 6,144 frames of 2 KiB, three quarters of them in the fill rings, what the
// kernel receives into while the worker is off the CPU. With the rest of a
// port's memory it stays within docs/reliability.md's 16 MiB a port.
const xdpPortUMEM = 12 << 20

// openIO opens the backend of an interface (in the calling thread's
// namespace). why is the reason auto fell back to AF_PACKET.
func (d *Daemon) openIO(ifi *net.Interface) (pk, ctl *afpacket.Port, xp *afxdp.Port, why string, err error) {
	if d.opts.IO != "afpacket" {
		xp, err = d.openXDP(ifi)
		if err == nil {
			return nil, nil, xp, "", nil
		}
		if d.opts.IO == "afxdp" {
			return nil, nil, nil, "", err
		}
		why = err.Error()
	}
	cfg := d.opts.PktIO
	cfg.Queues = d.opts.Workers
	if cfg.Ring == afpacket.RingDefault {
		// Per-frame hand-over: a sixth of V3's latency at low rates and
		// 1.3-2.6x its TCP throughput, for 7-30 % fewer 64-byte frames per
		// second at saturation (docs/pktio.md, "The V2 ring").
		cfg.Ring = afpacket.RingV2
	}
	if d.opts.HostPath && cfg.Filter == nil {
		// Control frames on a ring of their own (controlworker.go).
		cfg.Filter = afpacket.DataFilter()
		cc := cfg // the same ring layout: the box's own daemons get V2's latency
		cc.Queues, cc.Blocks, cc.Filter = 1, controlRingBlocks, afpacket.ControlFilter()
		if ctl, err = afpacket.Open(ifi.Name, cc); err != nil {
			return nil, nil, nil, "", fmt.Errorf("control ring: %w", err)
		}
	}
	if pk, err = afpacket.Open(ifi.Name, cfg); err != nil && ctl != nil {
		ctl.Close()
		ctl = nil
	}
	return pk, ctl, nil, why, err
}

func (d *Daemon) openXDP(ifi *net.Interface) (*afxdp.Port, error) {
	if ifi.MTU > xdpFrameMTU {
		return nil, fmt.Errorf("MTU %d is above AF_XDP's %d with 2 KiB frames", ifi.MTU, xdpFrameMTU)
	}
	cfg := d.opts.XDPPort
	if d.opts.IO == "auto" {
		if driver(ifi.Name) == "veth" {
			return nil, errVethAuto
		}
		if cfg.Attach == afxdp.AttachAuto {
			cfg.Attach = afxdp.AttachNative // generic XDP is no faster than AF_PACKET
		}
	}
	cfg.Tx.Tx = afpacket.TxSendmmsg // handles of goroutines without a socket: little traffic, no ring memory
	return afxdp.Open(ifi.Name, cfg)
}

// driver names an interface's driver (ETHTOOL_GDRVINFO; "" when unknown),
// in the calling thread's namespace.
func driver(name string) string {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	defer unix.Close(fd)
	info, err := unix.IoctlGetEthtoolDrvinfo(fd, name)
	if err != nil {
		return ""
	}
	return unix.ByteSliceToString(info.Driver[:])
}

// queues is the number of receive queues workers bind.
func (p *port) queues() int {
	if p.xp != nil {
		return p.xp.Queues()
	}
	return p.pk.Queues()
}

// ioName says how the port is opened, for logs, metrics and link show.
func (p *port) ioName() string {
	if p.xp != nil {
		return "afxdp " + p.xp.Attach().String()
	}
	return "afpacket"
}

// shutdown makes the port's owners let go (AF_PACKET: blocked receives
// return; AF_XDP: the workers close their sockets when they see the table).
func (p *port) shutdown() {
	if p.pk != nil {
		p.pk.Shutdown()
	}
	if p.ctl != nil {
		p.ctl.Shutdown()
	}
}

func (p *port) stats() pktio.Stats {
	if p.xp != nil {
		return p.xp.Stats()
	}
	return p.pk.Stats()
}

func (p *port) setMTU(mtu int) {
	if p.pk != nil {
		p.pk.SetMTU(mtu)
	}
}

// txHandle is a transmit handle a goroutine opened for itself (newTx) and
// closes when done.
type txHandle interface {
	pktio.Sender
	Close() error
}

// newTx opens a transmit handle for a goroutine without an XDP socket on
// the port: light handles have no ring memory.
func (p *port) newTx(light bool) (txHandle, error) {
	switch {
	case p.xp != nil:
		return p.xp.NewTx()
	case light:
		return p.pk.NewTxMode(afpacket.TxSendmmsg)
	default:
		return p.pk.NewTx()
	}
}

// closeIO releases the backend (after every owner let go).
func (p *port) closeIO() error {
	if p.xp != nil {
		return p.xp.Close()
	}
	var err error
	if p.ctl != nil {
		err = p.ctl.Close()
	}
	return errors.Join(err, p.pk.Close())
}

// errNoXDPWorker: a worker could not create its AF_XDP worker (logged); it
// binds no AF_XDP queue of the port.
var errNoXDPWorker = errors.New("no AF_XDP worker")

// errXDPTakeover: a hot restart's successor binds its AF_XDP queues once
// it took the predecessor's sockets over (takeOver), not in New: the
// queues are the predecessor's until it paused.
var errXDPTakeover = errors.New("AF_XDP queues wait for the takeover")

// openQueue opens queue q of p for worker iw: the port's AF_PACKET queue,
// or an XDP socket in the worker's UMEM, also its transmit handle on p.
// Errors are logged.
func (iw *ioWorker) openQueue(p *port, q int) (rxBinding, error) {
	b := rxBinding{p: p, qi: q}
	if p.xp == nil {
		pq := p.pk.Queue(q)
		b.q, b.w = pq, pq
		return b, nil
	}
	if iw.xdp.awaitTakeover {
		return b, errXDPTakeover
	}
	if err := iw.ensureXDP(); err != nil {
		iw.d.log.Error("AF_XDP worker", "worker", iw.idx, "err", err)
		return b, errNoXDPWorker
	}
	if xs := iw.xdp.w.Socket(p.xp, q); xs != nil { // taken over in a hot restart
		b.q, b.tx = xs, xs
		return b, nil
	}
	xs, err := iw.xdp.w.Bind(p.xp, q)
	if err != nil {
		iw.d.log.Error("XDP socket", "dev", p.name, "queue", q, "err", err)
		return b, err
	}
	b.q, b.tx = xs, xs
	return b, nil
}

// xdpWorker is an ioWorker's AF_XDP backend: the UMEM of its XDP sockets,
// created at its first AF_XDP port.
type xdpWorker struct {
	w *afxdp.Worker // nil until the first AF_XDP port
	// adopted is the predecessor's worker a hot restart took over
	// (hotrestart.go), set before the worker runs: ensureXDP takes it
	// instead of a new UMEM.
	adopted *afxdp.Worker
	// awaitTakeover: the daemon takes the ports over from a running one;
	// AF_XDP queues are bound after its pause (bindTakenOver).
	awaitTakeover bool
	pub           atomic.Pointer[afxdp.Worker] // w, for wake and stats from other goroutines
}

// ensureXDP creates the worker's UMEM at its first AF_XDP port (or takes
// the one a hot restart adopted: the predecessor's memfd); the
// AF_PACKET queues it waited for in the Poller move to the AF_XDP worker,
// which waits from then on.
func (iw *ioWorker) ensureXDP() error {
	if iw.xdp.w != nil {
		return nil
	}
	cfg := iw.d.opts.XDPWorker
	ports := iw.d.ports.Load().list
	if cfg.Sockets == 0 {
		cfg.Sockets = len(ports) // fill rings shared fairly from the first Bind
	}
	// The UMEM: xdpPortUMEM for each AF_XDP port, in the share of its
	// queues this worker serves. Ports added later share it.
	umem := 0
	for _, p := range ports {
		if p.xp != nil && p.queues() > 0 {
			mine := (p.queues() - iw.idx + iw.d.opts.Workers - 1) / iw.d.opts.Workers
			umem += xdpPortUMEM * max(mine, 0) / p.queues()
		}
	}
	cfg = cfg.WithUMEMBytes(umem)
	xw := iw.xdp.adopted
	iw.xdp.adopted = nil
	if xw == nil {
		var err error
		if xw, err = afxdp.NewWorker(cfg); err != nil {
			return err
		}
	}
	iw.xdp.w = xw
	iw.xdp.pub.Store(xw)
	for i := range iw.rx {
		if b := &iw.rx[i]; b.w != nil {
			iw.poller.Remove(b.w)
			xw.Add(b.w)
		}
	}
	iw.waiter = xw
	return nil
}

// wake wakes the AF_XDP worker, if any. Any goroutine.
func (x *xdpWorker) wake() {
	if xw := x.pub.Load(); xw != nil {
		xw.Wake()
	}
}

// waitStats are the AF_XDP worker's waiting counters (zero without one).
// Any goroutine.
func (x *xdpWorker) waitStats() afxdp.WaitStats {
	if xw := x.pub.Load(); xw != nil {
		return xw.WaitStats()
	}
	return afxdp.WaitStats{}
}

// closeSocket closes an XDP socket the worker no longer binds (tx: the
// socket, as rxBinding.tx holds it).
func (x *xdpWorker) closeSocket(tx pktio.Sender) {
	if xs, ok := tx.(*afxdp.Socket); ok && x.w != nil {
		x.w.CloseSocket(xs)
	}
}

// close releases the UMEM and the sockets.
func (x *xdpWorker) close() {
	if x.w != nil {
		x.w.Close()
	}
	if x.adopted != nil { // taken over, never run
		x.adopted.Close()
		x.adopted = nil
	}
}
