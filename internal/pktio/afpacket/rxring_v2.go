package afpacket

// rxring_v2: the TPACKET_V2 receive ring (Config.Ring = RingV2), for low
// latency at low rates.
//
// Why: a TPACKET_V3 block is handed to user space when it is full or when
// its timeout (1 ms, the minimum) retires it, so at low rates every frame
// waits up to that long (a ping through netfwd averaged 1.98 ms RTT on V3,
// 0.2 ms on AF_XDP), and a TCP stream's ACKs, which travel alone, wait on
// every hop. V2 has a status word per slot and wakes the socket per frame.
// Its price is a fixed slot per frame (SlotSize, 2 KiB by default): a GSO
// super-frame or a jumbo frame does not fit. PACKET_COPY_THRESH keeps those:
// the kernel puts what fits in the slot, marks it TP_STATUS_COPY and queues
// the whole frame on the socket, where read(2) takes it (virtio-net header
// first) into one of the queue's copy buffers. The slot keeps the frame's
// place in the ring's order and carries its length, status and VLAN tag.
//
// Flow of fillV2:
//
//	for each slot from cur whose status has TP_STATUS_USER:
//	  TP_STATUS_COPY: read(2) the whole frame into a free copy buffer
//	    (none free: end the batch here, the next Recv continues)
//	  processFrame (shared with V3: truncation, outgoing, vnet header,
//	    VLAN restore, checksums)
//	the slots handed out are given back (TP_STATUS_KERNEL) by the next
//	Release; copy buffers are reused by the next Recv.
//
// Locking: as rxring.go: one owner goroutine; slot status words are shared
// with the kernel and accessed with atomic loads/stores.

import (
	"errors"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/wire"
)

// Ring selects the receive ring's layout.
type Ring int

const (
	// RingDefault is RingV3 for pktio; the daemon takes RingV2.
	RingDefault Ring = iota
	// RingV3: TPACKET_V3 blocks, frames packed back to back; a block is
	// handed over when full or after BlockTimeout.
	RingV3
	// RingV2: TPACKET_V2, one slot per frame, per-frame wake-ups; frames
	// larger than a slot arrive through the socket's queue.
	RingV2
)

// TPACKET_V2 layout (linux/if_packet.h).
const (
	tpacket2HdrLen   = 32 // TPACKET_ALIGN(sizeof(struct tpacket2_hdr))
	defaultSlotSize  = 2048
	v2CopyBuffers    = 8
	v2CopyBufferSize = 64<<10 + 512 // a GSO super-frame, its vnet header, a tag, headroom
	v2RcvBuf         = 16 << 20     // the socket queue that holds super-frames
	// v2MacGap is where the MAC header lands in a slot without a vnet
	// header or reserve: TPACKET_ALIGN(52 + 16) - 14 = 66 bytes.
	v2MacGap = 66
)

// tpacket2Hdr mirrors struct tpacket2_hdr.
type tpacket2Hdr struct {
	status   uint32
	len      uint32
	snaplen  uint32
	mac      uint16
	net      uint16
	sec      uint32
	nsec     uint32
	vlanTCI  uint16
	vlanTPID uint16
	_        [4]byte
}

var _ [tpacket2HdrLen - unsafe.Sizeof(tpacket2Hdr{})]struct{}
var _ [unsafe.Sizeof(tpacket2Hdr{}) - tpacket2HdrLen]struct{}

// v2State is a V2 queue's owner state.
type v2State struct {
	slotSize, slots int
	cur             int // next slot to read
	held            int // slots handed out, released by the next Release
	copies          [][]byte
	copyUsed        int
	readFn          func(fd uintptr) bool
	readBuf         []byte // the copy buffer readFn fills
	readN           int
	readErr         error
	spin            time.Duration // Config.Spin
}

func (q *Queue) slotStatus(i int) *uint32 {
	return (*uint32)(unsafe.Pointer(&q.ring[i*q.v2.slotSize]))
}

func (q *Queue) releaseV2() {
	v := q.v2
	for ; v.held > 0; v.held-- {
		i := v.cur - v.held
		if i < 0 {
			i += v.slots
		}
		atomic.StoreUint32(q.slotStatus(i), unix.TP_STATUS_KERNEL)
	}
	v.copyUsed = 0
}

