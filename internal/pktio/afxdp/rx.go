package afxdp

// xdprx: an Socket is one XDP socket of a worker, bound to (port,
// queue): it receives what the port receives on that queue and transmits
// on the port (xdptx.go). This file is its receive side.
//
// Flow of TryRecv:
//
//	release the previous batch (frames back to the free list, or on to
//	  "sent" for those that left by descriptor)
//	take this socket's completions (sent frames back to the free list)
//	top up the fill ring from the worker's free list
//	read up to len(frames) RX descriptors: frames[i] is the UMEM bytes,
//	  in place, with Headroom writable bytes in front
//
// AF_XDP hands over frames exactly as the driver received them: there is
// no metadata to restore (a VLAN tag stays in the bytes; see
// docs/pktio.md for what that means on veth) and no GSO: every frame is at
// most one MTU.
//
// Locking: none; the worker's owner goroutine.

import (
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/pktio"
)

// Socket is one (port, queue) socket of an Worker.
type Socket struct {
	w        *Worker
	port     *Port
	queue    int
	slot     int
	fd       int  // immutable; closed by the owner after the port forgot the socket
	fdClosed bool // owner only
	zeroCopy bool
	headroom int

	rx, tx     descRing
	fill, comp addrRing

	fillOut int      // frames in the fill ring or the kernel's hands for receiving
	napiSet bool     // the socket has received a frame: the kernel knows its NAPI instance (busy polling)
	batch   []uint32 // frames handed out by the last Recv, not yet released

	stats xdpCounters
}

// Port is the port the socket is bound to; Queue its queue there.
func (s *Socket) Port() *Port { return s.port }
func (s *Socket) Queue() int  { return s.queue }

// Fd is the socket's file descriptor, for an epoll set shared with other
// sockets: it polls readable when the RX ring has frames. Do not close it.
func (s *Socket) Fd() int { return s.fd }

// ZeroCopy reports whether the socket runs in zero-copy mode.
func (s *Socket) ZeroCopy() bool { return s.zeroCopy }

// Mode describes the socket's data path for logs and `link show`:
// "native copy", "native zero-copy", "generic copy".
func (s *Socket) Mode() string {
	if s.zeroCopy {
		return s.port.attach.String() + " zero-copy"
	}
	return s.port.attach.String() + " copy"
}

// Headroom is the number of writable bytes at the start of every slice
// Recv returns, in front of the frame (WorkerConfig.Headroom).
func (s *Socket) Headroom() int { return s.headroom }

// Ready reports whether TryRecv would return frames now.
func (s *Socket) Ready() bool { return s.rx.peekReady() }

// PollFd is the socket's fd: readable (xsk_poll) while its RX ring holds
// frames; the worker's poller waits on it (pktio.Waitable).
func (s *Socket) PollFd() int { return s.fd }

// TryRecv returns up to min(len(frames), len(meta)) received frames
// without waiting: frames[i][s.Headroom():] is frame i, in place in the
// worker's UMEM, meta[i] describes it. The frames of the previous Recv on
// this socket become invalid. Frames may be modified in place and passed
// to Send on any socket of the same worker, which sends them by
// descriptor. It returns ErrClosed after Shutdown. It does not allocate.
func (s *Socket) TryRecv(frames [][]byte, meta []pktio.Meta) (int, error) {
	w := s.w
	if w.closed.Load() {
		return 0, pktio.ErrClosed
	}
	s.Release()
	s.reapCompletions()
	s.refill()
	max := min(len(frames), len(meta), cap(s.batch))
	n := int(s.rx.ready(uint32(max)))
	if n == 0 {
		return 0, nil
	}
	var bytes, bad uint64
	k := 0
	frameMask := uint64(w.cfg.FrameSize - 1)
	for i := range n {
		d := s.rx.descs[(s.rx.local+uint32(i))&s.rx.mask]
		f := uint32(d.Addr >> w.shift)
		in := d.Addr & frameMask
		if int(f) >= len(w.state) || in < uint64(s.headroom) || in+uint64(d.Len) > uint64(w.cfg.FrameSize) || d.Len == 0 {
			bad++ // cannot happen with a sane kernel: the frame is lost to us
			continue
		}
		start, end := int(d.Addr)-s.headroom, int(d.Addr)+int(d.Len)
		frames[k] = w.umem[start:end:end]
		meta[k] = pktio.Meta{Len: d.Len}
		w.state[f] = frameHeld
		s.batch = append(s.batch, f)
		bytes += uint64(d.Len)
		k++
	}
	s.rx.local += uint32(n)
	s.rx.release()
	s.fillOut -= n
	s.napiSet = true
	s.stats.rxPackets.Add(uint64(k))
	s.stats.rxBytes.Add(bytes)
	if bad != 0 {
		s.stats.rxErrors.Add(bad)
	}
	return k, nil
}

