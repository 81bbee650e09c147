// Package l3 is netfwd's IPv4 router: interfaces (routed ports and VLAN
// interfaces of the bridge), the forwarding path, ICMP, and the engine that
// composes bridge and router over batches of frames. Next hops are resolved
// by package neigh. It does no I/O.
package l3

// IPv4 header view and validation. The forwarding path validates a header
// once at ingress and then reads fields in place (gVisor's header.IPv4
// style); nothing is copied or allocated.
//
// Locking: none (pure functions over the caller's bytes).

import (
	"encoding/binary"
	"math/bits"
)

// IPv4 is a view of an IPv4 header (and what follows) in a packet buffer.
type IPv4 []byte

const (
	ipv4MinHeader = 20
	ipFlagDF      = 0x4000
	ipFlagMF      = 0x2000
	ipOffsetMask  = 0x1fff
)

func (h IPv4) IHL() int             { return int(h[0]&0x0f) * 4 }
func (h IPv4) TOS() uint8           { return h[1] }
func (h IPv4) TotalLen() int        { return int(binary.BigEndian.Uint16(h[2:])) }
func (h IPv4) ID() uint16           { return binary.BigEndian.Uint16(h[4:]) }
func (h IPv4) FlagsFrag() uint16    { return binary.BigEndian.Uint16(h[6:]) }
func (h IPv4) DF() bool             { return h.FlagsFrag()&ipFlagDF != 0 }
func (h IPv4) MF() bool             { return h.FlagsFrag()&ipFlagMF != 0 }
func (h IPv4) FragOffset() int      { return int(h.FlagsFrag()&ipOffsetMask) * 8 }
func (h IPv4) IsFragment() bool     { return h.FlagsFrag()&(ipFlagMF|ipOffsetMask) != 0 }
func (h IPv4) TTL() uint8           { return h[8] }
func (h IPv4) Protocol() uint8      { return h[9] }
func (h IPv4) Checksum() uint16     { return binary.BigEndian.Uint16(h[10:]) }
func (h IPv4) Src() uint32          { return binary.BigEndian.Uint32(h[12:]) }
func (h IPv4) Dst() uint32          { return binary.BigEndian.Uint32(h[16:]) }
func (h IPv4) Payload() []byte      { return h[h.IHL():h.TotalLen()] }
func (h IPv4) SetChecksum(c uint16) { binary.BigEndian.PutUint16(h[10:], c) }

// Protocol numbers the router looks at.
const (
	ProtoICMP = 1
	ProtoTCP  = 6
	ProtoUDP  = 17
)

// CheckIPv4 validates the header at the start of b (the frame after the
// link-layer header, possibly padded) as Linux's ip_rcv_core does and returns
// the packet trimmed to its total length.
func CheckIPv4(b []byte) (IPv4, DropReason) {
	// The common header, version 4 without options, passes the version and
	// header length checks in one compare.
	if len(b) >= ipv4MinHeader && b[0] == 0x45 {
		total := int(binary.BigEndian.Uint16(b[2:4]))
		if total < ipv4MinHeader || total > len(b) {
			return nil, DropIPTotalLen
		}
		if !checksumValid20(b[:ipv4MinHeader]) {
			return nil, DropIPChecksum
		}
		return IPv4(b[:total]), DropNone
	}
	if len(b) < ipv4MinHeader {
		return nil, DropIPTooShort
	}
	if b[0]>>4 != 4 {
		return nil, DropIPVersion
	}
	ihl := int(b[0]&0x0f) * 4
	if ihl < ipv4MinHeader || ihl > len(b) {
		return nil, DropIPHeaderLen
	}
	total := int(binary.BigEndian.Uint16(b[2:]))
	if total < ihl || total > len(b) {
		return nil, DropIPTotalLen
	}
	if headerChecksum(b[:ihl]) != 0 {
		return nil, DropIPChecksum
	}
	return IPv4(b[:total]), DropNone
}