// spinV2 watches the next slot for up to the spin time before Recv parks
// in the netpoller: V2 wakes the socket per frame, and a worker that parks
// after every small batch pays a wake-up (and a transmit system call) per
// few frames at high rates. It reports whether a frame arrived.
func (q *Queue) spinV2() bool {
	if q.v2.spin <= 0 {
		return false
	}
	deadline := time.Now().Add(q.v2.spin)
	for {
		for range 64 {
			if q.readyV2() || q.closed.Load() {
				return true
			}
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

func (q *Queue) readyV2() bool {
	return atomic.LoadUint32(q.slotStatus(q.v2.cur))&unix.TP_STATUS_USER != 0
}

// fillV2 hands out the ready slots from cur.
func (q *Queue) fillV2(frames [][]byte, meta []pktio.Meta) int {
	v := q.v2
	var bc batchCounts
	n := 0
	for n < len(frames) && v.held < v.slots/2 {
		slot := q.ring[v.cur*v.slotSize : (v.cur+1)*v.slotSize : (v.cur+1)*v.slotSize]
		h := (*tpacket2Hdr)(unsafe.Pointer(&slot[0]))
		status := atomic.LoadUint32(&h.status)
		if status&unix.TP_STATUS_USER == 0 {
			break
		}
		fh := rxHdr{snap: int(h.snaplen), wire: int(h.len), status: status, mac: int(h.mac),
			vlanTCI: h.vlanTCI, vlanTPID: h.vlanTPID, hdrLen: tpacket2HdrLen}
		var ok bool
		if status&unix.TP_STATUS_COPY != 0 {
			if v.copyUsed == len(v.copies) {
				break // the copy buffers are in use until the next Recv
			}
			ok = q.copiedFrame(slot, &fh, &frames[n], &meta[n], &bc)
		} else {
			ok = q.processFrame(slot, 0, &fh, &frames[n], &meta[n], &bc)
		}
		if ok {
			n++
		}
		v.held++
		if v.cur++; v.cur == v.slots {
			v.cur = 0
		}
	}
	bc.packets = uint64(n)
	q.stats.add(&bc)
	return n
}

// copiedFrame reads the whole frame of a TP_STATUS_COPY slot from the socket
// into the next copy buffer, laid out as the ring lays out a frame (a
// header area with the slot's sockaddr_ll, the vnet header, the frame), and
// runs processFrame on it.
func (q *Queue) copiedFrame(slot []byte, fh *rxHdr, frame *[]byte, m *pktio.Meta, bc *batchCounts) bool {
	v := q.v2
	buf := v.copies[v.copyUsed]
	// The ring's header and sockaddr_ll (pkttype) first, then room for a
	// tag and the headroom, then what read(2) returns: vnet header + frame.
	copy(buf[:tpacket2HdrLen+sockaddrLLLen], slot)
	mac := tpacket2HdrLen + sockaddrLLLen + wire.VLANTagLen + q.headroom
	at := mac // read(2) puts the vnet header here, the frame after it
	if q.vnet {
		mac += vnetHdrLen
	}
	v.readBuf = buf[at:]
	if err := q.sock.read(v.readFn); err != nil || v.readErr != nil {
		bc.errors++
		return false
	}
	got := v.readN
	if q.vnet {
		got -= vnetHdrLen
	}
	if got < 0 || got != fh.wire {
		bc.errors++ // the queue and the ring disagree: drop this one
		return false
	}
	v.copyUsed++
	fh.mac, fh.snap = mac, got
	return q.processFrame(buf, 0, fh, frame, m, bc)
}

// readCopy is the RawConn.Read callback of copiedFrame: one non-blocking
// read(2) of the frame the kernel queued before it set TP_STATUS_COPY.
func (q *Queue) readCopy(fd uintptr) bool {
	v := q.v2
	v.readN, v.readErr = unix.Read(int(fd), v.readBuf)
	if errors.Is(v.readErr, unix.EAGAIN) {
		v.readErr = errCopyMissing
	}
	return true
}

// errCopyMissing: a slot said TP_STATUS_COPY and the socket held no frame
// (the kernel queues the frame before it sets the status, so this is not
// expected); the frame is counted as an error and dropped.
var errCopyMissing = errors.New("pktio: TP_STATUS_COPY without a queued frame")

// setupV2 configures the socket for a V2 ring and maps it.
func (q *Queue) setupV2(s *rawSocket, cfg *Config) error {
	q.initV2(cfg)
	// The MAC header lands v2MacGap bytes into the slot (76 with the vnet
	// header).
	if err := q.setFrameLayout(s, unix.TPACKET_V2, tpacket2HdrLen, v2MacGap, cfg.Headroom); err != nil {
		return err
	}
	if err := s.setInt(unix.SOL_PACKET, unix.PACKET_COPY_THRESH, 1, "PACKET_COPY_THRESH"); err != nil {
		return err
	}
	if err := s.setInt(unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, v2RcvBuf, "SO_RCVBUFFORCE"); err != nil {
		// Without CAP_NET_ADMIN: what net.core.rmem_max allows. A
		// super-frame that finds the queue full arrives cut and is
		// dropped as Truncated.
		if err := s.setInt(unix.SOL_SOCKET, unix.SO_RCVBUF, v2RcvBuf, "SO_RCVBUF"); err != nil {
			return err
		}
	}
	req := unix.TpacketReq{Block_size: uint32(cfg.BlockSize), Block_nr: uint32(cfg.Blocks),
		Frame_size: uint32(q.v2.slotSize), Frame_nr: uint32(q.v2.slots)}
	if err := s.control(func(fd int) error { return unix.SetsockoptTpacketReq(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req) }); err != nil {
		return err
	}
	return q.mapV2(s, cfg)
}

// initV2 sets up the owner state of a V2 ring laid out by cfg.
func (q *Queue) initV2(cfg *Config) {
	q.v2 = &v2State{slotSize: cfg.SlotSize, slots: cfg.BlockSize / cfg.SlotSize * cfg.Blocks, spin: cfg.Spin}
	q.v2.readFn = q.readCopy
}

// mapV2 maps the socket's V2 ring (set up by this process or, handed
// over, by another) and allocates the copy buffers.
func (q *Queue) mapV2(s *rawSocket, cfg *Config) error {
	ring, err := s.mmap(cfg.BlockSize * cfg.Blocks)
	if err != nil {
		return err
	}
	q.ring = ring
	for range v2CopyBuffers {
		b := make([]byte, v2CopyBufferSize+cfg.Headroom)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1 // resident now, as the ring is (MAP_POPULATE): RSS holds them from the start
		}
		q.v2.copies = append(q.v2.copies, b)
	}
	return nil
}