// Recv is TryRecv that waits for at least one frame on this socket,
// parked in the worker's poller (which also returns when another socket
// of the worker is ready: a worker serving several sockets uses
// Worker.Wait and TryRecv instead). It returns ErrClosed after Shutdown.
func (s *Socket) Recv(frames [][]byte, meta []pktio.Meta) (int, error) {
	for {
		n, err := s.TryRecv(frames, meta)
		if n > 0 || err != nil || len(frames) == 0 || len(meta) == 0 {
			return n, err
		}
		timeout := time.Second
		if s.tx.pending() != 0 {
			s.kick()
			timeout = time.Millisecond
		}
		if !s.Ready() {
			if err := s.w.park(timeout); err != nil {
				return 0, err
			}
		}
	}
}

// Release returns the frames of the last Recv (Recv and TryRecv do it on
// entry). Frames sent by descriptor stay with the kernel until their
// completion; the others go back to the worker's free list.
func (s *Socket) Release() {
	w := s.w
	for _, f := range s.batch {
		switch w.state[f] {
		case frameHeld, frameDoneHeld:
			w.pushFree(f)
		case frameSentHeld:
			w.state[f] = frameSent
		}
	}
	s.batch = s.batch[:0]
}

// refill tops the fill ring up to the worker's per-socket target, in
// chunks of at least 16 frames while the ring is more than half full (one
// index publish per refill).
func (s *Socket) refill() {
	w := s.w
	want := w.fillTarget - s.fillOut
	avail := w.nfree - w.reserve // frames kept for copies: generated frames must always find one
	if want <= 0 || want < 16 && s.fillOut > w.fillTarget/2 || avail <= 0 {
		return
	}
	n := int(s.fill.free(uint32(min(want, avail))))
	n = min(n, want, avail)
	for i := range n {
		w.nfree--
		f := w.free[w.nfree]
		w.state[f] = frameKernel
		w.owner[f] = uint16(s.slot)
		s.fill.addrs[(s.fill.local+uint32(i))&s.fill.mask] = uint64(f) << w.shift
	}
	s.fill.local += uint32(n)
	s.fill.publish()
	s.fillOut += n
	if s.zeroCopy && s.fill.needWakeup() {
		// The driver sleeps until told that buffers are there.
		unix.Syscall6(unix.SYS_RECVFROM, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	}
}

// xdpCounters are the socket's own counters, written by the owner once per
// batch.
type xdpCounters struct {
	rxPackets, rxBytes, rxErrors atomic.Uint64
	txPackets, txBytes           atomic.Uint64
	txByDescriptor, txCopied     atomic.Uint64
	txRefused, txBadOffload      atomic.Uint64
	txNoBuffer, txErrors         atomic.Uint64
	compUnexpected               atomic.Uint64
	txKicks, txKickAgain         atomic.Uint64
	txKickGaveUp                 atomic.Uint64
	_                            [64]byte
}
