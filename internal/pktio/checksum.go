package pktio

// checksum: finishing the partial L4 checksums that checksum offload leaves
// in frames (CHECKSUM_PARTIAL: the field holds only the pseudo-header sum,
// the device was to add the payload), and locating L3 behind VLAN tags.
//
// Locking: none; pure functions over byte slices.

import (
	"encoding/binary"

	"github.com/netfwd/netfwd/wire"
)

const (
	etherTypeIPv4  = 0x0800
	etherTypeIPv6  = 0x86dd
	etherTypeVLAN  = 0x8100
	etherTypeQinQ  = 0x88a8
	ethHdrLen      = 14
	vlanTagLen     = 4
	maxVLANTags    = 4
	ipProtoTCP     = 6
	ipProtoUDP     = 17
	tcpCsumOffset  = 16
	udpCsumOffset  = 6
	ipv4MinHdrLen  = 20
	ipv4FlagMF     = 0x2000
	ipv4FragOffset = 0x1fff
)

// l3Offset returns the offset of the L3 header behind the Ethernet header
// and up to maxVLANTags 802.1Q/802.1ad tags, and the L3 ethertype.
func l3Offset(frame []byte) (int, bool) {
	off, _, ok := l3OffsetType(frame)
	return off, ok
}

func l3OffsetType(frame []byte) (off int, etherType uint16, ok bool) {
	off = 12
	for range maxVLANTags + 1 {
		if off+2 > len(frame) {
			return 0, 0, false
		}
		etherType = binary.BigEndian.Uint16(frame[off:])
		if etherType != etherTypeVLAN && etherType != etherTypeQinQ {
			return off + 2, etherType, true
		}
		off += vlanTagLen
	}
	return 0, 0, false
}

// completePartial finishes a CHECKSUM_PARTIAL checksum the way the kernel's
// skb_checksum_help does: the field at start+offset already holds the folded
// pseudo-header sum, so the checksum is the complement of the sum of
// everything from start on. A result of 0 is sent as 0xffff (equal in ones'
// complement; 0 means "no checksum" in UDP). It returns false when the
// offsets do not fit the frame.
func completePartial(frame []byte, start, offset int) bool {
	if start < ethHdrLen || offset < 0 || start+offset+2 > len(frame) {
		return false
	}
	c := ^wire.Fold(wire.Sum(0, frame[start:]))
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(frame[start+offset:], c)
	return true
}

// completeIPv4L4 computes the TCP or UDP checksum of an IPv4 frame from
// scratch (pseudo-header plus segment, ignoring what the field holds). It is
// the fallback for CSUMNOTREADY frames without a virtio-net header, which
// say nothing about where the checksum is. It returns false for frames it
// cannot handle (not IPv4 TCP/UDP, fragments, lengths that do not fit).
func completeIPv4L4(frame []byte) bool {
	l3, et, ok := l3OffsetType(frame)
	if !ok || et != etherTypeIPv4 || l3+ipv4MinHdrLen > len(frame) {
		return false
	}
	ip := frame[l3:]
	ihl := int(ip[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(ip[2:]))
	if ip[0]>>4 != 4 || ihl < ipv4MinHdrLen || total < ihl || total > len(ip) {
		return false
	}
	if binary.BigEndian.Uint16(ip[6:])&(ipv4FlagMF|ipv4FragOffset) != 0 {
		return false
	}
	var csumOff int
	switch ip[9] {
	case ipProtoTCP:
		csumOff = tcpCsumOffset
	case ipProtoUDP:
		csumOff = udpCsumOffset
	default:
		return false
	}
	l4 := ip[ihl:total]
	if len(l4) < csumOff+2 {
		return false
	}
	l4[csumOff], l4[csumOff+1] = 0, 0
	sum := wire.Sum(0, ip[12:20]) // source and destination address
	sum += uint64(ip[9]) + uint64(len(l4))
	sum = wire.Sum(sum, l4)
	c := ^wire.Fold(sum)
	if c == 0 && ip[9] == ipProtoUDP {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(l4[csumOff:], c)
	return true
}
