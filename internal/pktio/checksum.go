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

// maxVLANTags bounds the tags L3Offset walks.
const maxVLANTags = 4

// L3Offset returns the offset of the L3 header behind the Ethernet header
// and up to maxVLANTags 802.1Q/802.1ad tags, and the L3 ethertype.
func L3Offset(frame []byte) (int, bool) {
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
		if etherType != wire.EtherTypeVLAN && etherType != wire.EtherTypeQinQ {
			return off + 2, etherType, true
		}
		off += wire.VLANTagLen
	}
	return 0, 0, false
}

// CompletePartial finishes a CHECKSUM_PARTIAL checksum whose field is at
// start+offset (wire.CompletePartialChecksum), for a start past the
// Ethernet header. It returns false when the offsets do not fit the frame.
func CompletePartial(frame []byte, start, offset int) bool {
	return start >= wire.EthernetHeaderLen && wire.CompletePartialChecksum(frame, start, offset)
}

// CompleteIPv4L4 computes the TCP or UDP checksum of an IPv4 frame from
// scratch (pseudo-header plus segment, ignoring what the field holds). It is
// the fallback for CSUMNOTREADY frames without a virtio-net header, which
// say nothing about where the checksum is. It returns false for frames it
// cannot handle (not IPv4 TCP/UDP, fragments, lengths that do not fit).
func CompleteIPv4L4(frame []byte) bool {
	l3, et, ok := l3OffsetType(frame)
	if !ok || et != wire.EtherTypeIPv4 || l3+wire.IPv4MinHeaderLen > len(frame) {
		return false
	}
	ip := frame[l3:]
	ihl := int(ip[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(ip[2:]))
	if ip[0]>>4 != 4 || ihl < wire.IPv4MinHeaderLen || total < ihl || total > len(ip) {
		return false
	}
	if binary.BigEndian.Uint16(ip[6:])&(wire.IPv4FlagMF|wire.IPv4OffsetMask) != 0 {
		return false
	}
	var csumOff int
	switch ip[9] {
	case wire.ProtoTCP:
		csumOff = wire.TCPChecksumOffset
	case wire.ProtoUDP:
		csumOff = wire.UDPChecksumOffset
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
	if c == 0 && ip[9] == wire.ProtoUDP {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(l4[csumOff:], c)
	return true
}
