package l3

// Out of the router: transit packets (forward) and the router's own
// (localOutput) take the same steps after their FIB lookup: egress (group
// member, interface, next hop), then xmit (the neighbour's adjacency written
// in front, or the packet parked until ARP resolves), fragmented on the way
// out when it exceeds the interface's MTU.
//
// Counting: a transit packet that reached the router (Stats.In) ends here as
// Forwarded, Queued (then Released and Forwarded, or Expired and a drop,
// once its resolution ends, see neighbours.go) or a drop under one reason. The router's own packets never
// count as input: their failures are OutputErrors.
//
// Locking: none (worker-local).

import (
	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/neigh"
	"github.com/netfwd/netfwd/nexthop"
	"github.com/netfwd/netfwd/wire"
)

// xmitMark is what the router hands the neighbour table with a packet it
// parks (neigh.Resolve's mark), to know the packet again when it comes back.
type xmitMark uint8

const (
	// generated: the router's own packet (ICMP, echo reply, TCP reset).
	generated xmitMark = 1 << iota
	// fragment: larger than the egress MTU, sent in fragments.
	fragment
)

// xmitResult is what became of a packet handed to xmit.
type xmitResult uint8

const (
	xmitSent    xmitResult = iota // queued on the Tx (whole or in fragments)
	xmitQueued                    // parked until ARP resolves; it comes back in neigh.Actions
	xmitNoNeigh                   // the neighbour table refused it (full, or not resolvable)
	xmitTooBig                    // the MTU cannot carry a fragment
)

// forward sends transit packet p (in frame f) on towards its nexthop.
func (w *Worker) forward(t *ifaceTable, p *pendingIP, f []byte, nh *nexthop.Nexthop, origin int32) {
	l3 := int(p.l3)
	h := wire.IPv4(f[l3 : l3+int(p.n)])
	if h.TTL() <= 1 {
		w.icmpError(t.get(p.ifIndex), h, wire.ICMPTimeExceeded, wire.ICMPCodeTTLExceeded, 0, false, icmpTTLIdx)
		w.drop(DropTTLExpired)
		return
	}
	if nh.Group != nil {
		nh = member(h, nh.Group)
	}
	out, next, r := egress(t, h, nh)
	if r != DropNone {
		w.drop(r)
		return
	}
	size := len(h)
	if g := w.gsoSize(origin); g > 0 {
		size = gsoSegmentLen(h, g)
	}
	var mark xmitMark
	if size > out.MTU {
		if h.DF() || size != len(h) {
			w.icmpError(t.get(p.ifIndex), h, wire.ICMPDestUnreach, wire.ICMPCodeFragNeeded, uint32(out.MTU), false, icmpFragNeededIdx)
			w.drop(DropFragNeeded)
			return
		}
		mark = fragment
	}
	h.DecTTL()
	switch w.xmit(out, next, f[l3-wire.EthernetHeaderLen:l3+len(h)], origin, mark) {
	case xmitSent:
		w.c.forwarded++
		if w.vrf != 0 {
			w.vrfForwarded()
		}
	case xmitQueued:
		w.c.queued++
		if w.vrf != 0 {
			w.vrfForwarded()
		}
	case xmitNoNeigh:
		w.drop(DropNeighQueue)
	case xmitTooBig:
		w.drop(DropFragNeeded)
	}
}

// egress resolves the nexthop a packet takes to the interface and the next
// hop it leaves by: the interface (known and up), the gateway or else the
// destination itself. A group's member is picked first (member): a call in
// here would keep egress from inlining into the per-packet path.
func egress(t *ifaceTable, h wire.IPv4, nh *nexthop.Nexthop) (out *Iface, next wire.Addr4, r DropReason) {
	if nh == nil {
		return nil, 0, DropNoRoute // a group whose members all died under us
	}
	if out = t.get(nh.DevIndex); out == nil {
		return nil, 0, DropNoEgress
	}
	if !out.Up() {
		return nil, 0, DropEgressDown
	}
	if next = nh.Next4; next == 0 {
		next = h.Dst()
	}
	return out, next, DropNone
}

