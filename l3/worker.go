package l3

// The datapath: one Worker per goroutine turns frames received on a port
// into frames queued for ports, through the bridge and the router.
//
// Flow of one frame:
//   bridge member port -> Bridge.ReceiveBatch -> (host frames) -> hostFrames
//   routed port        -> routedFrames
//   -> ifaceInput: interface up, frame addressed to it
//   -> ARP: arpInput | IPv4: ipInput: validate, martians; the batch's
//      packets wait in the pending vector -> routePending: one FIB lookup
//      for the whole vector (one pointer per packet) -> route:
//        local: localInput (echo reply, port/protocol unreachable, TCP reset)
//        blackhole / unreachable / prohibit / no route: drop (+ ICMP)
//        unicast: forward (forward.go): TTL, egress, MTU, then xmit:
//        neighbour header, out of a routed port or through the bridge of a
//        VLAN interface (the same FwdDst egress as bridged traffic)
// Forwarded packets are rewritten in place: the frame is the router's own
// (a unicast frame to the router's MAC is delivered to nobody else), and the
// new Ethernet header fits where the old one was.
//
// What a step needs to know of the frame it works on travels as arguments:
// the frameRef (where the frame is in the batch) and the origin (the index
// its outputs carry at FlushOrigins; -1 for the router's own packets).
//
// Locking: none on the datapath. The worker owns its Tx and counters; the
// FIB, interface table and neighbour entries are read lock-free.

import (
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/neigh"
	"github.com/netfwd/netfwd/nexthop"
	"github.com/netfwd/netfwd/wire"
)

// Worker runs the datapath on one goroutine.
type Worker struct {
	e   *Engine
	r   *Router
	tx  *l2.Tx
	c   counters
	pub *publishedCounters

	// The batch being received (ReceiveGSO): the frames of a routed port
	// (the bridge's host frames are in tx.Host) and their GSO segment sizes
	// (nil: no GSO frames).
	batch    [][]byte
	gsoSizes []uint16

	// The batch's validated IPv4 packets and their destinations, looked up
	// together (routePending).
	pending []pendingIP
	dsts    []wire.Addr4
	nhs     []*nexthop.Nexthop
	idx     []uint32

	// Per-VRF counting (vrfstats.go): vrf is the slot of the packet being
	// routed (0: none), slots the batch's slots (lookupFlows), vc the
	// counters, vrfDirty the slots touched since the last publish.
	vrf      uint8
	slots    []uint8
	vc       [maxVRFSlots]vrfCounters
	vrfDirty []uint8

	nw *neigh.Worker
	// acts collects what neighbour calls ask for; handleActs works on
	// acting, so the packets it sends may ask for more meanwhile.
	acts, acting neigh.Actions
	handling     bool
	arpBuf       [128]byte

	// The host path (hostpath.go): nil without one.
	punter   Punter
	puntEcho bool
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
	w.gsoSizes = nil
	w.batch = nil
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
	if len(w.vrfDirty) > 0 {
		w.publishVRF()
	}
	w.nw.Publish()
}

func (w *Worker) drop(r DropReason) {
	w.c.drops[r]++
	if w.vrf != 0 {
		w.vrfDrop(r)
	}
}

// frameRef names an input frame of the batch being received: entry i of
// the ReceiveGSO batch (batchFrame), or of tx.Host (hostFrame: the frames
// the bridge delivered to the router). One int32: it rides along in a
// register.
type frameRef int32

func batchFrame(i int) frameRef { return frameRef(i) }
func hostFrame(i int) frameRef  { return frameRef(^i) }

// frame returns the frame ref names and the origin of its outputs.
func (w *Worker) frame(ref frameRef) (f []byte, origin int32) {
	if ref < 0 {
		h := &w.tx.Host[^ref]
		return h.Frame, int32(h.Index)
	}
	return w.batch[ref], int32(ref)
}

