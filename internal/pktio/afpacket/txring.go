package afpacket

// txring: the TxRing transmit mode. Frames are copied into fixed-size slots
// of a TPACKET_V3 TX ring (tp_next_offset 0; at slot+48 a virtio-net header,
// always present so hdr_len can ask for a linear skb, then the frame),
// marked SEND_REQUEST, and one send(2)
// makes the kernel walk and transmit every requested slot. A slot becomes
// AVAILABLE again when the kernel frees its skb.
//
// The ring has a socket of its own; frames larger than a slot (GSO
// super-frames) are sent by sendmmsg on the Tx's plain socket after the
// ring is kicked, so the order of frames is kept.
//
// Locking: none; the owner goroutine of the Tx. Slot status words are shared
// with the kernel (atomic load/store).

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/pktio"
)

type txRing struct {
	sock      *rawSocket
	mem       []byte
	frameSize int
	frames    int
	head      int
	kickFn    func(fd uintptr) bool
	waitFn    func(fd uintptr) bool
	kickErr   unix.Errno // of the last kick (owner only)
}

// tpacket3 TX slot layout: status at 20 (tp_status), tp_len at 16,
// tp_next_offset at 0; data at tp_hdrlen - sizeof(sockaddr_ll) = 48.
const (
	txStatusOff = 20
	txLenOff    = 16
	txDataOff   = tpacket3HdrLen
)

func newTxRing(s *rawSocket, cfg *Config) (*txRing, error) {
	if err := s.setInt(unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V3, "PACKET_VERSION"); err != nil {
		return nil, err
	}
	if err := s.setInt(unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1, "PACKET_VNET_HDR"); err != nil {
		return nil, err
	}
	if err := s.setTxOptions(cfg); err != nil {
		return nil, err
	}
	if err := s.setInt(unix.SOL_PACKET, unix.PACKET_LOSS, 1, "PACKET_LOSS"); err != nil {
		return nil, err
	}
	perBlock := cfg.BlockSize / cfg.TxFrameSize
	blocks := (cfg.TxFrames + perBlock - 1) / perBlock
	req := unix.TpacketReq3{
		Block_size: uint32(cfg.BlockSize),
		Block_nr:   uint32(blocks),
		Frame_size: uint32(cfg.TxFrameSize),
		Frame_nr:   uint32(blocks * perBlock),
	}
	if err := s.setRing(unix.PACKET_TX_RING, &req); err != nil {
		return nil, err
	}
	mem, err := s.mmap(cfg.BlockSize * blocks)
	if err != nil {
		return nil, err
	}
	r := &txRing{sock: s, mem: mem, frameSize: cfg.TxFrameSize, frames: blocks * perBlock}
	r.kickFn = r.kick
	r.waitFn = r.waitSlot
	return r, nil
}

func (r *txRing) status(i int) *uint32 {
	return (*uint32)(unsafe.Pointer(&r.mem[i*r.frameSize+txStatusOff]))
}

