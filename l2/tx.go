package l2

// Egress: the forwarding destination, the per-worker transmit batch (Tx)
// with each frame's origin, emitting a frameView with a port-VLAN's
// tagging, and the scratch arena.
//
// Buffer ownership (the rule l3 and the daemon follow too):
//   - An input frame handed to Receive/ReceiveBatch stays owned by the caller
//     but must stay valid and unmodified until the Tx it was processed with
//     is flushed (Flush returns). The bridge never writes into it.
//   - Output frames queued on a Tx are either the input slice itself (when
//     its bytes are right for the port: same tagging) or slices of the Tx's
//     arena (when the tag must be added, removed or rewritten, and for
//     frames the bridge generates). One copy is made per input frame and
//     tagging variant, never per port.
//   - Queued slices are valid until Flush's callback returns; the callback
//     must copy (or finish transmitting) what it keeps. After Flush the arena
//     is reused and the input buffers may be recycled by the caller.
//   - HostFrame.Frame (frames for l3) follows the same rule: valid until
//     Flush. l3 may build output in tx.Alloc memory, valid until Flush.
//
// Concurrency: a Tx belongs to one worker goroutine; nothing in it is shared.

import "github.com/netfwd/netfwd/wire"

// FwdDst is a forwarding destination: an egress port and, for bridge
// members, the port-VLAN that decides the egress tagging. It is produced by
// FDB hits, by flood iteration and (l3) by routed egress; egress never looks
// a VLAN up. PV nil (or a port's VID-0 object) means "leave the frame as it
// is": routed ports and bridges without vlan_filtering.
type FwdDst struct {
	Port *Port
	PV   *PortVLAN
}

// Dst returns the forwarding destination {port, pv} (l3: routed egress on
// a VLAN interface after LookupFDB, or towards a known port-VLAN).
func (pv *PortVLAN) Dst() FwdDst { return FwdDst{Port: pv.port, PV: pv} }

// Valid reports whether d names a port.
func (d FwdDst) Valid() bool { return d.Port != nil }

// EgressTag reports the tag frames to d carry: tagged with vid, or untagged.
// l3 uses it to build a frame with the right header directly.
func (d FwdDst) EgressTag() (vid uint16, tagged bool) {
	if d.PV == nil {
		return 0, false
	}
	f := d.PV.flags.Load()
	if f&(pvUntagged|pvRaw) != 0 {
		return 0, false
	}
	return d.PV.VID, true
}

// HostFrame is a frame the bridge hands to the host (l3).
type HostFrame struct {
	Bridge *Bridge
	Port   *Port  // ingress bridge port
	VID    uint16 // VLAN the frame was classified into; without vlan_filtering its own tag's VID (0 if untagged)
	// Untagged: Linux would deliver it to the bridge device itself (the
	// bridge's own membership in VID is egress-untagged); otherwise to a VLAN
	// device VID on top of the bridge.
	Untagged  bool
	Frame     []byte // the frame as received (may carry a tag)
	L3        int    // offset of the L3 header in Frame
	EtherType uint16
	Index     int // position of the frame in the batch given to ReceiveBatch
}

// Options of a Tx.
type TxOptions struct {
	// QueueLen bounds the frames queued per port between flushes
	// (default 1024); excess copies are dropped and counted.
	QueueLen int
	// DeferLen bounds the large floods deferred per batch (default 256).
	DeferLen int
}

type txQueue struct {
	port    *Port
	frames  [][]byte
	origins []int32 // per frame: index of the input frame it came from, -1 if generated
	bytes   uint64  // sum of len(frames[i]); counted into tx counters at Flush
}

// Tx is one worker's transmit batch and scratch state.
type Tx struct {
	d     *Domain
	opts  TxOptions
	now   int64 // coarse time of this batch, 0 = not read yet
	q     []txQueue
	act   []PortID // ports with queued frames, in first-use order
	arena arena

	// Host receives frames for the host from ReceiveBatch; valid until Flush.
	Host []HostFrame

	deferred []deferredFlood

	delta  workerDelta
	pd     []portDelta
	dirty  []PortID
	isDirt []bool
	stats  *workerStats
}

// NewTx returns a transmit batch for one worker of d.
func (d *Domain) NewTx(opts TxOptions) *Tx {
	if opts.QueueLen <= 0 {
		opts.QueueLen = 1024
	}
	if opts.DeferLen <= 0 {
		opts.DeferLen = 256
	}
	tx := &Tx{d: d, opts: opts, stats: &workerStats{}}
	d.wmu.Lock()
	d.workers = append(d.workers, tx.stats)
	d.wmu.Unlock()
	return tx
}

// Now returns the batch's coarse time, reading the clock on first use after
// a flush. The value is rounded down to 2^20 ns (~1 ms) so FDB refreshes
// within the same millisecond store nothing.
func (tx *Tx) Now() int64 {
	if tx.now == 0 {
		tx.now = tx.d.clock.Now() &^ (1<<20 - 1)
		if tx.now == 0 {
			tx.now = 1 << 20
		}
	}
	return tx.now
}

// Alloc returns n bytes of scratch memory valid until Flush.
func (tx *Tx) Alloc(n int) []byte { return tx.arena.alloc(n) }

// Origins: every queued frame records the index (in the caller's batch) of
// the input frame it was made of, or -1 for frames the caller generates
// itself; FlushOrigins hands them back. The daemon uses them to carry
// per-frame offload state (GSO) from an input frame to its outputs. The
// origin travels as an argument (and in the ingress of a deferred flood),
// never as Tx state, so a frame cannot inherit the origin of the one before.

