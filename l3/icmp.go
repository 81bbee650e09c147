package l3

// ICMP messages the router sends: echo replies and the errors, built the way
// Linux's icmp_send and icmp_echo build them.
//
// Flow: the forwarding path decides an error is due, asks icmpErrorAllowed
// (the never-reply rules), the rate limiter, then buildICMPError writes the
// whole IPv4+ICMP packet into a scratch buffer; the caller routes it back to
// the sender like any locally generated packet.
//
// Locking: none (pure functions over the caller's bytes).

import (
	"encoding/binary"

	"github.com/netfwd/netfwd/wire"
)

// defaultTTL is the TTL of the packets the router originates (Linux's
// ip_default_ttl).
const defaultTTL = 64

// icmpErrorAllowed applies Linux's icmp_send rules for not answering a
// packet with an error: it was a link-layer broadcast or multicast, its
// destination is multicast or broadcast, its source is not a unicast
// address, it is a non-first fragment, or it is itself an ICMP error.
func icmpErrorAllowed(orig wire.IPv4, l2Multicast, dstBroadcast bool) bool {
	if l2Multicast || dstBroadcast || orig.Dst().IsMulticast() || orig.Dst().IsLimitedBroadcast() {
		return false
	}
	src := orig.Src()
	if src == 0 || src.IsMulticast() || src.IsLimitedBroadcast() || src.IsLoopback() {
		return false
	}
	if orig.FragOffset() != 0 {
		return false
	}
	if orig.Protocol() == wire.ProtoICMP {
		p := orig[orig.IHL():]
		if len(p) < 1 || wire.ICMPIsError(p[0]) {
			return false
		}
	}
	return true
}

// buildICMPError writes into dst an IPv4 packet from src to the original
// sender carrying an ICMP error about orig, and returns its length. rest is
// the 32-bit field after the checksum (the next-hop MTU for fragmentation
// needed). As much of the original datagram is quoted as fits in 576 bytes.
// dst needs wire.ICMPErrorMaxSize bytes.
func buildICMPError(dst []byte, orig wire.IPv4, typ, code uint8, rest uint32, src wire.Addr4) int {
	quote := len(orig)
	if max := wire.ICMPErrorMaxSize - wire.IPv4MinHeaderLen - wire.ICMPHeaderLen; quote > max {
		quote = max
	}
	n := wire.IPv4MinHeaderLen + wire.ICMPHeaderLen + quote
	h := wire.IPv4(dst[:n])
	// Linux sets the precedence bits of errors to internetwork control.
	writeIPv4Header(h, n, orig.TOS()&0x1e|0xc0, wire.ProtoICMP, src, orig.Src())
	icmp := wire.ICMP(dst[wire.IPv4MinHeaderLen:n])
	icmp[0], icmp[1] = typ, code
	icmp.SetChecksum(0)
	binary.BigEndian.PutUint32(icmp[4:], rest)
	copy(icmp[wire.ICMPHeaderLen:], orig[:quote])
	icmp.SetChecksum(wire.Checksum(icmp))
	return n
}

// buildEchoReply writes the reply to an echo request addressed to the
// router into dst (len(req) bytes) and returns its length: addresses
// swapped, type 0, same identifier, sequence and data.
func buildEchoReply(dst []byte, req wire.IPv4) int {
	n := wire.IPv4MinHeaderLen + len(req) - req.IHL()
	h := wire.IPv4(dst[:n])
	writeIPv4Header(h, n, req.TOS(), wire.ProtoICMP, req.Dst(), req.Src())
	icmp := wire.ICMP(dst[wire.IPv4MinHeaderLen:n])
	copy(icmp, req[req.IHL():])
	icmp[0], icmp[1] = wire.ICMPEchoReply, 0
	icmp.SetChecksum(0)
	icmp.SetChecksum(wire.Checksum(icmp))
	return n
}

// writeIPv4Header fills a 20-byte header without options. DF stays clear
// (Linux's ICMP socket does not set it) and the ID comes from a per-process
// counter.
func writeIPv4Header(h wire.IPv4, total int, tos, proto uint8, src, dst wire.Addr4) {
	h[0] = 0x45
	h[1] = tos
	binary.BigEndian.PutUint16(h[2:], uint16(total))
	binary.BigEndian.PutUint16(h[4:], nextIPID())
	binary.BigEndian.PutUint16(h[6:], 0)
	h[8] = defaultTTL
	h[9] = proto
	binary.BigEndian.PutUint16(h[10:], 0)
	src.Put(h[12:])
	dst.Put(h[16:])
	h.SetChecksum(wire.HeaderChecksum(h[:wire.IPv4MinHeaderLen]))
}
