package wire

// Ethernet II headers and 802.1Q/802.1ad tags.
//
// Layout: dst(6) src(6) [TPID(2) TCI(2)]... EtherType(2) payload. A tag's
// TCI holds PCP (3 bits), DEI (1) and VID (12); VID 0 is a priority tag.

import "encoding/binary"

// Header sizes and EtherTypes.
const (
	EthernetHeaderLen = 14
	VLANTagLen        = 4

	EtherTypeIPv4 = 0x0800
	EtherTypeARP  = 0x0806
	EtherTypeIPv6 = 0x86dd
	EtherTypeVLAN = 0x8100 // 802.1Q tag (C-tag) TPID
	EtherTypeQinQ = 0x88a8 // 802.1ad tag (S-tag) TPID
)

// VLAN IDs in a TCI.
const (
	VIDMask = 0x0fff
	MaxVID  = 4094 // 4095 is reserved
)

// Ethernet is a view of a frame from its Ethernet header on.
type Ethernet []byte

// Dst is the destination address.
func (e Ethernet) Dst() MAC { return MAC(e[0:6]) }

// Src is the source address.
func (e Ethernet) Src() MAC { return MAC(e[6:12]) }

// Type is the EtherType field after the addresses: a TPID when the frame
// carries a tag.
func (e Ethernet) Type() uint16 { return binary.BigEndian.Uint16(e[12:14]) }

// DstIsMulticast reports the group bit of the destination (broadcast
// included).
func (e Ethernet) DstIsMulticast() bool { return e[0]&1 != 0 }

// DstIsBroadcast reports ff:ff:ff:ff:ff:ff, without building a MAC.
func (e Ethernet) DstIsBroadcast() bool {
	_ = e[5] // one bounds check
	return e[0]&e[1]&e[2]&e[3]&e[4]&e[5] == 0xff
}

// DstIsLinkLocalControl reports 01:80:c2:00:00:01 to 01:80:c2:00:00:0f, the
// IEEE 802.1D reserved group addresses that bridges never forward (pause,
// LACP, 802.1X, LLDP, ...); 01:80:c2:00:00:00 (STP) is not among them.
func (e Ethernet) DstIsLinkLocalControl() bool {
	_ = e[5] // one bounds check
	return e[0] == 0x01 && e[1] == 0x80 && e[2] == 0xc2 && e[3] == 0 && e[4] == 0 && e[5]&0xf0 == 0 && e[5] != 0
}

// SrcIsValid reports a source that may appear on a wire: not multicast, not
// zero (the kernel's is_valid_ether_addr).
func (e Ethernet) SrcIsValid() bool {
	_ = e[11] // one bounds check
	return e[6]&1 == 0 && e[6]|e[7]|e[8]|e[9]|e[10]|e[11] != 0
}

// PutHeader writes an untagged header into b[0:14].
func PutHeader(b []byte, dst, src MAC, etherType uint16) {
	copy(b[0:6], dst[:])
	copy(b[6:12], src[:])
	binary.BigEndian.PutUint16(b[12:14], etherType)
}
