package bench

// xdpminimal: the minimal AF_XDP forwarder of issue 11, written the way its
// author describes it, with golang.org/x/sys/unix directly and nothing of
// pktio's backend: a reference for what AF_XDP can do on this machine's
// veth, to compare the backend with in the same runs.
//
//	in  (ra): owns the UMEM; the redirect program steers its frames here
//	out (rb): XDP_SHARED_UMEM on the second device, its own fill and
//	          completion rings
//
// Frames: all R (the ring size) frames of the in-cycle start in in's fill
// ring; they go round in -> RX -> rewritten in place -> out's TX (the same
// descriptor) -> out's completion ring -> in's fill ring. With exactly R
// frames in that cycle and every ring R entries, the fill ring always has
// room for a completion. out gets a few frames of its own for whatever H2
// sends to rb (they go straight back to its fill ring).
//
// Loop (one locked thread, the process pinned by its parent): busy-poll,
// no poll(2), no spin timeout:
//
//	completions of out -> fill of in
//	up to batch RX descriptors -> rewrite -> out's TX ring
//	sendto(out) when out's TX ring holds frames the kernel has not taken
//
// (cfg.poll blocks in poll(2) when a turn found nothing, for A/B runs;
// cfg.napiBusyPoll is busy polling in the kernel's sense, xdpsock -B.)
//
// Locking: none; the loop owns the rings. Counters are atomics, added per
// batch, read by the child's signal handler (xdpchild.go).

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/pktio"
)

// minimalConfig are the minimal forwarder's knobs (zero: the issue's).
type minimalConfig struct {
	ring    int  // entries per ring (power of two); default 4096
	batch   int  // RX descriptors per turn; default 256
	budget  int  // XDP_MAX_TX_SKB_BUDGET; default 256
	sndbuf  int  // SO_SNDBUFFORCE on out; 0: the kernel's default
	poll    bool // block in poll(2) after an empty turn instead of spinning
	generic bool // generic XDP instead of native
	// napiBusyPoll > 0: the kernel's busy polling on the ingress socket
	// (SO_PREFER_BUSY_POLL, SO_BUSY_POLL this many µs, SO_BUSY_POLL_BUDGET
	// batch) and a recvfrom after every turn that found the RX ring empty:
	// the forwarder's thread runs veth's receive NAPI itself (xdpsock -B).
	napiBusyPoll int
}

func (c minimalConfig) withDefaults() (minimalConfig, error) {
	if c.ring == 0 {
		c.ring = 4096
	}
	if c.batch == 0 {
		c.batch = 256
	}
	if c.budget == 0 {
		c.budget = 256
	}
	if c.ring < 64 || c.ring > 1<<16 || c.ring&(c.ring-1) != 0 {
		return c, fmt.Errorf("ring %d: want a power of two in 64..65536", c.ring)
	}
	if c.batch < 1 || c.batch > c.ring {
		return c, fmt.Errorf("batch %d: want 1..ring", c.batch)
	}
	return c, nil
}

const (
	minimalFrameSize = 2048
	minimalOutFrames = 64 // out's own fill ring (frames H2 sends to rb)
)

// mRing is one mapped ring: shared indexes, a private copy of ours.
type mRing struct {
	mem                       []byte
	producer, consumer, flags *uint32
	mask                      uint32
	local                     uint32 // producer rings: next to produce; consumer rings: next to consume
}

// minimalXSK is one socket and its four rings.
type minimalXSK struct {
	fd                 int
	rx, tx, fill, comp mRing
	rxDesc, txDesc     []unix.XDPDesc
	fillAddr, compAddr []uint64
	redirect           *xskRedirect
}

// minimalFwd is the forwarder.
type minimalFwd struct {
	cfg      minimalConfig
	umem     []byte
	in, out  minimalXSK
	nextHop  net.HardwareAddr
	src      net.HardwareAddr
	stopping atomic.Bool

	sent, kicks, kickAgain, polls atomic.Uint64
}

