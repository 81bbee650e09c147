package l3

// The flow key multipath hashing uses (Linux fib_multipath_hash_policy 1,
// layer 3+4): addresses, protocol and ports of TCP and UDP first fragments;
// addresses and protocol alone for other packets and non-first fragments.
// An ICMP error is hashed on the addresses and protocol of the packet it
// quotes (Linux's ip_multipath_l3_keys inner-header rule), so all errors about
// one flow take one path.
//
// Locking: none.

import (
	"encoding/binary"

	"github.com/netfwd/netfwd/nexthop"
	"github.com/netfwd/netfwd/wire"
)

// flowKey extracts the multipath key of a validated IPv4 packet.
func flowKey(h wire.IPv4) nexthop.FlowKey {
	k := nexthop.FlowKey{Src: h.Src(), Dst: h.Dst(), Proto: h.Protocol()}
	if h.IsFragment() && h.FragOffset() != 0 {
		return k
	}
	p := h[h.IHL():]
	switch h.Protocol() {
	case wire.ProtoTCP, wire.ProtoUDP:
		if len(p) >= 4 {
			k.SrcPort = binary.BigEndian.Uint16(p)
			k.DstPort = binary.BigEndian.Uint16(p[2:])
		}
	case wire.ProtoICMP:
		if len(p) >= wire.ICMPHeaderLen+wire.IPv4MinHeaderLen && wire.ICMPIsError(p[0]) && p[0] <= wire.ICMPParamProblem {
			inner := wire.IPv4(p[wire.ICMPHeaderLen:])
			if inner[0]>>4 == 4 && inner.IHL() >= wire.IPv4MinHeaderLen && inner.IHL() <= len(inner) {
				return nexthop.FlowKey{Src: inner.Src(), Dst: inner.Dst(), Proto: inner.Protocol()}
			}
		}
	}
	return k
}