// routedFrames is the input of a routed port: each frame needs an Ethernet
// header, then goes to the port's interface.
func (w *Worker) routedFrames(t *ifaceTable, in *l2.Port, frames [][]byte) {
	ifc := t.routedPort(in.ID)
	bytes := 0
	for i, f := range frames {
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
			accepted = w.ifaceInput(t, ifc, f, wire.EthernetHeaderLen, wire.Ethernet(f).Type(), batchFrame(i))
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
	for i := start; i < len(w.tx.Host); i++ {
		h := &w.tx.Host[i]
		w.c.in++
		w.ifaceInput(t, t.hostIface(h.Bridge, h.VID, h.Untagged), h.Frame, h.L3, h.EtherType, hostFrame(i))
	}
}

// ifaceInput takes frame ref, which arrived on interface ifc (nil: none),
// with its network header at f[l3:]: it must be up and the frame addressed
// to its MAC (or multicast); then IPv4 or ARP. It returns false when the
// interface refused the frame (missing or down), which routed ports count as
// receive drops; frames refused for their contents are counted by reason
// only.
func (w *Worker) ifaceInput(t *ifaceTable, ifc *Iface, f []byte, l3 int, etherType uint16, ref frameRef) bool {
	switch {
	case ifc == nil:
		w.drop(DropNoIface)
		return false
	case !ifc.Up():
		w.drop(DropIfaceDown)
		return false
	}
	eth := wire.Ethernet(f)
	l2mc := eth.DstIsMulticast()
	if !l2mc && eth.Dst() != ifc.MAC {
		w.drop(DropNotForUs)
		return true
	}
	switch etherType {
	case wire.EtherTypeIPv4:
		w.ipInput(ifc, f, l3, l2mc, ref)
	case wire.EtherTypeARP:
		w.arpInput(ifc, f, l3, ref)
	case wire.EtherTypeIPv6:
		if _, origin := w.frame(ref); !w.puntLocal(ifc, f, l3, origin) {
			w.drop(DropEtherType) // netfwd does not route IPv6; its twin is an IPv6 host
		}
	default:
		w.drop(DropEtherType)
	}
	return true
}

// pendingIP is a validated IPv4 packet waiting for the batch's FIB lookup:
// the frame ref, the (trimmed) packet at l3..l3+n, received on interface
// ifIndex. 16 bytes and no pointers: written and read once per packet, with
// no write barriers.
type pendingIP struct {
	ref     frameRef
	ifIndex uint32
	l3      uint16
	n       uint16
	l2mc    bool
}

// ipInput is ip_rcv for the packet at f[l3:]: validation and the checks
// that need no route. A packet that passes waits in the batch's pending
// vector; routePending looks the whole vector up at once.
func (w *Worker) ipInput(in *Iface, f []byte, l3 int, l2mc bool, ref frameRef) {
	h, e := wire.ParseIPv4(f[l3:])
	if e != wire.IPv4OK {
		w.drop(ipv4Drops[e])
		return
	}
	src, dst := h.Src(), h.Dst()
	// Martian sources: never valid on a wire, or one of the router's own
	// (its addresses, its subnets' broadcasts).
	if src.IsMartianSource() || w.r.fib.IsLocalOrBroadcast(src) {
		w.drop(DropMartianSource)
		return
	}
	if dst.IsLimitedBroadcast() || dst.IsMulticast() {
		// No multicast routing, no broadcast services: routing protocols'
		// link-local multicast and broadcasts go to the host path only.
		if puntMulticast(dst, h.Protocol()) {
			if _, origin := w.frame(ref); w.puntLocal(in, f, l3, origin) {
				return
			}
		}
		w.drop(DropBroadcast)
		return
	}
	if dst.IsZeroNet() || dst.IsLoopback() { // never forwarded
		w.drop(DropMartianDest)
		return
	}
	w.pending = append(w.pending, pendingIP{ref: ref, ifIndex: in.Index, l3: uint16(l3), n: uint16(len(h)), l2mc: l2mc})
	w.dsts = append(w.dsts, dst)
}

// routePending looks up every pending packet of the batch in one vector
// (one FIB snapshot, lookups overlapped) and routes each (ip_route_input).
// With custom rules each packet's flow walks the rules instead (rules.go).
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
	if w.e.customRules() {
		w.lookupFlows(t, nhs) // rules.go; fills w.slots
		w.c.fibLookups += uint64(n)
		for i := range w.pending {
			p := &w.pending[i]
			f, origin := w.frame(p.ref)
			w.vrf = w.slots[i]
			w.route(t, p, f, nhs[i], origin)
		}
		w.vrf = 0
		w.pending = w.pending[:0]
		w.dsts = w.dsts[:0]
		return
	}
	w.e.lookupBatch(w.dsts, nhs, w.idx[:n])
	w.c.fibLookups += uint64(n)
	for i := range w.pending {
		p := &w.pending[i]
		f, origin := w.frame(p.ref)
		w.route(t, p, f, nhs[i], origin)
	}
	w.pending = w.pending[:0]
	w.dsts = w.dsts[:0]
}

// route acts on a packet's FIB result. A rule's action comes back as one
// too, with the answers of Linux's ip_error: blackhole as a Blackhole
// nexthop (silent), prohibit as a Prohibit one (administratively
// prohibited), unreachable as nil (network unreachable, as no route).
func (w *Worker) route(t *ifaceTable, p *pendingIP, f []byte, nh *nexthop.Nexthop, origin int32) {
	if nh != nil && nh.Kind == nexthop.Unicast && !p.l2mc {
		w.forward(t, p, f, nh, origin)
		return
	}
	in, h := t.get(p.ifIndex), wire.IPv4(f[p.l3:int(p.l3)+int(p.n)])
	if nh == nil {
		w.icmpError(in, h, wire.ICMPDestUnreach, wire.ICMPCodeNetUnreach, 0, p.l2mc, icmpNetUnreachIdx)
		w.drop(DropNoRoute)
		return
	}
	switch nh.Kind {
	case nexthop.Unicast: // in a link-layer broadcast or multicast
		w.drop(DropL2Broadcast) // Linux forwards only PACKET_HOST frames
	case nexthop.Local:
		w.localInput(in, f, int(p.l3), h, p.l2mc, origin)
	case nexthop.Broadcast:
		// A connected subnet's broadcast: the box's stack may serve it
		// (host path); echo to broadcast is ignored, as Linux does by default.
		if !w.puntLocal(in, f, int(p.l3), origin) {
			w.drop(DropBroadcast)
		}
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

// gsoSize returns the segment size of input frame origin (0: not a GSO
// frame).
func (w *Worker) gsoSize(origin int32) int {
	if origin >= 0 && int(origin) < len(w.gsoSizes) {
		return int(w.gsoSizes[origin])
	}
	return 0
}

// gsoSegmentLen is the length of one segment of a GSO frame: headers plus
// the segment payload.
func gsoSegmentLen(h wire.IPv4, gso int) int {
	hl := h.IHL()
	p := h[hl:]
	switch h.Protocol() {
	case wire.ProtoTCP:
		if len(p) > 12 { // the data offset
			return hl + wire.TCP(p).DataOffset() + gso
		}
	case wire.ProtoUDP:
		return hl + wire.UDPHeaderLen + gso
	}
	return len(h)
}
