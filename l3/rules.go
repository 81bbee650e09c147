package l3

// Policy routing on the datapath: with custom `ip rule`s a route decision
// needs the packet's flow (fib.Flow: addresses, input interface, TOS,
// protocol, ports), not its destination alone. The Worker checks once per
// batch whether the FIB has custom rules (routePending): without them the
// batch keeps its one merged lookup per packet and pays nothing here; with
// them each pending packet gets its flow and the FIB's rule walk
// (fib.FIB.LookupFlow). The router's own packets are output lookups (iif
// lo) with the packet's source (localOutput).
//
// The flow is the kernel's flowi4 as ip_route_input_slow fills it, with
// fib4_rules_early_flow_dissect's ports:
//   - IIF: the ingress interface's index. Iface.Index comes from
//     Router.IfIndex, the function the FIB compiles rules' iif names with
//     (fib.Options.DevIndex), so the two agree; the router never hands out
//     1, which fib.FIB.DevIndex keeps for lo.
//   - TOS: the header's byte (rules compare its IPTOS_RT_MASK bits).
//   - Proto: the header's protocol, always (the kernel sets it only when a
//     rule needs it, which answers the same).
//   - SPort/DPort: the flow dissector's ports (proto_ports_offset): TCP, UDP,
//     UDP-Lite, DCCP, SCTP, and the SPI halves of ESP and AH as the kernel
//     reads them; 0 for other protocols (ICMP), for any fragment (the
//     dissector runs without FLOW_DISSECTOR_F_PARSE_1ST_FRAG, so a first
//     fragment has no ports either, unlike the multipath hash key of
//     flow.go) and for a header too short to hold them.
//   - Mark, OIF: 0 (no fwmark; forwarding asks for no output interface).
//   - L3mdev: the VRF's table when the ingress interface belongs to one, and
//     then IIF is the VRF device's index (Linux's l3mdev receive path:
//     skb->dev becomes the VRF device before the route lookup). See
//     Iface.VRFTable.
//
// Locking: none (the Worker's goroutine; the FIB is read lock-free).

import (
	"encoding/binary"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/nexthop"
	"github.com/netfwd/netfwd/wire"
)

// IP protocols whose ports the kernel's flow dissector reads.
const (
	protoDCCP    = 33
	protoESP     = 50
	protoAH      = 51
	protoSCTP    = 132
	protoUDPLite = 136
)

// loIndex is lo's interface index: the input interface of output lookups.
const loIndex = 1

// lookupFlows is routePending's lookup with custom rules: each pending
// packet's flow through the rule walk, out[i] for pending[i]. Each lookup
// loads the published state: a commit during the batch may split it
// between two rule lists, each packet seeing one whole list.
func (w *Worker) lookupFlows(t *ifaceTable, out []*nexthop.Nexthop) {
	if cap(w.slots) < len(w.pending) {
		w.slots = make([]uint8, len(w.pending), 2*len(w.pending))
	}
	slots := w.slots[:len(w.pending)]
	var k fib.Flow
	for i := range w.pending {
		p := &w.pending[i]
		f, _ := w.frame(p.ref)
		h := wire.IPv4(f[p.l3 : int(p.l3)+int(p.n)])
		k = fib.Flow{}
		packetFlow(&k, h)
		k.IIF, k.L3mdev = p.ifIndex, 0
		slots[i] = 0
		if in := t.get(p.ifIndex); in != nil {
			k.IIF, k.L3mdev = in.ruleInput()
			slots[i] = in.vrfSlot // vrfstats.go
		}
		out[i] = w.e.lookupFlow(&k)
	}
	w.slots = slots
}

// outputFlow fills k for a packet the router originates in answer to one
// received on in (nil: none): an output lookup (iif lo, as
// ip_route_output_key_hash sets flowi4_iif), with the source the packet
// carries. When in belongs to a VRF the output interface is the VRF
// device and the lookup is in its table, as icmp_reply and icmp_send ask
// (flowi4_oif = l3mdev_master_ifindex of the input device).
func outputFlow(k *fib.Flow, h wire.IPv4, in *Iface) {
	*k = fib.Flow{}
	packetFlow(k, h)
	k.IIF = loIndex
	if in != nil && in.VRFTable != 0 {
		k.OIF, k.L3mdev = in.VRFIndex, in.VRFTable
	}
}

// packetFlow fills the fields of k that come from the IPv4 header h and
// its transport header.
func packetFlow(k *fib.Flow, h wire.IPv4) {
	k.Dst, k.Src = h.Dst(), h.Src()
	k.TOS, k.Proto = h.TOS(), h.Protocol()
	k.SPort, k.DPort = rulePorts(h)
}

// RouteQuery is the route question the forwarding path asks for an IPv4
// packet (the header first) received on interface in: the selectors its
// rule walk sees, for fib.FIB.LookupRouteFlow (`ctl trace`, tests). ok is
// false for a packet that is not a valid IPv4 header.
func RouteQuery(pkt []byte, in string) (q fib.FlowQuery, ok bool) {
	h, err := wire.ParseIPv4(pkt)
	if err != 0 {
		return q, false
	}
	var k fib.Flow
	packetFlow(&k, h)
	return fib.FlowQuery{Dst: k.Dst.Netip(), Src: k.Src.Netip(), IIF: in, TOS: k.TOS, Proto: k.Proto, SPort: k.SPort, DPort: k.DPort}, true
}

// rulePorts returns the ports a rule's sport and dport compare, as the
// kernel's flow dissector finds them for fib rules (0, 0: none).
func rulePorts(h wire.IPv4) (sport, dport uint16) {
	if h.IsFragment() {
		return 0, 0
	}
	off := 0
	switch h.Protocol() {
	case wire.ProtoTCP, wire.ProtoUDP, protoUDPLite, protoDCCP, protoSCTP, protoESP:
	case protoAH:
		off = 4 // the SPI
	default:
		return 0, 0
	}
	p := h[h.IHL():]
	if len(p) < off+4 {
		return 0, 0
	}
	return binary.BigEndian.Uint16(p[off:]), binary.BigEndian.Uint16(p[off+2:])
}

// ruleInput returns the input interface index and the l3mdev table a
// packet received on i carries into the rule walk: i's own index, or the
// VRF device's index and the VRF's table when i belongs to a VRF.
func (i *Iface) ruleInput() (iif, l3mdev uint32) {
	if i.VRFTable != 0 {
		return i.VRFIndex, i.VRFTable
	}
	return i.Index, 0
}
