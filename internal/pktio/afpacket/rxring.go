package afpacket

// rxring: a Queue is one fanout member socket with its TPACKET_V3 receive
// ring, read in place by its owner goroutine.
//
// Flow of Recv:
//
//	release the blocks the previous batch came from (block_status = KERNEL)
//	walk closed blocks (block_status & USER) frame by frame:
//	  skip truncated and own outgoing frames (counted),
//	  decode the virtio-net header, restore an offloaded VLAN tag into the
//	  bytes, complete a partial checksum,
//	  hand out frames[n] = ring bytes, meta[n]
//	nothing ready: park in the netpoller (RawConn.Read with a callback that
//	  returns false while the next block is still the kernel's); the kernel
//	  wakes the socket when it closes a block (full, or BlockTimeout after
//	  its first frame).
//
// Locking: none. One owner goroutine calls Recv/Release; block_status words
// are shared with the kernel and accessed with atomic loads/stores (acquire/
// release). Counters are atomics so Stats can read them from anywhere.

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/wire"
)

// Queue is one receive queue of a Port: a socket in the port's fanout group
// with its own ring. It has exactly one owner goroutine.
type Queue struct {
	port *Port
	idx  int
	sock *rawSocket

	ring        []byte // all blocks, mmapped
	blockSize   int
	blocks      int
	headroom    int
	vnet        bool
	keepPartial bool

	// Owner state (owner goroutine only).
	cur     int  // block being read
	inBlock bool // cur is a closed block we started reading
	left    int  // frames left in cur
	off     int  // offset of the next frame in cur
	held    int  // fully read blocks before cur, released by the next Recv
	waitFn  func(fd uintptr) bool

	v2 *v2State // RingV2 (rxring_v2.go); nil: V3

	closed atomic.Bool
	stats  rxCounters
}

// rxCounters are the queue's counters, written by the owner once per batch.
type rxCounters struct {
	packets, bytes      atomic.Uint64
	truncated, outgoing atomic.Uint64
	vlanRestored        atomic.Uint64
	csumCompleted       atomic.Uint64
	csumUnfixed         atomic.Uint64
	gso                 atomic.Uint64
	errors              atomic.Uint64
	ringDrops, freezes  atomic.Uint64 // from PACKET_STATISTICS, summed
	_                   [64]byte      // keep the next queue's counters off this line
}

// batchCounts accumulate in registers during a Recv and are flushed once.
type batchCounts struct {
	packets, bytes, truncated, outgoing, vlan, csum, unfixed, gso, errors uint64
}

func (c *rxCounters) add(b *batchCounts) {
	if b.packets != 0 {
		c.packets.Add(b.packets)
		c.bytes.Add(b.bytes)
	}
	if b.truncated|b.outgoing|b.vlan|b.csum|b.unfixed|b.gso|b.errors == 0 {
		return
	}
	c.truncated.Add(b.truncated)
	c.outgoing.Add(b.outgoing)
	c.vlanRestored.Add(b.vlan)
	c.csumCompleted.Add(b.csum)
	c.csumUnfixed.Add(b.unfixed)
	c.gso.Add(b.gso)
	c.errors.Add(b.errors)
}

// Index is the queue's position in its Port (its fanout member number).
func (q *Queue) Index() int { return q.idx }

// Headroom is the number of writable bytes at the start of every slice Recv
// returns, in front of the frame (Config.Headroom).
func (q *Queue) Headroom() int { return q.headroom }

// Recv waits until at least one frame is available and returns up to
// min(len(frames), len(meta)) of them: frames[i][q.Headroom():] is frame i,
// in place in the ring, and meta[i] describes it. The frames of the
// previous Recv on this queue become invalid (their blocks go back to the
// kernel). Recv returns ErrClosed after Port.Shutdown. It does not allocate.
func (q *Queue) Recv(frames [][]byte, meta []pktio.Meta) (int, error) {
	max := min(len(frames), len(meta))
	for {
		if q.closed.Load() {
			return 0, pktio.ErrClosed
		}
		q.Release()
		if max == 0 {
			return 0, nil
		}
		if n := q.fill(frames[:max], meta[:max]); n > 0 {
			return n, nil
		}
		if q.blockReady() {
			continue // a ready block held only skipped frames
		}
		if q.v2 != nil && q.spinV2() {
			continue
		}
		if err := q.sock.read(q.waitFn); err != nil {
			if q.closed.Load() {
				return 0, pktio.ErrClosed
			}
			return 0, err
		}
	}
}

