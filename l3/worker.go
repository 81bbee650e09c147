package l3

// The datapath: one Worker per goroutine turns frames received on a port
// into frames queued for ports, through the bridge and the router.
//
// Flow of one frame:
//   bridge member port -> Bridge.ReceiveBatch -> (host frames) -> hostFrames
//   routed port        -> routedFrames
//   -> ifaceInput: interface up, frame addressed to it
//   -> ARP: arpInput | IPv4: ipInput: validate, FIB lookup (one pointer) ->
//        local: localInput (echo reply, port/protocol unreachable, TCP reset)
//        blackhole / unreachable / prohibit / no route: drop (+ ICMP)
//        unicast: forward: TTL, group member by flow hash, MTU (fragment or
//        ICMP), then xmit: neighbour header, out of a routed port or through
//        the bridge of a VLAN interface (the same FwdDst egress as bridged
//        traffic)
// Forwarded packets are rewritten in place: the frame is the router's own
// (a unicast frame to the router's MAC is delivered to nobody else), and the
// new Ethernet header fits where the old one was.
//
// Locking: none on the datapath. The worker owns its Tx and counters; the
// FIB, interface table and neighbour entries are read lock-free.

import (
	"encoding/binary"

	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/neigh"
	"github.com/netfwd/netfwd/nexthop"
	"github.com/netfwd/netfwd/wire"
)

const (
	etherHeaderLen = 14
	etherTypeARP   = 0x0806
	etherTypeIPv4  = 0x0800
)

// Worker runs the datapath on one goroutine.
type Worker struct {
	e   *Engine
	r   *Router
	tx  *l2.Tx
	c   counters
	pub *publishedCounters

	gsoSizes []uint16 // of the batch being received (nil: no GSO frames)

	// The batch's validated IPv4 packets and their destinations, looked up
	// together (routePending).
	pending []pendingIP
	batch   [][]byte // the frames of the ReceiveGSO batch being processed
	curSrc  int32    // index of the frame being processed (batch or tx.Host)
	curHost bool     // the frame being processed is in tx.Host
	dsts    []wire.Addr4
	nhs     []*nexthop.Nexthop
	idx     []uint32

	nw     *neigh.Worker
	acts   neigh.Actions
	arpBuf [128]byte

	// fragOut is the interface and next hop of the fragments being emitted
	// (Fragment calls back into the worker as a FragSink).
	fragOut  *Iface
	fragNext wire.Addr4
	fragBuf  []byte
}

// Tx returns the worker's transmit batch (the caller flushes it).
func (w *Worker) Tx() *l2.Tx { return w.tx }

// Receive processes frames received on port in. Outputs are queued on the
// worker's Tx until Flush; the frames must stay valid until then.
func (w *Worker) Receive(in *l2.Port, frames [][]byte) { w.ReceiveGSO(in, frames, nil) }

// ReceiveGSO is Receive for a driver that takes segmentation offload
// super-frames: gso[i] > 0 says frame i is a GSO frame of segments with gso[i]
// payload bytes each (it may be longer than the MTU; MTU decisions use the
// segment size). Frames made of input frame i carry origin i at
// FlushOrigins, so the driver can pass its offload state on with them.
func (w *Worker) ReceiveGSO(in *l2.Port, frames [][]byte, gso []uint16) {
	t := w.r.ifaces.Load()
	w.gsoSizes = gso
	if b := in.Bridge(); b != nil {
		start := len(w.tx.Host)
		b.ReceiveBatch(w.tx, in, frames)
		w.hostFrames(t, start)
	} else {
		w.batch = frames
		w.routedFrames(t, in, frames)
	}
	w.routePending(t)
	w.tx.SetOrigin(-1)
	w.gsoSizes = nil
	w.batch = nil
}

// gsoSize returns the segment size of the frame being processed (0: not a
// GSO frame).
func (w *Worker) gsoSize() int {
	if i := w.tx.Origin(); i >= 0 && i < len(w.gsoSizes) {
		return int(w.gsoSizes[i])
	}
	return 0
}

