package afxdp

// xdptx: the transmit side of an Socket.
//
// Flow of Send, per frame:
//
//	offload state: a GSO super-frame cannot leave (AF_XDP has no
//	  segmentation offload: dropped, BadOffload); a partial checksum is
//	  completed in place
//	frame received into this worker's UMEM and still held by its batch:
//	  its descriptor (address, length, as rewritten in place) goes on the TX
//	  ring, no copy ("by descriptor")
//	anything else (a generated frame, another worker's frame, a second
//	  output of the same input): copied into a free UMEM frame first
//	TX ring full: kick the kernel, take completions, wait for room
//
// then one kick for the batch: in copy mode a sendto(2) makes the kernel
// build and send an skb per descriptor, TxBudget per call (XDP_MAX_TX_SKB_BUDGET);
// in zero-copy mode only when the driver asks (need_wakeup). Sent frames
// come back on the completion ring when the device is done with them.
//
// Locking: none; the worker's owner goroutine.

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/wire"
)

// Send transmits frames on the socket's port, frame i with offload state
// offl[i] (offl may be nil). It returns the number of frames queued for the
// device; frames it cannot send are counted (Stats) and skipped. err is
// non-nil only after Shutdown (ErrClosed) or when the device is down or
// gone. Frames may be reused when Send returns (a frame sent by descriptor
// belongs to the kernel until its batch is released and its completion
// arrives; the caller must not write to it again). It does not allocate.
func (s *Socket) Send(frames [][]byte, offl []pktio.Offload) (int, error) {
	w := s.w
	if w.closed.Load() {
		return 0, pktio.ErrClosed
	}
	var c txBatch
	maxLen := w.cfg.FrameSize - xdpPacketHeadroom
	for i, f := range frames {
		if len(f) < wire.EthernetHeaderLen {
			c.badOffload++
			continue
		}
		if offl != nil && !offl[i].IsZero() && !prepareXDP(f, offl[i]) {
			c.badOffload++
			continue
		}
		if len(f) > maxLen {
			c.refused++
			continue
		}
		if s.tx.free(1) == 0 {
			if err := s.waitRoom(); err != nil {
				s.account(&c)
				return c.queued, err
			}
		}
		addr, ok := s.descriptor(f)
		if ok {
			c.byDesc++
		} else if addr, ok = s.copyIn(f); ok {
			c.copied++
		} else {
			c.noBuffer++
			continue
		}
		s.tx.descs[s.tx.local&s.tx.mask] = unix.XDPDesc{Addr: addr, Len: uint32(len(f))}
		s.tx.local++
		c.queued++
		c.bytes += uint64(len(f))
	}
	var err error
	if c.queued > 0 {
		s.tx.publish()
		err = s.kick()
	}
	s.account(&c)
	return c.queued, err
}

// prepareXDP makes a frame with offload state sendable without offload:
// a partial checksum is completed in place; a super-frame cannot be.
func prepareXDP(f []byte, o pktio.Offload) bool {
	if o.GSOType != pktio.GSONone || !o.NeedsCsum {
		return false
	}
	l3, ok := pktio.L3Offset(f)
	return ok && pktio.CompletePartial(f, l3+int(o.L4Off), int(o.CsumOffset))
}

// descriptor returns the UMEM address of f if f lies in a frame of this
// worker that a Recv batch holds, and hands that frame to the kernel.
func (s *Socket) descriptor(f []byte) (uint64, bool) {
	w := s.w
	off, ok := w.frameOf(f)
	if !ok {
		return 0, false
	}
	fr := uint32(off >> w.shift)
	if w.state[fr] != frameHeld || (off&uint64(w.cfg.FrameSize-1))+uint64(len(f)) > uint64(w.cfg.FrameSize) {
		return 0, false
	}
	w.state[fr] = frameSentHeld
	w.owner[fr] = uint16(s.slot)
	return off, true
}

