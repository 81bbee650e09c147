package l2

// Ethernet and 802.1Q header views over []byte, validated once at ingress.
//
// Layout: dst(6) src(6) [TPID 0x8100 (2) TCI (2)] ethertype(2) payload.
// Only TPID 0x8100 is a VLAN tag for this bridge (vlan_protocol 802.1Q, the
// kernel's default); an 802.1ad S-tag (0x88a8) is payload. A tag with VID 0
// is a priority tag: the frame belongs to the port's pvid and keeps its PCP.

import (
	"encoding/binary"

	"github.com/netfwd/netfwd/wire"
)

// parsedFrame is the result of ingress parsing: where the tag and the L3
// header are, and the tag's TCI.
type parsedFrame struct {
	tagged bool   // an 802.1Q tag is present at offset 12
	tci    uint16 // the tag's TCI (PCP, DEI, VID); 0 when untagged
	l3     int    // offset of the ethertype's payload
	etype  uint16 // the ethertype after the tag (if any)
}

// parseFrame validates the Ethernet and 802.1Q headers. ok is false for
// frames too short to carry them (runts, truncated tags).
func parseFrame(b []byte) (p parsedFrame, ok bool) {
	if len(b) < wire.EthernetHeaderLen {
		return p, false
	}
	et := binary.BigEndian.Uint16(b[12:14])
	if et != wire.EtherTypeVLAN {
		p.etype = et
		p.l3 = wire.EthernetHeaderLen
		return p, true
	}
	if len(b) < wire.EthernetHeaderLen+wire.VLANTagLen {
		return p, false
	}
	p.tagged = true
	p.tci = binary.BigEndian.Uint16(b[14:16])
	p.etype = binary.BigEndian.Uint16(b[16:18])
	p.l3 = wire.EthernetHeaderLen + wire.VLANTagLen
	return p, true
}

// untagInto writes the frame without its tag into dst (len(src)-4 bytes).
func untagInto(dst, src []byte) {
	copy(dst[0:12], src[0:12])
	copy(dst[12:], src[16:])
}

// tagInto writes an untagged frame src with a tag carrying tci into dst
// (len(src)+4 bytes).
func tagInto(dst, src []byte, tci uint16) {
	copy(dst[0:12], src[0:12])
	binary.BigEndian.PutUint16(dst[12:14], wire.EtherTypeVLAN)
	binary.BigEndian.PutUint16(dst[14:16], tci)
	copy(dst[16:], src[12:])
}

// retagInto copies a tagged frame src into dst with the TCI replaced.
func retagInto(dst, src []byte, tci uint16) {
	copy(dst, src)
	binary.BigEndian.PutUint16(dst[14:16], tci)
}