// member picks a group's member by the packet's flow hash (nil: none alive).
func member(h wire.IPv4, g *nexthop.Group) *nexthop.Nexthop {
	return g.Select(nexthop.FlowHash(flowKey(h)))
}

// localOutput routes a packet the router originates (ICMP) in answer to a
// packet received on in (nil: none; its VRF, if any, is the lookup's):
// frame[14:] is
// the IPv4 packet, frame[:14] room for the Ethernet header. Its outputs carry
// origin -1. Its lookup is an output one (iif lo) with the source the
// packet carries; a rule's blackhole, prohibit or unreachable is an output
// error (no ICMP about the router's own packet). A deliberate difference:
// Linux routes an error about a transit packet before it has a source
// (icmp_send: saddr 0, then the route's prefsrc); here the source is chosen
// first (sourceFor) and the packet is routed with it, so a `from` rule
// covering the router's address steers the error as it does the router's
// other packets from that address.
func (w *Worker) localOutput(frame []byte, in *Iface) {
	h := wire.IPv4(frame[wire.EthernetHeaderLen:])
	var k fib.Flow
	outputFlow(&k, h, in) // rules.go: iif lo, the packet's source, the VRF of in
	nh := w.e.lookupFlow(&k)
	w.c.fibLookups++
	if nh == nil || nh.Kind != nexthop.Unicast {
		w.c.outputErrors++
		return
	}
	if nh.Group != nil {
		nh = member(h, nh.Group)
	}
	out, next, r := egress(w.r.ifaces.Load(), h, nh)
	if r != DropNone {
		w.c.outputErrors++
		return
	}
	mark := generated
	if len(h) > out.MTU {
		mark |= fragment
	}
	if res := w.xmit(out, next, frame, -1, mark); res == xmitNoNeigh || res == xmitTooBig {
		w.c.outputErrors++
	}
}

// xmit sends frame (frame[14:] is the IPv4 packet; the Ethernet header is
// written into frame[:14]) to next on out, or parks it in the neighbour
// table until ARP resolves. Packets marked fragment leave in fragments.
func (w *Worker) xmit(out *Iface, next wire.Addr4, frame []byte, origin int32, mark xmitMark) xmitResult {
	if !w.nw.Output(out.Index, next, frame[:wire.EthernetHeaderLen]) {
		res := w.nw.Resolve(out.Index, next, out.MAC, frame[wire.EthernetHeaderLen:], uint8(mark), w.tx.Now(), &w.acts)
		w.handleActs()
		switch res.Verdict {
		case neigh.Queued:
			return xmitQueued
		case neigh.Send:
			copy(frame[:wire.EthernetHeaderLen], res.Header[:])
		default:
			return xmitNoNeigh
		}
	}
	if mark&fragment != 0 {
		return w.sendFragments(out, frame, origin)
	}
	w.send(out, frame, origin)
	return xmitSent
}

// sendFragments sends frame (Ethernet header written) in fragments that fit
// out's MTU, each behind a copy of the header.
func (w *Worker) sendFragments(out *Iface, frame []byte, origin int32) xmitResult {
	fr, ok := newFragmenter(wire.IPv4(frame[wire.EthernetHeaderLen:]), out.MTU)
	if !ok {
		return xmitTooBig
	}
	for fr.more() {
		buf := w.tx.Alloc(wire.EthernetHeaderLen + fr.size())
		copy(buf, frame[:wire.EthernetHeaderLen])
		fr.next(buf[wire.EthernetHeaderLen:])
		w.send(out, buf, origin)
	}
	w.c.fragmented++
	return xmitSent
}

// send queues a complete Ethernet frame out of an interface, straight to a
// routed port or through the bridge of a VLAN interface, made of input frame
// origin (-1: the router's own).
func (w *Worker) send(out *Iface, frame []byte, origin int32) {
	if out.Kind == IfacePort {
		w.tx.Send(out.Port.Routed(), frame, origin)
		return
	}
	out.Bridge.Output(w.tx, out.VID, frame, origin)
}
