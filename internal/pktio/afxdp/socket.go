package afxdp

// xdpsocket: opening one XDP socket on (port, queue) for a worker: the
// UMEM registration (first socket of the worker) or XDP_SHARED_UMEM (the
// others), the four rings and their mappings, and the bind.
//
// Order (net/xdp/xsk.c): UMEM_REG, FILL and COMPLETION ring sizes, RX and
// TX ring sizes, then mmap, then bind. Kernel facts this code depends on
// (6.18, measured on veth):
//   - a socket sharing the UMEM on another device or queue binds with
//     XDP_SHARED_UMEM alone (mode flags with it: EINVAL) and needs its own
//     fill and completion rings;
//   - veth refuses XDP_ZEROCOPY (EOPNOTSUPP); copy mode works;
//   - binding a queue right after the previous owner's process exited can
//     fail with EBUSY while the kernel still releases the old socket's
//     buffer pool: retried for up to two seconds;
//   - copy-mode transmit sends at most 32 frames per kick unless
//     XDP_MAX_TX_SKB_BUDGET raises it;
//   - a socket learns its NAPI instance (for busy polling) from the first
//     frame it receives; busy polling before that does nothing.
//
// Locking: none; called by the worker's owner.

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// bindRetry bounds the EBUSY retries of a bind.
const (
	bindRetryFor   = 2 * time.Second
	bindRetryPause = 50 * time.Millisecond
)

// openSocket creates, maps and binds one socket; the caller's thread is in
// the port's namespace.
func (w *Worker) openSocket(p *Port, q, slot int) (*Socket, error) {
	share := w.anySocket()
	modes := []uint16{unix.XDP_COPY}
	if share != nil {
		modes = []uint16{unix.XDP_SHARED_UMEM}
	} else if !w.cfg.NoZeroCopy {
		modes = []uint16{unix.XDP_ZEROCOPY, unix.XDP_COPY}
	}
	var errs []error
	deadline := time.Now().Add(bindRetryFor)
	for i := 0; i < len(modes); {
		mode := modes[i]
		s, err := w.tryOpenSocket(p, q, slot, mode, share)
		if err == nil {
			if share == nil {
				w.zeroCopy = mode == unix.XDP_ZEROCOPY
			}
			s.zeroCopy = w.zeroCopy
			return s, nil
		}
		if errors.Is(err, unix.EBUSY) && time.Now().Before(deadline) {
			time.Sleep(bindRetryPause) // the previous owner's pool is still being released
			continue
		}
		errs = append(errs, err)
		i++
	}
	return nil, errors.Join(errs...)
}