// newMinimal opens the forwarder from interface in to interface out in the
// calling thread's namespace (run it inside pktio.InNetns).
func newMinimal(in, out string, nextHop net.HardwareAddr, cfg minimalConfig) (_ *minimalFwd, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ifIn, err := net.InterfaceByName(in)
	if err != nil {
		return nil, err
	}
	ifOut, err := net.InterfaceByName(out)
	if err != nil {
		return nil, err
	}
	f := &minimalFwd{cfg: cfg, nextHop: nextHop, src: ifOut.HardwareAddr}
	f.in.fd, f.out.fd = -1, -1
	defer func() {
		if err != nil {
			f.close()
		}
	}()
	size := (cfg.ring + minimalOutFrames) * minimalFrameSize
	f.umem, err = unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("UMEM: %w", err)
	}
	if err := f.open(&f.in, ifIn.Index, nil); err != nil {
		return nil, fmt.Errorf("%s: %w", in, err)
	}
	if err := f.open(&f.out, ifOut.Index, &f.in); err != nil {
		return nil, fmt.Errorf("%s: %w", out, err)
	}
	// All of the in-cycle's frames into in's fill ring, the rest into out's.
	for i := range cfg.ring {
		f.in.fillAddr[i] = uint64(i) * minimalFrameSize
	}
	f.in.fill.local = uint32(cfg.ring)
	atomic.StoreUint32(f.in.fill.producer, f.in.fill.local)
	for i := range minimalOutFrames {
		f.out.fillAddr[i] = uint64(cfg.ring+i) * minimalFrameSize
	}
	f.out.fill.local = minimalOutFrames
	atomic.StoreUint32(f.out.fill.producer, f.out.fill.local)
	for _, x := range []struct {
		s     *minimalXSK
		index int
	}{{&f.in, ifIn.Index}, {&f.out, ifOut.Index}} {
		if x.s.redirect, err = attachXSKRedirect(x.index, cfg.generic); err != nil {
			return nil, err
		}
		if err := x.s.redirect.register(0, x.s.fd); err != nil {
			return nil, fmt.Errorf("XSKMAP: %w", err)
		}
	}
	return f, nil
}