// TryRecv is Recv without waiting: it returns 0 when no block is ready.
func (q *Queue) TryRecv(frames [][]byte, meta []pktio.Meta) (int, error) {
	if q.closed.Load() {
		return 0, pktio.ErrClosed
	}
	q.Release()
	return q.fill(frames[:min(len(frames), len(meta))], meta), nil
}

// Release hands the blocks of the frames returned so far back to the kernel
// (Recv does it on entry). Frames returned earlier are invalid afterwards.
func (q *Queue) Release() {
	if q.v2 != nil {
		q.releaseV2()
		return
	}
	for ; q.held > 0; q.held-- {
		b := q.cur - q.held
		if b < 0 {
			b += q.blocks
		}
		atomic.StoreUint32(q.word(b, blkStatusOff), unix.TP_STATUS_KERNEL)
	}
}

func (q *Queue) word(block, off int) *uint32 {
	return (*uint32)(unsafe.Pointer(&q.ring[block*q.blockSize+off]))
}

// blockReady reports whether the owner has something to read now.
func (q *Queue) blockReady() bool {
	if q.v2 != nil {
		return q.readyV2()
	}
	if q.inBlock {
		return true
	}
	return atomic.LoadUint32(q.word(q.cur, blkStatusOff))&unix.TP_STATUS_USER != 0
}

func (q *Queue) wait(uintptr) bool { return q.closed.Load() || q.blockReady() }

// fill walks ready blocks and returns the number of frames handed out.
func (q *Queue) fill(frames [][]byte, meta []pktio.Meta) int {
	if q.v2 != nil {
		return q.fillV2(frames, meta)
	}
	var bc batchCounts
	n := 0
	for n < len(frames) {
		if !q.inBlock {
			// Hold at most half the ring for one batch (a batch of GSO
			// super-frames spans a block per frame): the kernel keeps room,
			// and cur never wraps onto a block we still hold.
			if q.held >= q.blocks/2 {
				break
			}
			if atomic.LoadUint32(q.word(q.cur, blkStatusOff))&unix.TP_STATUS_USER == 0 {
				break
			}
			q.inBlock = true
			q.left = int(*q.word(q.cur, blkNumPktsOff))
			q.off = int(*q.word(q.cur, blkFirstPktOff))
		}
		if q.left == 0 {
			q.finishBlock()
			continue
		}
		blk := q.ring[q.cur*q.blockSize : (q.cur+1)*q.blockSize : (q.cur+1)*q.blockSize]
		off := q.off
		q.left--
		if off < blkHdrLen || off+tpacket3HdrLenWithSLL > len(blk) {
			bc.errors++ // corrupt ring: abandon the block
			q.left = 0
			continue
		}
		h := (*tpacket3Hdr)(unsafe.Pointer(&blk[off]))
		q.off = off + int(h.nextOffset)
		fh := rxHdr{snap: int(h.snaplen), wire: int(h.len), status: h.status, mac: int(h.mac),
			vlanTCI: uint16(h.vlanTCI), vlanTPID: h.vlanTPID, hdrLen: tpacket3HdrLen}
		if q.processFrame(blk, off, &fh, &frames[n], &meta[n], &bc) {
			n++
		}
	}
	if q.inBlock && q.left == 0 {
		q.finishBlock()
	}
	bc.packets = uint64(n)
	q.stats.add(&bc)
	return n
}

func (q *Queue) finishBlock() {
	q.inBlock = false
	q.held++
	q.cur++
	if q.cur == q.blocks {
		q.cur = 0
	}
}

