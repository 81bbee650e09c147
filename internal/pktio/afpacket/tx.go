package afpacket

// tx: a Tx is a transmit handle on a Port for one owner goroutine: its own
// send-only sockets (bound with protocol 0, so they receive nothing) with
// PACKET_QDISC_BYPASS. In TxRing mode (the default, txring.go) frames go
// through a TX ring; this file is the sendmmsg path, used by TxSendmmsg
// mode and by the ring mode for frames too big for a ring slot.
//
// Flow of sendmmsg: per frame, build the virtio-net header from its Offload
// (offload mode) and point iovecs at header and frame (no copy); submit up
// to TxBatch messages per sendmmsg(2) from a RawConn.Write callback, which
// parks the owner in the netpoller while the socket's send buffer is full
// (EAGAIN); a message the kernel refuses (EMSGSIZE, EINVAL, ENOBUFS) is
// counted and skipped; a dead device (ENETDOWN, ENXIO) ends the call.
//
// Locking: none; one owner goroutine. Counters are atomics.

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/wire"
)

// Tx sends batches of frames on one port. One owner goroutine.
type Tx struct {
	port  *Port
	sock  *rawSocket
	vnet  bool
	batch int

	msgs []unix.Mmsghdr
	iovs []unix.Iovec
	hdrs []byte // vnetHdrLen per message
	lens []int  // frame length per message

	// State of the batch being written (owner only).
	count, next int
	sentBytes   uint64
	refused     uint64
	fatal       error
	writeFn     func(fd uintptr) bool

	ring *txRing // TxRing mode

	closed atomic.Bool
	stats  txCounters
}

type txCounters struct {
	packets, bytes atomic.Uint64
	refused        atomic.Uint64 // frames the kernel refused
	badOffload     atomic.Uint64 // frames whose offload state did not fit them
	errors         atomic.Uint64 // frames dropped because the device failed
	_              [64]byte
}

func newTx(p *Port, mode TxMode) (*Tx, error) {
	s, err := openTxSocket(p.ifi)
	if err != nil {
		return nil, err
	}
	t := &Tx{port: p, sock: s, vnet: !p.cfg.NoOffload, batch: p.cfg.TxBatch}
	fail := func(err error) (*Tx, error) {
		s.close()
		t.unmap()
		return nil, err
	}
	if t.vnet {
		if err := s.setInt(unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1, "PACKET_VNET_HDR"); err != nil {
			return fail(err)
		}
	}
	if err := s.setTxOptions(&p.cfg); err != nil {
		return fail(err)
	}
	if mode == TxRing {
		// The ring gets a socket of its own: a socket with a TX ring sends
		// only from the ring, and frames too big for a slot (GSO
		// super-frames) still go out through sendmmsg on s.
		rs, err := openTxSocket(p.ifi)
		if err != nil {
			return fail(err)
		}
		r, err := newTxRing(rs, &p.cfg)
		if err != nil {
			rs.close()
			return fail(err)
		}
		t.ring = r
	}
	per := 1
	if t.vnet {
		per = 2
	}
	t.msgs = make([]unix.Mmsghdr, t.batch)
	t.iovs = make([]unix.Iovec, per*t.batch)
	t.hdrs = make([]byte, vnetHdrLen*t.batch)
	t.lens = make([]int, t.batch)
	for k := range t.msgs {
		t.msgs[k].Hdr.Iov = &t.iovs[per*k]
		t.msgs[k].Hdr.Iovlen = uint64(per)
		if t.vnet {
			t.iovs[2*k].Base = &t.hdrs[vnetHdrLen*k]
			t.iovs[2*k].Len = vnetHdrLen
		}
	}
	t.writeFn = t.write
	return t, nil
}

// Send transmits frames on the port, frame i with offload state offl[i]
// (offl may be nil: all plain frames). It returns the number of frames the
// kernel accepted. Frames it refuses one by one are counted (Stats) and
// skipped; err is non-nil only when the port is shut down or its device is
// gone, and then the remaining frames are dropped and counted. Frames may
// be reused as soon as Send returns. Send does not allocate.
func (t *Tx) Send(frames [][]byte, offl []pktio.Offload) (int, error) {
	if t.closed.Load() {
		return 0, pktio.ErrClosed
	}
	if t.ring != nil {
		return t.ring.send(t, frames, offl)
	}
	return t.sendmmsg(frames, offl)
}