// open creates, maps and binds one socket on queue 0 of ifindex; share
// (nil: this socket registers the UMEM) is the UMEM's owner.
func (f *minimalFwd) open(s *minimalXSK, ifindex int, share *minimalXSK) error {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket(AF_XDP): %w", err)
	}
	s.fd = fd
	n := f.cfg.ring
	if share == nil {
		reg := unix.XDPUmemReg{Addr: uint64(uintptr(unsafe.Pointer(&f.umem[0]))), Len: uint64(len(f.umem)), Size: minimalFrameSize}
		if err := xdpSetsockopt(fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
			return fmt.Errorf("XDP_UMEM_REG: %w", err)
		}
	}
	for _, opt := range []int{unix.XDP_UMEM_FILL_RING, unix.XDP_UMEM_COMPLETION_RING, unix.XDP_RX_RING, unix.XDP_TX_RING} {
		if err := unix.SetsockoptInt(fd, unix.SOL_XDP, opt, n); err != nil {
			return fmt.Errorf("ring option %d: %w", opt, err)
		}
	}
	var off unix.XDPMmapOffsets
	l := uint32(unsafe.Sizeof(off))
	if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_MMAP_OFFSETS,
		uintptr(unsafe.Pointer(&off)), uintptr(unsafe.Pointer(&l)), 0); e != 0 {
		return fmt.Errorf("XDP_MMAP_OFFSETS: %w", e)
	}
	descSize, addrSize := int(unsafe.Sizeof(unix.XDPDesc{})), 8
	if s.rx, err = mapXSKRing(fd, unix.XDP_PGOFF_RX_RING, off.Rx, n, descSize); err != nil {
		return err
	}
	if s.tx, err = mapXSKRing(fd, unix.XDP_PGOFF_TX_RING, off.Tx, n, descSize); err != nil {
		return err
	}
	if s.fill, err = mapXSKRing(fd, unix.XDP_UMEM_PGOFF_FILL_RING, off.Fr, n, addrSize); err != nil {
		return err
	}
	if s.comp, err = mapXSKRing(fd, unix.XDP_UMEM_PGOFF_COMPLETION_RING, off.Cr, n, addrSize); err != nil {
		return err
	}
	s.rxDesc = unsafe.Slice((*unix.XDPDesc)(unsafe.Pointer(&s.rx.mem[off.Rx.Desc])), n)
	s.txDesc = unsafe.Slice((*unix.XDPDesc)(unsafe.Pointer(&s.tx.mem[off.Tx.Desc])), n)
	s.fillAddr = unsafe.Slice((*uint64)(unsafe.Pointer(&s.fill.mem[off.Fr.Desc])), n)
	s.compAddr = unsafe.Slice((*uint64)(unsafe.Pointer(&s.comp.mem[off.Cr.Desc])), n)
	sa := &unix.SockaddrXDP{Flags: unix.XDP_COPY | unix.XDP_USE_NEED_WAKEUP, Ifindex: uint32(ifindex)}
	if share != nil {
		sa.Flags, sa.SharedUmemFD = unix.XDP_SHARED_UMEM, uint32(share.fd)
	}
	// A queue whose previous socket just closed is busy until the kernel
	// has released that socket's buffer pool.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		err := unix.Bind(fd, sa)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("bind: %w", err)
		}
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_XDP, unix.XDP_MAX_TX_SKB_BUDGET, min(f.cfg.budget, n)); err != nil && !errors.Is(err, unix.ENOPROTOOPT) {
		return fmt.Errorf("XDP_MAX_TX_SKB_BUDGET: %w", err)
	}
	if f.cfg.napiBusyPoll > 0 && share == nil {
		for _, o := range []struct{ opt, val int }{{unix.SO_PREFER_BUSY_POLL, 1},
			{unix.SO_BUSY_POLL, f.cfg.napiBusyPoll}, {unix.SO_BUSY_POLL_BUDGET, f.cfg.batch}} {
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, o.opt, o.val); err != nil {
				return fmt.Errorf("busy-poll option %d: %w", o.opt, err)
			}
		}
	}
	if f.cfg.sndbuf > 0 {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, f.cfg.sndbuf); err != nil {
			return fmt.Errorf("SO_SNDBUFFORCE: %w", err)
		}
	}
	return nil
}

func mapXSKRing(fd int, pgoff int64, off unix.XDPRingOffset, entries, entrySize int) (mRing, error) {
	mem, err := unix.Mmap(fd, pgoff, int(off.Desc)+entries*entrySize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return mRing{}, fmt.Errorf("mmap ring %#x: %w", pgoff, err)
	}
	return mRing{mem: mem, producer: (*uint32)(unsafe.Pointer(&mem[off.Producer])),
		consumer: (*uint32)(unsafe.Pointer(&mem[off.Consumer])), flags: (*uint32)(unsafe.Pointer(&mem[off.Flags])),
		mask: uint32(entries - 1)}, nil
}

func xdpSetsockopt(fd, opt int, p unsafe.Pointer, n uintptr) error {
	if _, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), n, 0); e != 0 {
		return e
	}
	return nil
}

