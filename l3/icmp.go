package l3

// ICMP messages the router sends: echo replies and the errors, built the way
// Linux's icmp_send and icmp_echo build them.
//
// Flow: the forwarding path decides an error is due, asks icmpErrorAllowed
// (the never-reply rules), the rate limiter, then BuildICMPError writes the
// whole IPv4+ICMP packet into a scratch buffer; the caller routes it back to
// the sender like any locally generated packet.
//
// Locking: none (pure functions over the caller's bytes).

import "encoding/binary"

// ICMP types and codes (RFC 792, 1812).
const (
	ICMPEchoReply      = 0
	ICMPDestUnreach    = 3
	ICMPSourceQuench   = 4
	ICMPRedirect       = 5
	ICMPEcho           = 8
	ICMPTimeExceeded   = 11
	ICMPParamProblem   = 12
	ICMPTimestamp      = 13
	ICMPTimestampReply = 14

	CodeNetUnreach   = 0
	CodeHostUnreach  = 1
	CodeProtUnreach  = 2
	CodePortUnreach  = 3
	CodeFragNeeded   = 4
	CodePktFiltered  = 13 // communication administratively prohibited
	CodeTTLExceeded  = 0
	icmpHeaderLen    = 8
	icmpErrorMaxSize = 576 // an error never exceeds the minimum MTU (RFC 1812 4.3.2.3)
	defaultTTL       = 64
)

// icmpIsError reports ICMP types that are errors: never answered with an
// error (RFC 1122 3.2.2).
func icmpIsError(typ uint8) bool {
	switch typ {
	case ICMPDestUnreach, ICMPSourceQuench, ICMPRedirect, ICMPTimeExceeded, ICMPParamProblem:
		return true
	}
	return typ > 18 // unknown types are treated as errors, as Linux does
}

// icmpErrorAllowed applies Linux's icmp_send rules for not answering a
// packet with an error: it was a link-layer broadcast or multicast, its
// destination is multicast or broadcast, its source is not a unicast
// address, it is a non-first fragment, or it is itself an ICMP error.
func icmpErrorAllowed(orig IPv4, l2Multicast, dstBroadcast bool) bool {
	if l2Multicast || dstBroadcast || isMulticast(orig.Dst()) || orig.Dst() == 0xffffffff {
		return false
	}
	src := orig.Src()
	if src == 0 || isMulticast(src) || src == 0xffffffff || src>>24 == 127 {
		return false
	}
	if orig.FragOffset() != 0 {
		return false
	}
	if orig.Protocol() == ProtoICMP {
		p := orig[orig.IHL():]
		if len(p) < 1 || icmpIsError(p[0]) {
			return false
		}
	}
	return true
}

// BuildICMPError writes into dst an IPv4 packet from src to the original
// sender carrying an ICMP error about orig, and returns its length. rest is
// the 32-bit field after the checksum (the next-hop MTU for fragmentation
// needed). As much of the original datagram is quoted as fits in 576 bytes.
// dst needs icmpErrorMaxSize bytes.
func BuildICMPError(dst []byte, orig IPv4, typ, code uint8, rest uint32, src uint32) int {
	quote := len(orig)
	if max := icmpErrorMaxSize - ipv4MinHeader - icmpHeaderLen; quote > max {
		quote = max
	}
	n := ipv4MinHeader + icmpHeaderLen + quote
	h := IPv4(dst[:n])
	// Linux sets the precedence bits of errors to internetwork control.
	writeIPv4Header(h, n, orig.TOS()&0x1e|0xc0, ProtoICMP, src, orig.Src())
	icmp := dst[ipv4MinHeader:n]
	icmp[0], icmp[1] = typ, code
	binary.BigEndian.PutUint16(icmp[2:], 0)
	binary.BigEndian.PutUint32(icmp[4:], rest)
	copy(icmp[icmpHeaderLen:], orig[:quote])
	binary.BigEndian.PutUint16(icmp[2:], Checksum(icmp, 0))
	return n
}

// BuildEchoReply writes the reply to an echo request addressed to the
// router into dst (len(req) bytes) and returns its length: addresses
// swapped, type 0, same identifier, sequence and data.
func BuildEchoReply(dst []byte, req IPv4) int {
	n := ipv4MinHeader + len(req) - req.IHL()
	h := IPv4(dst[:n])
	writeIPv4Header(h, n, req.TOS(), ProtoICMP, req.Dst(), req.Src())
	icmp := dst[ipv4MinHeader:n]
	copy(icmp, req[req.IHL():])
	icmp[0], icmp[1] = ICMPEchoReply, 0
	binary.BigEndian.PutUint16(icmp[2:], 0)
	binary.BigEndian.PutUint16(icmp[2:], Checksum(icmp, 0))
	return n
}

// writeIPv4Header fills a 20-byte header without options. DF stays clear
// (Linux's ICMP socket does not set it) and the ID comes from a per-process
// counter.
func writeIPv4Header(h IPv4, total int, tos, proto uint8, src, dst uint32) {
	h[0] = 0x45
	h[1] = tos
	binary.BigEndian.PutUint16(h[2:], uint16(total))
	binary.BigEndian.PutUint16(h[4:], nextIPID())
	binary.BigEndian.PutUint16(h[6:], 0)
	h[8] = defaultTTL
	h[9] = proto
	binary.BigEndian.PutUint16(h[10:], 0)
	putAddr(h[12:], src)
	putAddr(h[16:], dst)
	h.SetChecksum(Checksum(h[:ipv4MinHeader], 0))
}
