package l3

// The router's side of the neighbour table (package neigh): ARP input, the
// housekeeping tick, and acting on what the table asks for: ARP requests to
// send (with the sender address Linux's arp_solicit would pick), packets
// released by a resolution, ICMP host unreachable for packets whose
// resolution failed, and neighbour changes mirrored into the bridge's
// suppression table. The forwarding path's neighbour step is xmit
// (forward.go).
//
// Locking: the datapath part is the neigh.Worker's (lock-free); actions are
// handled by the worker that got them.

import (
	"net/netip"

	"github.com/netfwd/netfwd/neigh"
	"github.com/netfwd/netfwd/wire"
)

// routerAddrs answers ARP's "is this one of my addresses" (arp_ignore 0:
// any address of the router, whatever the interface).
type routerAddrs struct{ r *Router }

func (a routerAddrs) IsLocalAddr(_ uint32, ip wire.Addr4) bool {
	return a.r.fib.IsLocalAddress(ip.Netip())
}

// arpInput hands an ARP frame to the table and sends the reply it builds;
// with a host path, a copy of requests for the router's addresses and of
// replies and announcements goes to the box's stack too (hostpath.go).
func (w *Worker) arpInput(in *Iface, f []byte, l3 int, ref frameRef) {
	frame := f
	if l3 != wire.EthernetHeaderLen { // strip a VLAN tag: the table reads untagged frames
		if len(f) < l3 {
			w.drop(DropARP)
			return
		}
		frame = w.arpBuf[:0]
		frame = append(frame, f[:12]...)
		frame = append(frame, f[l3-2:]...)
	}
	reply := w.tx.Alloc(wire.ARPFrameLen)
	n, drop := w.nw.InputARP(&neigh.ARPInput{IfIndex: in.Index, IfMAC: in.MAC, Addrs: routerAddrs{w.r}}, frame, w.tx.Now(), reply, &w.acts)
	if drop != neigh.ARPOK {
		w.drop(DropARP)
	} else {
		w.c.arpIn++
		if w.punter != nil && w.arpForHost(f[l3:]) {
			_, origin := w.frame(ref)
			w.punt(in, f, l3, origin)
		}
	}
	if n > 0 {
		w.send(in, reply[:n], -1)
	}
	w.handleActs()
}

// arpForHost reports whether the box's stack should see an ARP packet (it
// passed the table's checks): a request for one of the router's addresses
// (the kernel learns the requester), a reply, or an announcement (sender =
// target).
func (w *Worker) arpForHost(p []byte) bool {
	a := wire.ARP(p)
	if len(p) < wire.ARPLen {
		return false
	}
	return a.Op() != wire.ARPRequest || a.SenderIP() == a.TargetIP() || w.r.fib.IsLocalAddress(a.TargetIP().Netip())
}

// Tick runs the neighbour timers (call it every 10-100 ms from one worker,
// typically a housekeeping one) and ages the bridges' FDBs. Outputs are
// queued on the worker's Tx.
func (w *Worker) Tick() {
	now := w.e.dom.Clock().Now()
	w.r.neigh.Tick(now, &w.acts)
	w.handleActs()
	w.e.dom.Age()
}

// handleActs carries out what neighbour calls asked for. The packets it
// sends may ask for more (an ICMP error towards another unresolved
// neighbour): it takes the actions out first and loops until none are left,
// and a call from within returns at once.
func (w *Worker) handleActs() {
	if w.handling || w.acts.Empty() {
		return
	}
	w.handling = true
	for !w.acts.Empty() {
		w.acts, w.acting = w.acting, w.acts
		w.act(&w.acting)
		w.acting.Reset()
	}
	w.handling = false
}