// run forwards until stop; call it on a locked OS thread.
func (f *minimalFwd) run() error {
	in, out := &f.in, &f.out
	batch := uint32(f.cfg.batch)
	ring := uint32(f.cfg.ring)
	pfd := []unix.PollFd{{Fd: int32(in.fd), Events: unix.POLLIN}}
	for !f.stopping.Load() {
		busy := false
		// Completions of out: its frames back into in's fill ring (always
		// room: see the overview).
		if n := atomic.LoadUint32(out.comp.producer) - out.comp.local; n != 0 {
			for i := range n {
				in.fillAddr[(in.fill.local+i)&in.fill.mask] = out.compAddr[(out.comp.local+i)&out.comp.mask]
			}
			in.fill.local += n
			out.comp.local += n
			atomic.StoreUint32(in.fill.producer, in.fill.local)
			atomic.StoreUint32(out.comp.consumer, out.comp.local)
			busy = true
		}
		// Received on in: rewrite, onto out's TX ring by descriptor.
		if n := min(atomic.LoadUint32(in.rx.producer)-in.rx.local, batch); n != 0 {
			n = min(n, ring-(out.tx.local-atomic.LoadUint32(out.tx.consumer)))
			for i := range n {
				d := in.rxDesc[(in.rx.local+i)&in.rx.mask]
				rewrite(f.umem[d.Addr:d.Addr+uint64(d.Len)], f.nextHop, f.src)
				out.txDesc[(out.tx.local+i)&out.tx.mask] = d
			}
			in.rx.local += n
			out.tx.local += n
			atomic.StoreUint32(in.rx.consumer, in.rx.local)
			atomic.StoreUint32(out.tx.producer, out.tx.local)
			f.sent.Add(uint64(n))
			busy = true
		} else if f.cfg.napiBusyPoll > 0 {
			// The RX ring is empty: have the kernel run veth's NAPI here.
			unix.Syscall6(unix.SYS_RECVFROM, uintptr(in.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
		}
		// Kick only when the TX ring holds work.
		if out.tx.local != atomic.LoadUint32(out.tx.consumer) {
			_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(out.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
			f.kicks.Add(1)
			switch e {
			case 0, unix.EAGAIN, unix.EBUSY, unix.ENOBUFS, unix.EINTR:
				if e != 0 {
					f.kickAgain.Add(1)
				}
			default:
				return fmt.Errorf("sendto: %w", e)
			}
			busy = true
		}
		// Whatever H2 sent to rb: straight back to out's fill ring.
		if n := atomic.LoadUint32(out.rx.producer) - out.rx.local; n != 0 {
			for i := range n {
				out.fillAddr[(out.fill.local+i)&out.fill.mask] = out.rxDesc[(out.rx.local+i)&out.rx.mask].Addr
			}
			out.rx.local += n
			out.fill.local += n
			atomic.StoreUint32(out.rx.consumer, out.rx.local)
			atomic.StoreUint32(out.fill.producer, out.fill.local)
		}
		if !busy && f.cfg.poll {
			f.polls.Add(1)
			unix.Poll(pfd, 100)
		}
	}
	return nil
}

// diag returns what the socket's kernel counters and the loop's say
// (blocked: the poll(2) calls of cfg.poll).
func (f *minimalFwd) diag() fwdDiag {
	var k unix.XDPStatistics
	l := uint32(unsafe.Sizeof(k))
	unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(f.in.fd), unix.SOL_XDP, unix.XDP_STATISTICS,
		uintptr(unsafe.Pointer(&k)), uintptr(unsafe.Pointer(&l)), 0)
	return fwdDiag{drops: k.Rx_dropped + k.Rx_ring_full, fillEmpty: k.Rx_fill_ring_empty_descs,
		sent: f.sent.Load(), kicks: f.kicks.Load(), kickAgain: f.kickAgain.Load(), blocked: f.polls.Load()}
}

func (f *minimalFwd) mode() string {
	if f.cfg.generic {
		return "generic copy (minimal)"
	}
	return "native copy (minimal)"
}

func (f *minimalFwd) stop() { f.stopping.Store(true) }

// close releases sockets, rings, programs and the UMEM (after run returned).
func (f *minimalFwd) close() error {
	var errs []error
	for _, s := range []*minimalXSK{&f.in, &f.out} {
		errs = append(errs, s.redirect.close())
		for _, r := range []*mRing{&s.rx, &s.tx, &s.fill, &s.comp} {
			if r.mem != nil {
				errs = append(errs, unix.Munmap(r.mem))
				r.mem = nil
			}
		}
		if s.fd >= 0 {
			errs = append(errs, unix.Close(s.fd))
			s.fd = -1
		}
	}
	if f.umem != nil {
		errs = append(errs, unix.Munmap(f.umem))
		f.umem = nil
	}
	return errors.Join(errs...)
}

// startMinimalIn opens the forwarder in namespace ns ("" : the current one).
func startMinimalIn(ns, in, out string, nextHop net.HardwareAddr, cfg minimalConfig) (*minimalFwd, error) {
	var f *minimalFwd
	err := pktio.InNetns(ns, func() error {
		var err error
		f, err = newMinimal(in, out, nextHop, cfg)
		return err
	})
	return f, err
}