// rxHdr is what processFrame needs of a frame's ring header, the same for
// TPACKET_V3 and V2 (whose headers differ in layout and length).
type rxHdr struct {
	snap, wire int
	status     uint32
	mac        int // the frame's offset from the header
	vlanTCI    uint16
	vlanTPID   uint16
	hdrLen     int // TPACKET_ALIGN(sizeof header); struct sockaddr_ll follows
}

// processFrame validates and fixes up the frame at blk[off:] and fills
// *frame and *m. It returns false for frames it drops (counted in bc).
func (q *Queue) processFrame(blk []byte, off int, h *rxHdr, frame *[]byte, m *pktio.Meta, bc *batchCounts) bool {
	snap, wireLen, status := h.snap, h.wire, h.status
	start := off + h.mac
	end := start + snap
	if end > len(blk) || start < off+h.hdrLen+sockaddrLLLen {
		bc.errors++
		return false
	}
	if snap < wireLen {
		bc.truncated++
		return false
	}
	if blk[off+h.hdrLen+sllPkttypeInSLL] == unix.PACKET_OUTGOING {
		bc.outgoing++ // PACKET_IGNORE_OUTGOING makes this rare; belt and braces
		return false
	}
	*m = pktio.Meta{Len: uint32(wireLen)}
	var vh vnetHdr
	if q.vnet {
		vh = decodeVnet(blk[start-vnetHdrLen : start])
		if vh.Flags&vnetFlagDataValid != 0 {
			m.Flags |= pktio.FlagChecksumValid
		}
	}
	if status&tpStatusCsumValid != 0 {
		m.Flags |= pktio.FlagChecksumValid
	}
	// Offsets of the partial checksum relative to L3, taken before the tag
	// is restored (both move by the same 4 bytes).
	if vh.Flags&vnetFlagNeedsCsum != 0 {
		l3, ok := pktio.L3Offset(blk[start:end])
		if !ok || int(vh.CsumStart) < l3 {
			bc.unfixed++
		} else {
			m.Offload = pktio.Offload{NeedsCsum: true, L4Off: vh.CsumStart - uint16(l3), CsumOffset: vh.CsumOffset}
		}
	}
	if status&unix.TP_STATUS_VLAN_VALID != 0 {
		if start-wire.VLANTagLen-q.headroom < off+h.hdrLen {
			bc.errors++ // cannot happen with the reserve Open sets
			return false
		}
		tpid := uint16(wire.EtherTypeVLAN)
		if status&unix.TP_STATUS_VLAN_TPID_VALID != 0 && h.vlanTPID != 0 {
			tpid = h.vlanTPID
		}
		copy(blk[start-wire.VLANTagLen:start+12-wire.VLANTagLen], blk[start:start+12])
		start -= wire.VLANTagLen
		binary.BigEndian.PutUint16(blk[start+12:], tpid)
		binary.BigEndian.PutUint16(blk[start+14:], h.vlanTCI)
		m.Len += wire.VLANTagLen
		m.VLANTCI = h.vlanTCI
		m.Flags |= pktio.FlagVLANRestored
		bc.vlan++
	}
	f := blk[start:end]
	if vh.GSOType != pktio.GSONone {
		m.Offload.GSOType = vh.GSOType
		m.Offload.GSOSize = vh.GSOSize
		m.Flags |= pktio.FlagGSO
		bc.gso++
	}
	switch {
	case m.Offload.NeedsCsum && (vh.GSOType != pktio.GSONone || q.keepPartial):
		m.Flags |= pktio.FlagChecksumPartial
	case m.Offload.NeedsCsum:
		l3, _ := pktio.L3Offset(f)
		if pktio.CompletePartial(f, l3+int(m.Offload.L4Off), int(m.Offload.CsumOffset)) {
			m.Flags |= pktio.FlagChecksumCompleted
			m.Offload = pktio.Offload{}
			bc.csum++
		} else {
			m.Flags |= pktio.FlagChecksumPartial
			bc.unfixed++
		}
	case !q.vnet && status&unix.TP_STATUS_CSUMNOTREADY != 0:
		if pktio.CompleteIPv4L4(f) {
			m.Flags |= pktio.FlagChecksumCompleted
			bc.csum++
		} else {
			bc.unfixed++
		}
	}
	*frame = blk[start-q.headroom : end : end]
	bc.bytes += uint64(len(f))
	return true
}

