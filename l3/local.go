package l3

// Packets for the router itself, and the ICMP errors it sends, as a Linux
// host would: echo requests are answered; with a host path (hostpath.go)
// everything else goes to the box's own stack; without one UDP to the
// router gets port unreachable (no sockets listen), TCP gets a reset, other
// protocols get protocol unreachable, fragments are dropped (no
// reassembly).
//
// Locking: none (worker-local).

import (
	"encoding/binary"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/wire"
)

func (w *Worker) localInput(in *Iface, f []byte, l3 int, h wire.IPv4, l2mc bool, origin int32) {
	p := h[h.IHL():]
	echo := !h.IsFragment() && h.Protocol() == wire.ProtoICMP && len(p) >= wire.ICMPHeaderLen && p[0] == wire.ICMPEcho
	// The host path takes what the router does not terminate itself
	// (hostpath.go): everything but echo requests, unless asked for those.
	if (!echo || w.puntEcho) && w.puntLocal(in, f, l3, origin) {
		return
	}
	if h.IsFragment() {
		w.drop(DropFragment)
		return
	}
	switch h.Protocol() {
	case wire.ProtoICMP:
		if !echo || wire.Checksum(p) != 0 {
			w.drop(DropLocalICMP)
			return
		}
		if l2mc {
			w.drop(DropBroadcast) // icmp_echo_ignore_broadcasts
			return
		}
		buf := w.tx.Alloc(wire.EthernetHeaderLen + wire.IPv4MinHeaderLen + len(p))
		n := buildEchoReply(buf[wire.EthernetHeaderLen:], h)
		w.c.icmpSent[icmpEchoReplyIdx]++
		w.c.local++
		w.localOutput(buf[:wire.EthernetHeaderLen+n], in)
	case wire.ProtoUDP:
		w.icmpError(in, h, wire.ICMPDestUnreach, wire.ICMPCodePortUnreach, 0, l2mc, icmpPortUnreachIdx)
		w.drop(DropLocalProto)
	case wire.ProtoTCP:
		if !l2mc {
			w.tcpReset(in, h)
		}
		w.drop(DropLocalProto)
	default:
		w.icmpError(in, h, wire.ICMPDestUnreach, wire.ICMPCodeProtUnreach, 0, l2mc, icmpProtUnreachIdx)
		w.drop(DropLocalProto)
	}
}

// icmpError sends an ICMP error about orig back to its sender, if the
// never-reply rules and the rate limits allow. The source address is the one
// the router uses towards the sender (Linux with icmp_errors_use_inbound_ifaddr
// off); kind indexes the counters.
func (w *Worker) icmpError(in *Iface, orig wire.IPv4, typ, code uint8, info uint32, l2mc bool, kind int) {
	if !icmpErrorAllowed(orig, l2mc, false) {
		return
	}
	if !w.r.limiter.allow(typ, code, orig.Src(), w.tx.Now()) {
		w.c.icmpLimited++
		return
	}
	src := w.r.sourceFor(in, orig.Src())
	if src == 0 {
		return
	}
	buf := w.tx.Alloc(wire.EthernetHeaderLen + wire.ICMPErrorMaxSize)
	n := buildICMPError(buf[wire.EthernetHeaderLen:], orig, typ, code, info, src)
	w.c.icmpSent[kind]++
	w.localOutput(buf[:wire.EthernetHeaderLen+n], in)
}

// sourceFor picks the source address for a packet the router sends to dst:
// the preferred source of the route towards dst (in the VRF of the
// interface the trigger came in on), else an address of that interface.
func (r *Router) sourceFor(in *Iface, dst wire.Addr4) wire.Addr4 {
	a := dst.Netip()
	if res, ok := r.fib.LookupRouteFlow(fib.FlowQuery{Dst: a, VRF: in.VRF}); ok && res.Prefsrc.IsValid() {
		return wire.Addr4From(res.Prefsrc)
	}
	if s := r.fib.SelectSource(in.Name, a); s.IsValid() {
		return wire.Addr4From(s)
	}
	return 0
}

// tcpReset answers a TCP segment to the router with a reset, as Linux's
// tcp_v4_send_reset does for a closed port (never in reply to a reset).
func (w *Worker) tcpReset(in *Iface, h wire.IPv4) {
	seg := h[h.IHL():]
	if len(seg) < 20 {
		return
	}
	flags := seg[13]
	const fin, syn, rst, ack = 0x01, 0x02, 0x04, 0x10
	if flags&rst != 0 {
		return
	}
	doff := int(seg[12]>>4) * 4
	if doff < 20 || doff > len(seg) {
		return
	}
	buf := w.tx.Alloc(wire.EthernetHeaderLen + 40)
	ip := wire.IPv4(buf[wire.EthernetHeaderLen:])
	writeIPv4Header(ip, 40, h.TOS(), wire.ProtoTCP, h.Dst(), h.Src()) // Linux reflects the TOS
	ip[6] = 0x40                                                      // DF, as Linux's reset
	ip.SetChecksum(0)
	ip.SetChecksum(wire.Checksum(ip[:wire.IPv4MinHeaderLen]))
	tcp := ip[wire.IPv4MinHeaderLen:]
	copy(tcp[0:2], seg[2:4]) // ports swapped
	copy(tcp[2:4], seg[0:2])
	if flags&ack != 0 {
		copy(tcp[4:8], seg[8:12]) // seq = their ack
		binary.BigEndian.PutUint32(tcp[8:], 0)
		tcp[13] = rst
	} else {
		binary.BigEndian.PutUint32(tcp[4:], 0)
		seqLen := uint32(len(seg) - doff)
		if flags&syn != 0 {
			seqLen++
		}
		if flags&fin != 0 {
			seqLen++
		}
		binary.BigEndian.PutUint32(tcp[8:], binary.BigEndian.Uint32(seg[4:])+seqLen)
		tcp[13] = rst | ack
	}
	tcp[12] = 5 << 4
	binary.BigEndian.PutUint16(tcp[14:], 0) // window
	binary.BigEndian.PutUint32(tcp[16:], 0) // checksum, urgent
	pseudo := wire.PseudoHeaderSum(ip.Src(), ip.Dst(), wire.ProtoTCP, wire.TCPMinHeaderLen)
	wire.TCP(tcp).SetChecksum(^wire.Fold(wire.Sum(pseudo, tcp[:wire.TCPMinHeaderLen])))
	w.localOutput(buf, in)
}
