package afxdp

// xdpstats: the counters of an XDP socket in the form the AF_PACKET ports
// give them (Stats), plus those only AF_XDP has. The socket's own counters
// are atomics written once per batch; the kernel's (XDP_STATISTICS:
// frames it could not deliver, invalid descriptors, empty fill ring) are
// read from the socket when asked.
//
// Locking: statsLocked runs under the port's mutex, which keeps the
// socket's fd open (removeSocket takes the socket off the port's list
// before its fd closes).

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/pktio"
)

// XDPStats are an Port's counters.
type XDPStats struct {
	// Stats in the AF_PACKET form. Rx.RingDrops are frames the kernel
	// could not deliver (RX ring full, no fill buffer, frame larger than
	// a UMEM frame); Rx.Errors and Tx.Refused include the invalid
	// descriptors the kernel counted; Tx.BadOffload are GSO super-frames
	// (AF_XDP cannot send them) and frames whose partial checksum could not
	// be completed.
	pktio.Stats
	// FillRingEmpty counts the times the kernel found a fill ring empty
	// (the worker was behind refilling).
	FillRingEmpty uint64
	// TxByDescriptor frames left by descriptor, without a copy; TxCopied
	// were copied into the UMEM first (generated frames, second outputs,
	// frames of another worker).
	TxByDescriptor, TxCopied uint64
	// TxNoBuffer frames were dropped for want of a free UMEM frame.
	TxNoBuffer uint64
	// TxKicks are the transmit system calls (copy mode: sendto, each
	// sending up to TxBudget frames); TxKickAgain those that returned
	// EAGAIN or EBUSY (more left, or the device busy); TxKickGaveUp the
	// kicks that left frames on the TX ring because the device made no
	// progress (sent by a later kick). Frames per kick = Tx.Packets /
	// TxKicks.
	TxKicks, TxKickAgain, TxKickGaveUp uint64
}

func (s *XDPStats) add(o XDPStats) {
	s.Rx.Packets += o.Rx.Packets
	s.Rx.Bytes += o.Rx.Bytes
	s.Rx.RingDrops += o.Rx.RingDrops
	s.Rx.Errors += o.Rx.Errors
	s.Tx.Add(o.Tx)
	s.FillRingEmpty += o.FillRingEmpty
	s.TxByDescriptor += o.TxByDescriptor
	s.TxCopied += o.TxCopied
	s.TxNoBuffer += o.TxNoBuffer
	s.TxKicks += o.TxKicks
	s.TxKickAgain += o.TxKickAgain
	s.TxKickGaveUp += o.TxKickGaveUp
}

// statsLocked reads the socket's counters and the kernel's.
func (s *Socket) statsLocked() XDPStats {
	c := &s.stats
	var st XDPStats
	st.Rx.Packets, st.Rx.Bytes, st.Rx.Errors = c.rxPackets.Load(), c.rxBytes.Load(), c.rxErrors.Load()
	st.Tx = pktio.TxStats{Packets: c.txPackets.Load(), Bytes: c.txBytes.Load(), Refused: c.txRefused.Load(),
		BadOffload: c.txBadOffload.Load(), Errors: c.txErrors.Load() + c.txNoBuffer.Load()}
	st.TxByDescriptor, st.TxCopied, st.TxNoBuffer = c.txByDescriptor.Load(), c.txCopied.Load(), c.txNoBuffer.Load()
	st.TxKicks, st.TxKickAgain, st.TxKickGaveUp = c.txKicks.Load(), c.txKickAgain.Load(), c.txKickGaveUp.Load()
	if _, open := s.port.socks[s]; open {
		var k unix.XDPStatistics
		if getsockoptRaw(s.fd, unix.XDP_STATISTICS, unsafe.Pointer(&k), unsafe.Sizeof(k)) == nil {
			st.Rx.RingDrops = k.Rx_dropped + k.Rx_ring_full
			st.Rx.Errors += k.Rx_invalid_descs
			st.Tx.Refused += k.Tx_invalid_descs
			st.FillRingEmpty = k.Rx_fill_ring_empty_descs
		}
	}
	return st
}

// Stats returns the socket's counters (any goroutine).
func (s *Socket) Stats() XDPStats {
	s.port.mu.Lock()
	defer s.port.mu.Unlock()
	return s.statsLocked()
}