// Flush publishes the worker's counters and hands every queued frame to
// send, per port (see l2.Tx.Flush for buffer ownership).
func (w *Worker) Flush(send func(p *l2.Port, frames [][]byte)) {
	w.publish()
	w.tx.Flush(send)
}

// FlushOrigins is Flush with each frame's origin: the index of the input
// frame (in its ReceiveGSO batch) it was made of, or -1 for frames the
// router generated (ARP, ICMP, released after ARP resolution).
func (w *Worker) FlushOrigins(send func(p *l2.Port, frames [][]byte, origins []int32)) {
	w.publish()
	w.tx.FlushOrigins(send)
}

func (w *Worker) publish() {
	w.pub.add(&w.c)
	w.nw.Publish()
}

// generating marks frames queued from now on as the router's own; the
// returned func restores the origin.
func (w *Worker) generating() (restore func(int), saved int) {
	saved = w.tx.Origin()
	w.tx.SetOrigin(-1)
	return w.tx.SetOrigin, saved
}

func (w *Worker) drop(r DropReason) { w.c.drops[r]++ }

// routedFrames is the input of a routed port: each frame needs an Ethernet
// header, then goes to the port's interface.
func (w *Worker) routedFrames(t *ifaceTable, in *l2.Port, frames [][]byte) {
	ifc := t.routedPort(in.ID)
	bytes := 0
	for i, f := range frames {
		w.tx.SetOrigin(i)
		w.curSrc = int32(i)
		bytes += len(f)
		w.c.in++
		accepted := false
		switch {
		case ifc == nil:
			w.drop(DropNoIface)
		case len(f) < wire.EthernetHeaderLen:
			w.drop(DropL2Short)
		default:
			// A VLAN tag is an unknown EtherType here: routed ports have no
			// VLAN interfaces.
			accepted = w.ifaceInput(t, ifc, f, wire.EthernetHeaderLen, binary.BigEndian.Uint16(f[12:]))
		}
		if !accepted {
			w.tx.CountRxDrop(in)
		}
	}
	w.tx.CountRxBatch(in, len(frames), bytes)
}

// hostFrames is the input of the frames the bridge handed to the host
// (tx.Host from index start on): each goes to the interface of its VLAN.
func (w *Worker) hostFrames(t *ifaceTable, start int) {
	w.curHost = true
	for i := start; i < len(w.tx.Host); i++ {
		h := &w.tx.Host[i]
		w.tx.SetOrigin(h.Index)
		w.curSrc = int32(i)
		w.c.in++
		w.ifaceInput(t, t.hostIface(h.Bridge, h.VID, h.Untagged), h.Frame, h.L3, h.EtherType)
	}
	w.curHost = false
}

// ifaceInput takes a frame that arrived on interface ifc (nil: none), with
// its network header at f[l3:]: it must be up and the frame addressed to its
// MAC (or multicast); then IPv4 or ARP. It returns false when the interface
// refused the frame (missing or down), which routed ports count as receive
// drops; frames refused for their contents are counted by reason only.
func (w *Worker) ifaceInput(t *ifaceTable, ifc *Iface, f []byte, l3 int, etherType uint16) bool {
	switch {
	case ifc == nil:
		w.drop(DropNoIface)
		return false
	case !ifc.Up():
		w.drop(DropIfaceDown)
		return false
	}
	l2mc := f[0]&1 != 0
	if !l2mc && wire.MAC(f[0:6]) != ifc.MAC {
		w.drop(DropNotForUs)
		return true
	}
	switch etherType {
	case wire.EtherTypeIPv4:
		w.ipInput(t, ifc, f, l3, l2mc)
	case wire.EtherTypeARP:
		w.arpInput(t, ifc, f, l3)
	default:
		w.drop(DropEtherType)
	}
	return true
}

// pendingIP is a validated IPv4 packet waiting for the batch's FIB lookup:
// the frame is entry src of the batch (or of tx.Host when host is set), the
// (trimmed) packet at l3..l3+n, received on interface ifIndex. 16 bytes and
// no pointers: written and read once per packet, with no write barriers.
type pendingIP struct {
	src     int32
	ifIndex uint32
	l3      uint16
	n       uint16
	host    bool
	l2mc    bool
}