// sendmmsg is Send without a ring.
func (t *Tx) sendmmsg(frames [][]byte, offl []pktio.Offload) (int, error) {
	sent := 0
	for i := 0; i < len(frames); {
		k := 0
		var bad uint64
		for ; i < len(frames) && k < t.batch; i++ {
			f := frames[i]
			var o pktio.Offload
			if offl != nil {
				o = offl[i]
			}
			if t.tooBig(f, o) {
				t.stats.refused.Add(1)
				continue
			}
			if !t.prepare(f, o) {
				bad++
				continue
			}
			if t.vnet {
				h, _ := vnetForTx(f, o) // prepare checked it
				h.Encode(t.hdrs[vnetHdrLen*k:])
				t.iovs[2*k+1].Base = unsafe.SliceData(f)
				t.iovs[2*k+1].SetLen(len(f))
			} else {
				t.iovs[k].Base = unsafe.SliceData(f)
				t.iovs[k].SetLen(len(f))
			}
			t.lens[k] = len(f)
			k++
		}
		if bad != 0 {
			t.stats.badOffload.Add(bad)
		}
		n, unsent, err := t.submit(k)
		sent += n
		if err != nil {
			if rest := len(frames) - i + unsent; rest > 0 {
				t.stats.errors.Add(uint64(rest))
			}
			return sent, err
		}
	}
	return sent, nil
}

// tooBig reports a plain frame longer than the device takes: the kernel
// drops those silently from a TX ring (PACKET_LOSS) and with EMSGSIZE from
// sendmmsg, after the engine counted them as sent. The limit is
// af_packet's: MTU + Ethernet header + one VLAN tag. GSO super-frames are
// segmented to the MTU by the kernel.
func (t *Tx) tooBig(f []byte, o pktio.Offload) bool {
	return len(f) > int(t.port.mtu.Load())+wire.EthernetHeaderLen+4 && o.GSOType == pktio.GSONone
}

// prepare checks a frame against its offload state and, without a vnet
// header to carry it, completes a partial checksum in place.
func (t *Tx) prepare(f []byte, o pktio.Offload) bool {
	if len(f) < wire.EthernetHeaderLen {
		return false
	}
	if o.IsZero() {
		return true
	}
	if t.vnet {
		_, ok := vnetForTx(f, o)
		return ok
	}
	if o.GSOType != pktio.GSONone || !o.NeedsCsum {
		return false // a super-frame cannot leave without GSO offload
	}
	l3, ok := pktio.L3Offset(f)
	return ok && pktio.CompletePartial(f, l3+int(o.L4Off), int(o.CsumOffset))
}

// submit sends msgs[:k] and returns how many the kernel accepted and, on
// error, how many it never got to.
func (t *Tx) submit(k int) (accepted, unsent int, err error) {
	if k == 0 {
		return 0, 0, nil
	}
	t.count, t.next, t.sentBytes, t.refused, t.fatal = k, 0, 0, 0, nil
	err = t.sock.write(t.writeFn, &t.closed)
	accepted, unsent = t.next-int(t.refused), k-t.next
	t.stats.packets.Add(uint64(accepted))
	t.stats.bytes.Add(t.sentBytes)
	if t.refused != 0 {
		t.stats.refused.Add(t.refused)
	}
	switch {
	case t.fatal != nil:
		return accepted, unsent, t.fatal
	case err != nil && t.closed.Load():
		return accepted, unsent, pktio.ErrClosed
	case err != nil:
		return accepted, unsent, err
	}
	return accepted, 0, nil
}

// write is the RawConn.Write callback: it returns false to wait for the
// socket to become writable.
func (t *Tx) write(fd uintptr) bool {
	for t.next < t.count {
		r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&t.msgs[t.next])),
			uintptr(t.count-t.next), 0, 0, 0)
		switch e {
		case 0:
			for j := t.next; j < t.next+int(r); j++ {
				t.sentBytes += uint64(t.lens[j])
			}
			t.next += int(r)
		case unix.EAGAIN:
			return false
		case unix.EINTR:
		case unix.ENETDOWN, unix.ENXIO, unix.ENODEV, unix.EBADF:
			t.fatal = e
			return true
		default:
			// This message is refused (EMSGSIZE, EINVAL, ENOBUFS, ...);
			// skip it and go on with the rest.
			t.next++
			t.refused++
		}
	}
	return true
}

// Close closes the handle's socket. The Port closes its handles too.
// Handles of one port may be closed concurrently: closing a packet socket
// waits for an RCU grace period in the kernel, so it happens outside the
// port's lock.
func (t *Tx) Close() error {
	t.port.mu.Lock()
	owned := false
	for i, x := range t.port.txs {
		if x == t {
			t.port.txs = append(t.port.txs[:i], t.port.txs[i+1:]...)
			t.port.retiredTx.Add(t.Stats())
			owned = true
			break
		}
	}
	t.port.mu.Unlock()
	if !owned {
		return nil // the port closed it already
	}
	return t.release()
}

// release unmaps the ring and then closes the sockets (in that order: see
// Port.shutdownLocked); the owner must be done.
func (t *Tx) release() error {
	t.closed.Store(true)
	err := t.unmap()
	t.closeSockets()
	return err
}

// closeSockets closes the handle's sockets; the owner must be done.
func (t *Tx) closeSockets() {
	t.closed.Store(true)
	t.sock.close()
	if t.ring != nil {
		t.ring.sock.close()
	}
}

func (t *Tx) unmap() error {
	if t.ring == nil {
		return nil
	}
	return t.ring.unmap()
}