// headerChecksum is Checksum for an IPv4 header. The common 20-byte header
// is summed in the CPU's byte order, as three loads and no loop: the one's
// complement sum is the same in either order up to a final byte swap
// (RFC 1071, "byte order independence").
func headerChecksum(h []byte) uint16 {
	if len(h) != ipv4MinHeader {
		return Checksum(h, 0)
	}
	s := sum20(h)
	s = (s >> 32) + (s & 0xffffffff) // <= 2^32 + 4
	s = (s >> 16) + (s & 0xffff)
	s = (s >> 16) + (s & 0xffff)
	s = (s >> 16) + (s & 0xffff)
	return ^bits.ReverseBytes16(uint16(s))
}

// checksumValid20 reports whether a 20-byte header carries a valid
// checksum, without folding: the one's complement sum of its 16-bit words is
// 0xffff exactly when their plain sum is a non-zero multiple of 0xffff (the
// end-around carry is reduction modulo 0xffff, and 2^16 is 1 modulo 0xffff,
// so wider words and either byte order give the same answer). An all-zero
// header sums to 0: its one's complement sum is 0, not 0xffff, so invalid.
func checksumValid20(h []byte) bool {
	s := sum20(h)
	return s%0xffff == 0 && s != 0
}

// sum20 adds a 20-byte header as 32-bit words in the CPU's byte order,
// unfolded (five words fit in 64 bits with room to spare).
func sum20(h []byte) uint64 {
	a, b := binary.LittleEndian.Uint64(h[0:8]), binary.LittleEndian.Uint64(h[8:16])
	return a&0xffffffff + a>>32 + b&0xffffffff + b>>32 + uint64(binary.LittleEndian.Uint32(h[16:20]))
}

// Checksum is the Internet checksum (RFC 1071) of b added to initial, folded
// and complemented. Over a header with its checksum field filled it is 0.
func Checksum(b []byte, initial uint32) uint16 {
	return ^fold(sum(b, initial))
}

func sum(b []byte, acc uint32) uint32 {
	s := uint64(acc)
	for len(b) >= 8 {
		s += uint64(binary.BigEndian.Uint32(b)) + uint64(binary.BigEndian.Uint32(b[4:]))
		b = b[8:]
	}
	for len(b) >= 2 {
		s += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	s = (s >> 32) + (s & 0xffffffff)
	s = (s >> 32) + (s & 0xffffffff)
	return uint32(s>>16) + uint32(s&0xffff)
}

func fold(s uint32) uint16 {
	for s > 0xffff {
		s = (s >> 16) + (s & 0xffff)
	}
	return uint16(s)
}

// DecTTL decrements the TTL and patches the checksum incrementally, as the
// kernel's ip_decrease_ttl does (RFC 1141/1624): the TTL is the high byte of
// its 16-bit word, so the word drops by 0x0100 and the one's complement sum
// rises by as much, with an end-around carry.
func (h IPv4) DecTTL() {
	c := uint32(h[10])<<8 | uint32(h[11])
	c += 0x0100
	if c >= 0xffff {
		c++
	}
	h[10], h[11] = byte(c>>8), byte(c)
	h[8]--
}

// putAddr writes an IPv4 address in network order.
func putAddr(b []byte, a uint32) { binary.BigEndian.PutUint32(b, a) }

// isMartianSource reports source addresses a router must never accept
// (Linux ip_route_input_slow: multicast, limited broadcast, zero network,
// loopback).
func isMartianSource(a uint32) bool {
	return a>>28 == 0xe || a == 0xffffffff || a>>24 == 0 || a>>24 == 127
}

// isMartianDest reports destinations that are never forwarded (zero network,
// loopback) — multicast and limited broadcast are handled separately.
func isMartianDest(a uint32) bool {
	return a>>24 == 0 || a>>24 == 127
}

func isMulticast(a uint32) bool { return a>>28 == 0xe }