// Send queues frame for transmission to d, tagging it from d.PV: frame must
// be untagged; if d's port-VLAN is egress-tagged a copy with the tag (PCP 0)
// is made in the arena. This is the egress l3 uses for routed frames; origin
// is the input frame it was made of (-1: none).
func (tx *Tx) Send(d FwdDst, frame []byte, origin int32) {
	if vid, tagged := d.EgressTag(); tagged && len(frame) >= wire.EthernetHeaderLen {
		out := tx.arena.alloc(len(frame) + wire.VLANTagLen)
		tagInto(out, frame, vid)
		frame = out
	}
	tx.enqueue(d.Port, frame, origin)
}

// SendRaw queues frame on port p exactly as given (origin as in Send).
func (tx *Tx) SendRaw(p *Port, frame []byte, origin int32) { tx.enqueue(p, frame, origin) }

func (tx *Tx) growPort(id PortID) {
	n := max(int(id)+1, 2*len(tx.q), 16)
	q := make([]txQueue, n)
	copy(q, tx.q)
	tx.q = q
	pd := make([]portDelta, n)
	copy(pd, tx.pd)
	tx.pd = pd
	dd := make([]bool, n)
	copy(dd, tx.isDirt)
	tx.isDirt = dd
}

func (tx *Tx) touch(id PortID) *portDelta {
	if int(id) >= len(tx.pd) {
		tx.growPort(id)
	}
	if !tx.isDirt[id] {
		tx.isDirt[id] = true
		tx.dirty = append(tx.dirty, id)
	}
	return &tx.pd[id]
}

func (tx *Tx) enqueue(p *Port, frame []byte, origin int32) {
	id := p.ID
	if int(id) >= len(tx.q) {
		tx.growPort(id)
	}
	q := &tx.q[id]
	if len(q.frames) == 0 {
		if q.frames == nil {
			q.frames = make([][]byte, 0, 64)
		}
		q.port = p
		tx.act = append(tx.act, id)
	}
	if len(q.frames) >= tx.opts.QueueLen {
		tx.delta.drops[DropTxQueueFull]++
		tx.touch(id).txDrops++
		return
	}
	q.frames = append(q.frames, frame)
	q.origins = append(q.origins, origin)
	q.bytes += uint64(len(frame))
}

func (tx *Tx) countRx(p *Port, n int) {
	pd := tx.touch(p.ID)
	pd.rxPackets++
	pd.rxBytes += uint64(n)
}

// drop counts a dropped input frame received on p.
func (tx *Tx) drop(p *Port, r DropReason) Verdict {
	tx.delta.drops[r]++
	tx.touch(p.ID).rxDrops++
	return Verdict{Drop: r}
}

// CountTxError records n frames the caller failed to transmit on p (call
// it from the Flush callback; TxPackets counts frames handed to the caller).
func (tx *Tx) CountTxError(p *Port, n int) {
	tx.delta.drops[DropTxError] += uint64(n)
	tx.touch(p.ID).txDrops += uint64(n)
}

// Flush runs the deferred floods, hands each port's queued frames to send
// (in the order they were queued), then resets the batch: queues, arena,
// Host, coarse time. It publishes the batch's counters.
func (tx *Tx) Flush(send func(p *Port, frames [][]byte)) {
	if send == nil {
		tx.FlushOrigins(nil)
		return
	}
	tx.FlushOrigins(func(p *Port, frames [][]byte, _ []int32) { send(p, frames) })
}

// FlushOrigins is Flush with each frame's origin (see Send).
func (tx *Tx) FlushOrigins(send func(p *Port, frames [][]byte, origins []int32)) {
	tx.runDeferred()
	for _, id := range tx.act {
		q := &tx.q[id]
		pd := tx.touch(id)
		pd.txPackets += uint64(len(q.frames))
		pd.txBytes += q.bytes
		q.bytes = 0
		if len(q.frames) > 0 && send != nil {
			send(q.port, q.frames, q.origins)
		}
		clear(q.frames) // drop references to input buffers
		q.frames = q.frames[:0]
		q.origins = q.origins[:0]
	}
	tx.act = tx.act[:0]
	clear(tx.Host)
	tx.Host = tx.Host[:0]
	tx.arena.reset()
	tx.now = 0
	tx.publish()
}

func (tx *Tx) publish() {
	tx.stats.publish(&tx.delta, tx.pd, tx.dirty)
	for _, id := range tx.dirty {
		tx.isDirt[id] = false
	}
	tx.dirty = tx.dirty[:0]
}

// arena hands out scratch memory from a few large chunks, reset per batch.
// Steady state allocates nothing: chunks are kept across batches.
type arena struct {
	chunks [][]byte
	cur    int
	off    int
}

const arenaChunk = 64 << 10

func (a *arena) alloc(n int) []byte {
	for {
		if a.cur < len(a.chunks) {
			c := a.chunks[a.cur]
			if a.off+n <= len(c) {
				b := c[a.off : a.off+n : a.off+n]
				a.off += n
				return b
			}
			a.cur++
			a.off = 0
			continue
		}
		a.chunks = append(a.chunks, make([]byte, max(arenaChunk, n)))
	}
}

func (a *arena) reset() { a.cur, a.off = 0, 0 }

// emit queues the frame for pv's port with pv's tagging, made of input
// frame origin.
func (tx *Tx) emit(pv *PortVLAN, fv *frameView, origin int32) {
	var out []byte
	switch f := pv.flags.Load(); {
	case fv.raw || f&pvRaw != 0:
		out = fv.data
	case f&pvUntagged != 0:
		out = fv.untaggedBytes(tx)
	default:
		out = fv.taggedBytes(tx)
	}
	tx.enqueue(pv.port, out, origin)
}