// tryOpenSocket makes one attempt with one bind mode; on failure nothing
// is left open.
func (w *Worker) tryOpenSocket(p *Port, q, slot int, mode uint16, share *Socket) (_ *Socket, err error) {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket(AF_XDP): %w", err)
	}
	s := &Socket{w: w, port: p, queue: q, slot: slot, fd: fd, headroom: w.cfg.Headroom,
		batch: make([]uint32, 0, w.cfg.RingSize)}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	n := w.cfg.RingSize
	if share == nil {
		reg := unix.XDPUmemReg{Addr: uint64(w.base), Len: uint64(len(w.umem)), Size: uint32(w.cfg.FrameSize)}
		if err := setsockoptRaw(fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
			return nil, fmt.Errorf("XDP_UMEM_REG: %w", err)
		}
	}
	for _, opt := range []struct {
		opt  int
		name string
	}{{unix.XDP_UMEM_FILL_RING, "XDP_UMEM_FILL_RING"}, {unix.XDP_UMEM_COMPLETION_RING, "XDP_UMEM_COMPLETION_RING"},
		{unix.XDP_RX_RING, "XDP_RX_RING"}, {unix.XDP_TX_RING, "XDP_TX_RING"}} {
		if err := unix.SetsockoptInt(fd, unix.SOL_XDP, opt.opt, n); err != nil {
			return nil, fmt.Errorf("%s=%d: %w", opt.name, n, err)
		}
	}
	if err := s.mapRings(n); err != nil {
		return nil, err
	}
	sa := &unix.SockaddrXDP{Flags: mode, Ifindex: uint32(p.Index), QueueID: uint32(q)}
	if share != nil {
		sa.SharedUmemFD = uint32(share.fd)
	} else {
		sa.Flags |= unix.XDP_USE_NEED_WAKEUP
	}
	if err := unix.Bind(fd, sa); err != nil {
		return nil, fmt.Errorf("bind %s: %w", bindModeName(mode), err)
	}
	// Copy mode: more frames per kick, and room for the skbs in flight
	// (each charged to the socket's send buffer until the receiver frees it).
	if mode != unix.XDP_ZEROCOPY && !(share != nil && w.zeroCopy) {
		// The kernel takes 32..TX ring entries; older kernels lack the option.
		budget := min(w.cfg.TxBudget, n)
		err := unix.SetsockoptInt(fd, unix.SOL_XDP, unix.XDP_MAX_TX_SKB_BUDGET, budget)
		if err != nil && !errors.Is(err, unix.ENOPROTOOPT) {
			return nil, fmt.Errorf("XDP_MAX_TX_SKB_BUDGET=%d: %w", budget, err)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, defaultSndBuf); err != nil {
			unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, defaultSndBuf)
		}
	}
	if w.cfg.NAPIBusyPoll > 0 {
		if err := setNAPIBusyPoll(fd, w.cfg); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// setNAPIBusyPoll turns on preferred busy polling for the socket (needs
// CAP_NET_ADMIN): a recvfrom on it runs the NAPI instance its frames came
// from, in the caller's thread, for up to NAPIBudget frames.
func setNAPIBusyPoll(fd int, cfg WorkerConfig) error {
	for _, o := range []struct {
		opt  int
		val  int
		name string
	}{
		{unix.SO_PREFER_BUSY_POLL, 1, "SO_PREFER_BUSY_POLL"},
		{unix.SO_BUSY_POLL, int(cfg.NAPIBusyPoll / time.Microsecond), "SO_BUSY_POLL"},
		{unix.SO_BUSY_POLL_BUDGET, cfg.NAPIBudget, "SO_BUSY_POLL_BUDGET"},
	} {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, o.opt, o.val); err != nil {
			return fmt.Errorf("%s=%d: %w", o.name, o.val, err)
		}
	}
	return nil
}

func bindModeName(mode uint16) string {
	switch mode {
	case unix.XDP_ZEROCOPY:
		return "XDP_ZEROCOPY"
	case unix.XDP_COPY:
		return "XDP_COPY"
	case unix.XDP_SHARED_UMEM:
		return "XDP_SHARED_UMEM"
	}
	return fmt.Sprintf("flags %#x", mode)
}

// close unmaps the rings and closes the fd (the kernel removes the socket
// from the map then).
// mapRings maps the socket's four rings of n entries (set up by this
// process, or handed over by another: the same offsets either way).
func (s *Socket) mapRings(n int) (err error) {
	var off unix.XDPMmapOffsets
	if err := getsockoptRaw(s.fd, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&off), unsafe.Sizeof(off)); err != nil {
		return fmt.Errorf("XDP_MMAP_OFFSETS: %w", err)
	}
	if s.rx, err = mapDescRing(s.fd, unix.XDP_PGOFF_RX_RING, off.Rx, n); err != nil {
		return err
	}
	if s.tx, err = mapDescRing(s.fd, unix.XDP_PGOFF_TX_RING, off.Tx, n); err != nil {
		return err
	}
	if s.fill, err = mapAddrRing(s.fd, unix.XDP_UMEM_PGOFF_FILL_RING, off.Fr, n); err != nil {
		return err
	}
	s.comp, err = mapAddrRing(s.fd, unix.XDP_UMEM_PGOFF_COMPLETION_RING, off.Cr, n)
	return err
}

func (s *Socket) close() error {
	var errs []error
	for _, r := range []*xdpRing{&s.rx.xdpRing, &s.tx.xdpRing, &s.fill.xdpRing, &s.comp.xdpRing} {
		errs = append(errs, r.unmap())
	}
	if !s.fdClosed {
		errs = append(errs, unix.Close(s.fd))
		s.fdClosed = true
	}
	return errors.Join(errs...)
}

func setsockoptRaw(fd, opt int, p unsafe.Pointer, n uintptr) error {
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), n, 0)
	if e != 0 {
		return e
	}
	return nil
}

func getsockoptRaw(fd, opt int, p unsafe.Pointer, n uintptr) error {
	l := uint32(n)
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return e
	}
	return nil
}