// ipInput is ip_rcv for one packet at f[l3:]: validation and the checks
// that need no route. A packet that passes waits in the batch's pending
// vector; routePending looks the whole vector up at once.
func (w *Worker) ipInput(t *ifaceTable, in *Iface, f []byte, l3 int, l2mc bool) {
	h, e := wire.ParseIPv4(f[l3:])
	if e != wire.IPv4OK {
		w.drop(ipv4Drops[e])
		return
	}
	src, dst := h.Src(), h.Dst()
	if src.IsMartianSource() {
		w.drop(DropMartianSource)
		return
	}
	if dst.IsLimitedBroadcast() || dst.IsMulticast() {
		w.drop(DropBroadcast) // no multicast routing, no broadcast services
		return
	}
	if dst.IsZeroNet() || dst.IsLoopback() { // never forwarded
		w.drop(DropMartianDest)
		return
	}
	w.pending = append(w.pending, pendingIP{src: w.curSrc, ifIndex: in.Index, l3: uint16(l3), n: uint16(len(h)), host: w.curHost, l2mc: l2mc})
	w.dsts = append(w.dsts, dst)
}

// routePending looks up every pending packet of the batch in one vector
// (one FIB snapshot, lookups overlapped) and routes each (ip_route_input).
// The vectors keep their last batch's references until overwritten: the
// frames are the caller's long-lived buffers, and clearing costs per packet.
func (w *Worker) routePending(t *ifaceTable) {
	n := len(w.pending)
	if n == 0 {
		return
	}
	if cap(w.nhs) < n {
		w.nhs = make([]*nexthop.Nexthop, n, 2*n)
		w.idx = make([]uint32, n, 2*n)
	}
	nhs := w.nhs[:n]
	w.e.lookupBatch(w.dsts, nhs, w.idx[:n])
	w.c.fibLookups += uint64(n)
	for i := range w.pending {
		p := &w.pending[i]
		var f []byte
		if p.host {
			hf := &w.tx.Host[p.src]
			f = hf.Frame
			w.tx.SetOrigin(hf.Index)
		} else {
			f = w.batch[p.src]
			w.tx.SetOrigin(int(p.src))
		}
		w.route(t, p, f, nhs[i])
	}
	w.pending = w.pending[:0]
	w.dsts = w.dsts[:0]
}

func (w *Worker) route(t *ifaceTable, p *pendingIP, f []byte, nh *nexthop.Nexthop) {
	in, h := t.get(p.ifIndex), wire.IPv4(f[p.l3:int(p.l3)+int(p.n)])
	if nh == nil {
		w.icmpError(in, h, wire.ICMPDestUnreach, wire.ICMPCodeNetUnreach, 0, p.l2mc, icmpNetUnreachIdx)
		w.drop(DropNoRoute)
		return
	}
	switch nh.Kind {
	case nexthop.Unicast:
		if p.l2mc {
			w.drop(DropL2Broadcast) // Linux forwards only PACKET_HOST frames
			return
		}
		w.forward(t, in, h, f, int(p.l3), nh)
	case nexthop.Local:
		w.localInput(in, h, p.l2mc)
	case nexthop.Broadcast:
		w.drop(DropBroadcast) // echo to broadcast is ignored, as Linux does by default
	case nexthop.Blackhole:
		w.drop(DropBlackhole)
	case nexthop.Unreachable:
		w.icmpError(in, h, wire.ICMPDestUnreach, wire.ICMPCodeHostUnreach, 0, p.l2mc, icmpHostUnreachIdx)
		w.drop(DropUnreachable)
	case nexthop.Prohibit:
		w.icmpError(in, h, wire.ICMPDestUnreach, wire.ICMPCodePktFiltered, 0, p.l2mc, icmpProhibitIdx)
		w.drop(DropProhibit)
	}
}

