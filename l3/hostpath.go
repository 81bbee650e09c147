package l3

// The host path: what the router hands to the box's own stack (its routing
// daemons, SSH, BFD), through a Linux twin of each interface, and what that
// stack sends back out. The router keeps answering what it answers itself
// (ARP, echo requests, ICMP errors about transit traffic) and hands the
// kernel, through the worker's Punter:
//   - IPv4 to one of its addresses that it does not terminate: TCP, UDP,
//     other protocols, ICMP other than echo requests (echo replies and
//     errors answering the box's own traffic), fragments (the kernel
//     reassembles); with PuntEcho, echo requests too (then only the kernel
//     answers them);
//   - link-local multicast (224.0.0.0/24: OSPF, VRRP, RIP), IGMP, the
//     limited broadcast and a connected subnet's broadcast;
//   - copies of ARP requests for its addresses and of ARP replies and
//     announcements, so the kernel's neighbour table learns its peers
//     (netfwd's own reply goes out as before; the host path drops the
//     kernel's duplicate);
//   - IPv6 addressed to the interface (netfwd does not route it; the twin
//     is an IPv6 host).
// Without a Punter (or for an interface without a twin: the Punter says
// no), everything behaves as before: resets, port and protocol unreachable.
//
// Punted frames count as Local (ARP copies stay ARPIn) and as Punted. The
// decision is netfwd's, so AF_PACKET and AF_XDP ports behave alike.
//
// Locking: a worker's Punter is called on its goroutine and must neither
// block nor allocate. Inject runs on the caller's worker.

import "github.com/netfwd/netfwd/wire"

// Punter hands a frame that arrived on interface ifc to the box's own
// stack: f is the frame as received (it may carry a VLAN tag), its network
// header at f[l3:]; origin is the index of the input frame in its
// ReceiveGSO batch (-1 if none), for the driver's offload state. It
// returns false when ifc has no host path: the router then handles the
// packet as without one. The frame is valid during the call only.
type Punter func(ifc *Iface, f []byte, l3 int, origin int32) bool

// SetPunter sets the worker's host path (nil: none). With echo set, echo
// requests to the router are punted instead of answered.
func (w *Worker) SetPunter(p Punter, echo bool) {
	w.punter, w.puntEcho = p, echo
}

// punt hands a frame to the host path; false without one.
func (w *Worker) punt(ifc *Iface, f []byte, l3 int, origin int32) bool {
	if w.punter == nil || !w.punter(ifc, f, l3, origin) {
		return false
	}
	w.c.punted++
	return true
}

// puntLocal punts a packet for the router: delivered (Local) when taken.
func (w *Worker) puntLocal(ifc *Iface, f []byte, l3 int, origin int32) bool {
	if !w.punt(ifc, f, l3, origin) {
		return false
	}
	w.c.local++
	return true
}

// puntMulticast reports whether a packet to a multicast or broadcast
// destination goes to the box's stack: link-local multicast (routing
// protocols), IGMP and the limited broadcast. Other multicast is for a
// multicast router netfwd is not.
func puntMulticast(dst wire.Addr4, proto uint8) bool {
	return dst.IsLimitedBroadcast() || dst.IsLinkLocalMulticast() || proto == wire.ProtoIGMP
}

// Inject sends a frame the box's own stack wrote on the twin of ifc out of
// ifc: as it is out of a routed port, through the bridge (FDB lookup in
// the interface's VLAN, tagging per member, flooding when unknown) for a
// VLAN interface. Flush the worker afterwards; the frame must stay valid
// until then.
func (w *Worker) Inject(ifc *Iface, frame []byte) {
	if len(frame) < wire.EthernetHeaderLen {
		return
	}
	w.send(ifc, frame, -1)
}