// tpStatusCsumValid is TP_STATUS_CSUM_VALID (linux/if_packet.h).
const tpStatusCsumValid = 1 << 7

// newQueue sets up the ring of an opened socket.
func newQueue(p *Port, idx int, s *rawSocket, cfg *Config) (*Queue, error) {
	q := &Queue{port: p, idx: idx, sock: s, blockSize: cfg.BlockSize, blocks: cfg.Blocks,
		headroom: cfg.Headroom, vnet: !cfg.NoOffload, keepPartial: cfg.KeepPartialChecksum}
	q.waitFn = q.wait
	if cfg.Ring == RingV2 {
		if err := q.setupV2(s, cfg); err != nil {
			return nil, err
		}
		return q, nil
	}
	// The kernel leaves TPACKET_ALIGN(68+16) - 14 = 82 bytes (92 with the
	// vnet header) in front of an Ethernet frame.
	if err := q.setFrameLayout(s, unix.TPACKET_V3, tpacket3HdrLen, 82, cfg.Headroom); err != nil {
		return nil, err
	}
	req := unix.TpacketReq3{
		Block_size:     uint32(cfg.BlockSize),
		Block_nr:       uint32(cfg.Blocks),
		Frame_size:     uint32(cfg.BlockSize), // unused by V3 beyond sanity checks
		Frame_nr:       uint32(cfg.Blocks),
		Retire_blk_tov: uint32(cfg.BlockTimeout.Milliseconds()),
	}
	if err := s.setRing(unix.PACKET_RX_RING, &req); err != nil {
		return nil, err
	}
	ring, err := s.mmap(cfg.BlockSize * cfg.Blocks)
	if err != nil {
		return nil, err
	}
	q.ring = ring
	return q, nil
}

// setFrameLayout sets the ring's version, the virtio-net header and the
// reserve: the kernel leaves gap bytes in front of a frame (without the vnet
// header); restoring a VLAN tag takes 4 of them, and Headroom more must stay
// clear of the hdrLen-byte frame header.
func (q *Queue) setFrameLayout(s *rawSocket, version, hdrLen, gap, headroom int) error {
	if err := s.setInt(unix.SOL_PACKET, unix.PACKET_VERSION, version, "PACKET_VERSION"); err != nil {
		return err
	}
	if q.vnet {
		if err := s.setInt(unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1, "PACKET_VNET_HDR"); err != nil {
			return err
		}
	}
	if r := hdrLen + wire.VLANTagLen + headroom - gap; r > 0 {
		return s.setInt(unix.SOL_PACKET, unix.PACKET_RESERVE, r, "PACKET_RESERVE")
	}
	return nil
}

// unmap releases the ring memory; the owner must be done with it.
func (q *Queue) unmap() error {
	if q.ring == nil {
		return nil
	}
	err := unix.Munmap(q.ring)
	q.ring = nil
	return err
}

// Ready reports whether Recv would return without waiting: a ring block is
// ready, or the queue is closed (pktio.Waitable).
func (q *Queue) Ready() bool { return q.closed.Load() || q.blockReady() }

// PollFd is the queue's socket fd, readable when the kernel hands over
// frames (pktio.Waitable).
func (q *Queue) PollFd() int {
	fd := -1
	q.sock.control(func(f int) error { fd = f; return nil })
	return fd
}

var (
	_ pktio.Receiver = (*Queue)(nil)
	_ pktio.Waitable = (*Queue)(nil)
	_ pktio.Sender   = (*Tx)(nil)
)