// send copies frames into slots and kicks the kernel once per call (and
// whenever the ring is full or a big frame must go out in between).
func (r *txRing) send(t *Tx, frames [][]byte, offl []pktio.Offload) (int, error) {
	var c ringBatch
	// The ring socket always has PACKET_VNET_HDR: hdr_len in the header
	// makes tpacket_snd copy that many bytes into the skb's linear area, and
	// hdr_len = frame length gives a linear skb instead of one whose payload
	// is page fragments of the ring (which the receiver must pull up).
	const hdr = vnetHdrLen
	for i, f := range frames {
		var o pktio.Offload
		if offl != nil {
			o = offl[i]
		}
		if t.tooBig(f, o) {
			c.tooBig++
			continue
		}
		if !t.prepare(f, o) {
			c.bad++
			continue
		}
		if txDataOff+hdr+len(f) > r.frameSize {
			// Too big for a slot: flush the ring first to keep the order.
			if err := r.flush(t, &c); err != nil {
				return c.sent, err
			}
			var o1 []pktio.Offload
			if offl != nil {
				o1 = offl[i : i+1]
			}
			n, err := t.sendmmsg(frames[i:i+1], o1) // counts itself
			c.sent += n
			if err != nil {
				return c.sent, err
			}
			continue
		}
		if atomic.LoadUint32(r.status(r.head)) != unix.TP_STATUS_AVAILABLE {
			// Ring full: send what is queued, then wait for this slot.
			if err := r.flush(t, &c); err != nil {
				return c.sent, err
			}
			if err := r.sock.write(r.waitFn, &t.closed); err != nil {
				return c.sent, r.fail(t, &c, err)
			}
		}
		slot := r.mem[r.head*r.frameSize : (r.head+1)*r.frameSize]
		data := slot[txDataOff:]
		h, _ := vnetForTx(f, o) // prepare checked it (zero without offload)
		h.HdrLen = uint16(len(f))
		h.Encode(data)
		copy(data[vnetHdrLen:], f)
		binary.NativeEndian.PutUint32(slot[txLenOff:], uint32(hdr+len(f)))
		binary.NativeEndian.PutUint32(slot[0:], 0) // tp_next_offset: fixed-size slots
		atomic.StoreUint32(r.status(r.head), unix.TP_STATUS_SEND_REQUEST)
		r.head++
		if r.head == r.frames {
			r.head = 0
		}
		c.queued++
		c.bytes += uint64(len(f))
	}
	err := r.flush(t, &c)
	if c.bad != 0 {
		t.stats.badOffload.Add(c.bad)
	}
	if c.tooBig != 0 {
		t.stats.refused.Add(c.tooBig)
	}
	return c.sent, err
}

// ringBatch counts one send call.
type ringBatch struct {
	sent   int    // frames the kernel took (ring and big ones)
	queued int    // requested in the ring since the last flush
	bytes  uint64 // of the queued ones
	bad    uint64
	tooBig uint64 // longer than the device's MTU allows
}

// flush kicks the kernel to send the queued slots and accounts for them.
func (r *txRing) flush(t *Tx, c *ringBatch) error {
	if c.queued == 0 {
		return nil
	}
	r.kickErr = 0
	err := r.sock.write(r.kickFn, &t.closed)
	if err == nil && r.kickErr != 0 {
		err = r.kickErr
	}
	if err != nil {
		return r.fail(t, c, err)
	}
	t.stats.packets.Add(uint64(c.queued))
	t.stats.bytes.Add(c.bytes)
	c.sent += c.queued
	c.queued, c.bytes = 0, 0
	return nil
}

// fail accounts for a batch the device or shutdown stopped: queued slots
// stay requested and go out with a later kick if the device comes back.
func (r *txRing) fail(t *Tx, c *ringBatch, err error) error {
	if c.bad != 0 {
		t.stats.badOffload.Add(c.bad)
		c.bad = 0
	}
	if t.closed.Load() {
		return pktio.ErrClosed
	}
	return err
}

// kick asks the kernel to transmit the requested slots (non-blocking).
func (r *txRing) kick(fd uintptr) bool {
	for {
		_, _, e := unix.Syscall6(unix.SYS_SENDTO, fd, 0, 0, unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0:
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false // no send buffer: wait until skbs are freed
		case unix.ENOBUFS:
			return true // the device dropped one; the rest stay requested
		default:
			r.kickErr = e
			return true
		}
	}
}

// waitSlot is the RawConn.Write callback while the ring is full: a slot
// still requested (a kick stopped early) needs another kick, a slot being
// sent comes back when the kernel frees its skb (which wakes the socket).
func (r *txRing) waitSlot(fd uintptr) bool {
	switch atomic.LoadUint32(r.status(r.head)) {
	case unix.TP_STATUS_AVAILABLE:
		return true
	case unix.TP_STATUS_SEND_REQUEST:
		r.kick(fd)
		return atomic.LoadUint32(r.status(r.head)) == unix.TP_STATUS_AVAILABLE
	}
	return false
}

func (r *txRing) unmap() error {
	if r.mem == nil {
		return nil
	}
	err := unix.Munmap(r.mem)
	r.mem = nil
	return err
}