// act carries out one set of actions. Packets that had waited for ARP end
// here: a transit packet as Released (and Forwarded) or Expired and a drop
// (the neighbour failed, the queue dropped it, its interface went down),
// the router's own as sent or an output error.
func (w *Worker) act(a *neigh.Actions) {
	t := w.r.ifaces.Load()
	for i := range a.Requests {
		req := &a.Requests[i]
		out := t.get(req.IfIndex)
		if out == nil || !out.Up() {
			continue
		}
		buf := w.tx.Alloc(wire.ARPFrameLen)
		if n := req.Build(buf, w.r.arpSender(out, req)); n > 0 {
			w.send(out, buf[:n], -1)
		}
	}
	for _, f := range a.Transmit {
		mark := xmitMark(f.Mark)
		out := t.get(f.IfIndex)
		var r DropReason
		switch {
		case out == nil || !out.Up():
			r = DropEgressDown
		case mark&fragment != 0:
			if w.sendFragments(out, f.Data, -1) == xmitTooBig {
				r = DropFragNeeded
			}
		default:
			buf := w.tx.Alloc(len(f.Data))
			copy(buf, f.Data)
			w.send(out, buf, -1)
		}
		w.settle(mark, r)
	}
	for _, f := range a.Unreachable {
		mark := xmitMark(f.Mark)
		w.settle(mark, DropNeighFailed)
		if mark&generated != 0 {
			continue // nobody to tell: the router would be reporting to itself
		}
		h, e := wire.ParseIPv4(f.Data)
		if e != wire.IPv4OK {
			continue
		}
		if in := t.get(f.IfIndex); in != nil {
			w.icmpError(in, h, wire.ICMPDestUnreach, wire.ICMPCodeHostUnreach, 0, false, icmpHostUnreachIdx)
		}
	}
	for _, f := range a.Dropped {
		w.settle(xmitMark(f.Mark), DropNeighQueue)
	}
	for _, ev := range a.Events {
		w.r.mirrorNeighbour(t, ev)
	}
}

// settle counts the end of a packet that waited for ARP: a transit packet
// is Released and, being sent now, Forwarded, or Expired and dropped for r;
// the router's own packets count only when they fail.
func (w *Worker) settle(mark xmitMark, r DropReason) {
	// A parked packet is not the one being routed: its drop is not the
	// current packet's VRF's (vrfstats.go).
	v := w.vrf
	w.vrf = 0
	w.settleCount(mark, r)
	w.vrf = v
}

func (w *Worker) settleCount(mark xmitMark, r DropReason) {
	switch {
	case mark&generated != 0:
		if r != DropNone {
			w.c.outputErrors++
		}
	case r == DropNone:
		w.c.released++
		w.c.forwarded++
	default:
		w.c.expired++
		w.drop(r)
	}
}

// arpSender picks the ARP request's sender address as Linux's arp_solicit
// does with arp_announce 0: the source of the packet that triggered it if
// that is ours, else the interface's address for the target's subnet.
func (r *Router) arpSender(out *Iface, req *neigh.ARPRequest) wire.Addr4 {
	if req.SrcHint != 0 && r.fib.IsLocalAddress(req.SrcHint.Netip()) {
		return req.SrcHint
	}
	if s := r.fib.SelectSource(out.Name, req.Target.Netip()); s.IsValid() {
		return wire.Addr4From(s)
	}
	return 0
}

// mirrorNeighbour keeps the bridge's neighbour-suppression table in step
// with the neighbours learned on its VLAN interfaces.
func (r *Router) mirrorNeighbour(t *ifaceTable, ev neigh.Event) {
	ifc := t.get(ev.IfIndex)
	if ifc == nil || ifc.Bridge == nil {
		return
	}
	ip := ev.IP.Netip()
	switch ev.Kind {
	case neigh.EventResolved, neigh.EventLLAddrChanged:
		ifc.Bridge.SetNeighbor(ifc.VID, ip, ev.LLAddr)
	default:
		ifc.Bridge.DelNeighbor(ifc.VID, ip)
	}
}

// Neighbours returns the router's neighbour table.
func (r *Router) Neighbours() *neigh.Table { return r.neigh }

// SetNeighbor installs a permanent neighbour (tests, `neigh add ... nud
// permanent`); the interface must exist.
func (r *Router) SetNeighbor(dev string, ip netip.Addr, mac wire.MAC) error {
	ifc := r.Iface(dev)
	if ifc == nil {
		return errNoIface(dev)
	}
	var acts neigh.Actions
	return r.neigh.Replace(neigh.Spec{IfIndex: ifc.Index, IP: wire.Addr4From(ip), LLAddr: mac, HasLLAddr: true,
		State: neigh.NUDPermanent, IfMAC: ifc.MAC}, r.dom.Clock().Now(), &acts)
}