// forward sends a transit packet on towards its nexthop.
func (w *Worker) forward(t *ifaceTable, in *Iface, h wire.IPv4, f []byte, l3 int, nh *nexthop.Nexthop) {
	if h.TTL() <= 1 {
		w.icmpError(in, h, wire.ICMPTimeExceeded, wire.ICMPCodeTTLExceeded, 0, false, icmpTTLIdx)
		w.drop(DropTTLExpired)
		return
	}
	if nh.Group != nil {
		if nh = nh.Group.Select(nexthop.FlowHash(flowKey(h))); nh == nil {
			w.drop(DropNoRoute) // every member died under us
			return
		}
	}
	out := t.get(nh.DevIndex)
	if out == nil {
		w.drop(DropNoEgress)
		return
	}
	if !out.Up() {
		w.drop(DropEgressDown)
		return
	}
	next := h.Dst()
	if nh.Next4 != 0 {
		next = nh.Next4
	}
	size := len(h)
	if g := w.gsoSize(); g > 0 {
		size = gsoSegmentLen(h, g)
	}
	if size > out.MTU {
		if h.DF() || size != len(h) {
			w.icmpError(in, h, wire.ICMPDestUnreach, wire.ICMPCodeFragNeeded, uint32(out.MTU), false, icmpFragNeededIdx)
			w.drop(DropFragNeeded)
			return
		}
		h.DecTTL()
		if w.fragment(out, next, h) {
			w.c.forwarded++
		}
		return
	}
	h.DecTTL()
	switch w.xmit(out, next, f[l3-wire.EthernetHeaderLen:l3+len(h)]) {
	case xmitSent:
		w.c.forwarded++
	case xmitQueued:
		w.c.queued++
	}
}

// fragment emits h in fragments that fit out's MTU.
func (w *Worker) fragment(out *Iface, next wire.Addr4, h wire.IPv4) bool {
	w.fragOut, w.fragNext = out, next
	if Fragment(h, out.MTU, w) == 0 {
		w.drop(DropFragNeeded)
		return false
	}
	w.c.fragmented++
	return true
}

// Alloc and Emit make the worker a FragSink: each fragment gets room for
// its Ethernet header in front.
func (w *Worker) Alloc(n int) []byte {
	w.fragBuf = w.tx.Alloc(wire.EthernetHeaderLen + n)
	return w.fragBuf[wire.EthernetHeaderLen:]
}

func (w *Worker) Emit(frag []byte) {
	w.xmit(w.fragOut, w.fragNext, w.fragBuf[:wire.EthernetHeaderLen+len(frag)])
}

// gsoSegmentLen is the length of one segment of a GSO frame: headers plus
// the segment payload.
func gsoSegmentLen(h wire.IPv4, gso int) int {
	hl := h.IHL()
	p := h[hl:]
	switch h.Protocol() {
	case wire.ProtoTCP:
		if len(p) >= 13 {
			return hl + int(p[12]>>4)*4 + gso
		}
	case wire.ProtoUDP:
		return hl + 8 + gso
	}
	return len(h)
}

// localOutput routes a packet the router originates (ICMP): frame[14:] is
// the IPv4 packet, frame[:14] room for the Ethernet header.
func (w *Worker) localOutput(frame []byte) {
	restore, saved := w.generating()
	defer restore(saved)
	h := wire.IPv4(frame[wire.EthernetHeaderLen:])
	nh := w.e.lookup(h.Dst())
	w.c.fibLookups++
	if nh == nil || nh.Kind != nexthop.Unicast {
		w.c.outputErrors++
		return
	}
	if nh.Group != nil {
		if nh = nh.Group.Select(nexthop.FlowHash(flowKey(h))); nh == nil {
			w.c.outputErrors++
			return
		}
	}
	t := w.r.ifaces.Load()
	out := t.get(nh.DevIndex)
	if out == nil || !out.Up() {
		w.c.outputErrors++
		return
	}
	next := h.Dst()
	if nh.Next4 != 0 {
		next = nh.Next4
	}
	if len(h) > out.MTU {
		w.fragment(out, next, h)
		return
	}
	w.xmit(out, next, frame)
}

// send queues a complete Ethernet frame out of an interface: straight to a
// routed port, or through the bridge of a VLAN interface.
func (w *Worker) send(out *Iface, frame []byte) {
	switch out.Kind {
	case IfacePort:
		w.tx.Send(out.Port.Routed(), frame)
	default:
		out.Bridge.Output(w.tx, out.VID, frame)
	}
}