// copyIn copies f into a free UMEM frame (behind the usual headroom) and
// returns its address.
func (s *Socket) copyIn(f []byte) (uint64, bool) {
	w := s.w
	if w.nfree == 0 && w.reapAll() == 0 {
		s.kick() // copy mode: frees skbs the receiver already consumed
		if w.reapAll() == 0 {
			return 0, false
		}
	}
	w.nfree--
	fr := w.free[w.nfree]
	w.state[fr] = frameSent
	w.owner[fr] = uint16(s.slot)
	addr := uint64(fr)<<w.shift + xdpPacketHeadroom
	copy(w.umem[addr:addr+uint64(len(f))], f)
	return addr, true
}

// kick asks the kernel to transmit what the TX ring holds. In copy mode
// each sendto(2) sends up to TxBudget frames and says EAGAIN while more
// are left (or while the device is busy: then the rest waits for the next
// kick). A frame the device drops (EBUSY) is consumed anyway. The kernel
// sends a frame only with room for its completion, and returns 0 without
// sending when the completion ring is full: completions are taken before
// every kick.
func (s *Socket) kick() error {
	if s.zeroCopy && !s.tx.needWakeup() {
		return nil
	}
	stalls := 0
	var kicks, again uint64
	defer func() {
		s.stats.txKicks.Add(kicks)
		if again != 0 {
			s.stats.txKickAgain.Add(again)
		}
	}()
	for s.tx.pending() != 0 {
		s.reapCompletions()
		before := s.tx.pending()
		_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
		kicks++
		switch e {
		case 0, unix.EINTR:
		case unix.EAGAIN, unix.EBUSY:
			again++
		case unix.ENETDOWN, unix.ENXIO, unix.ENODEV, unix.EBADF:
			return e
		default:
			s.stats.txErrors.Add(1)
			return nil
		}
		if s.zeroCopy {
			return nil // the driver sends asynchronously
		}
		if s.tx.pending() >= before {
			if stalls++; stalls >= 3 {
				s.stats.txKickGaveUp.Add(1)
				return nil // device busy: kicked again by the next Send or Wait
			}
		}
	}
	return nil
}

// waitRoom waits until the TX ring has a free slot: kicks, and in between
// waits in poll(2) for the socket to become writable (1 ms slices, so
// Shutdown is seen).
func (s *Socket) waitRoom() error {
	deadline := time.Now().Add(time.Second)
	pfd := []unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLOUT}}
	for {
		s.tx.publish()
		if err := s.kick(); err != nil {
			return err
		}
		s.reapCompletions()
		if s.tx.free(1) != 0 {
			return nil
		}
		if s.w.closed.Load() {
			return pktio.ErrClosed
		}
		if time.Now().After(deadline) {
			return unix.ETIMEDOUT
		}
		unix.Poll(pfd, 1)
	}
}

// reapCompletions takes the socket's completions: frames that left.
func (s *Socket) reapCompletions() int {
	n := s.comp.ready(s.comp.size)
	if n == 0 {
		return 0
	}
	w := s.w
	var odd uint64
	for i := range n {
		addr := s.comp.addrs[(s.comp.local+i)&s.comp.mask]
		f := uint32(addr >> w.shift)
		if int(f) >= len(w.state) {
			odd++
			continue
		}
		switch w.state[f] {
		case frameSent:
			w.pushFree(f)
		case frameSentHeld:
			w.state[f] = frameDoneHeld
		default:
			odd++
		}
	}
	s.comp.local += n
	s.comp.release()
	if odd != 0 {
		s.stats.compUnexpected.Add(odd)
	}
	return int(n)
}

// txBatch counts one Send.
type txBatch struct {
	queued                                        int
	bytes                                         uint64
	byDesc, copied, refused, badOffload, noBuffer uint64
}

func (s *Socket) account(c *txBatch) {
	st := &s.stats
	if c.queued != 0 {
		st.txPackets.Add(uint64(c.queued))
		st.txBytes.Add(c.bytes)
		st.txByDescriptor.Add(c.byDesc)
		st.txCopied.Add(c.copied)
	}
	if c.refused|c.badOffload|c.noBuffer != 0 {
		st.txRefused.Add(c.refused)
		st.txBadOffload.Add(c.badOffload)
		st.txNoBuffer.Add(c.noBuffer)
	}
}
