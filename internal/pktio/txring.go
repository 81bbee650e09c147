// txring: the TxRing transmit mode. Frames are copied into fixed-size slots
// of a TPACKET_V3 TX ring (tp_next_offset 0, data at slot+48, after the
// virtio-net header in offload mode), marked SEND_REQUEST, and one send(2)
// makes the kernel walk and transmit every requested slot. A slot becomes
// AVAILABLE again when the kernel frees its skb.
//
// Kept as a measured alternative to sendmmsg (docs/pktio.md); frames larger
// than a slot are refused.
//
// Locking: none; the owner goroutine of the Tx. Slot status words are shared
// with the kernel (atomic load/store).
package pktio

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

type txRing struct {
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
	r := &txRing{mem: mem, frameSize: cfg.TxFrameSize, frames: blocks * perBlock}
	r.kickFn = r.kick
	r.waitFn = r.waitSlot
	return r, nil
}

func (r *txRing) status(i int) *uint32 {
	return (*uint32)(unsafe.Pointer(&r.mem[i*r.frameSize+txStatusOff]))
}

// send copies frames into slots and kicks the kernel once per ring's worth.
func (r *txRing) send(t *Tx, frames [][]byte, offl []Offload) (int, error) {
	queued, bad, refused := 0, uint64(0), uint64(0)
	var bytes uint64
	hdr := 0
	if t.vnet {
		hdr = vnetHdrLen
	}
	for i, f := range frames {
		var o Offload
		if offl != nil {
			o = offl[i]
		}
		if !t.prepare(f, o) {
			bad++
			continue
		}
		if txDataOff+hdr+len(f) > r.frameSize {
			refused++
			continue
		}
		if atomic.LoadUint32(r.status(r.head)) != unix.TP_STATUS_AVAILABLE {
			// Ring full: let the kernel send what is queued, then wait
			// for this slot.
			if err := r.doKick(t); err != nil {
				return r.finish(t, queued, bytes, bad, refused, err)
			}
			if err := t.sock.rc.Write(r.waitFn); err != nil {
				return r.finish(t, queued, bytes, bad, refused, err)
			}
		}
		slot := r.mem[r.head*r.frameSize : (r.head+1)*r.frameSize]
		data := slot[txDataOff:]
		if t.vnet {
			h, _ := vnetForTx(f, o)
			h.encode(data)
			data = data[vnetHdrLen:]
		}
		copy(data, f)
		binary.NativeEndian.PutUint32(slot[txLenOff:], uint32(hdr+len(f)))
		binary.NativeEndian.PutUint32(slot[0:], 0)
		atomic.StoreUint32(r.status(r.head), unix.TP_STATUS_SEND_REQUEST)
		r.head++
		if r.head == r.frames {
			r.head = 0
		}
		queued++
		bytes += uint64(len(f))
	}
	var err error
	if queued > 0 {
		err = r.doKick(t)
	}
	return r.finish(t, queued, bytes, bad, refused, err)
}

// doKick runs kick in the netpoller and returns the kernel's error, if any.
// Frames a failed kick leaves requested are sent by the next one.
func (r *txRing) doKick(t *Tx) error {
	r.kickErr = 0
	if err := t.sock.rc.Write(r.kickFn); err != nil {
		return err
	}
	if r.kickErr != 0 {
		return r.kickErr
	}
	return nil
}

func (r *txRing) finish(t *Tx, queued int, bytes, bad, refused uint64, err error) (int, error) {
	t.stats.packets.Add(uint64(queued))
	t.stats.bytes.Add(bytes)
	if bad != 0 {
		t.stats.badOffload.Add(bad)
	}
	if refused != 0 {
		t.stats.refused.Add(refused)
	}
	if err != nil && t.closed.Load() {
		err = ErrClosed
	}
	return queued, err
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
		case unix.EAGAIN, unix.ENOBUFS:
			return false
		default:
			r.kickErr = e
			return true
		}
	}
}

func (r *txRing) waitSlot(uintptr) bool {
	return atomic.LoadUint32(r.status(r.head)) == unix.TP_STATUS_AVAILABLE
}

func (r *txRing) unmap() error {
	if r.mem == nil {
		return nil
	}
	err := unix.Munmap(r.mem)
	r.mem = nil
	return err
}
