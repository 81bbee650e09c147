package l2

// Ethernet and 802.1Q header views over []byte, validated once at ingress,
// and the tagging variants of a frame on its way out (frameView: the bytes
// as received plus the copies egress needs, made once per frame).
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

// frameView is one input frame on its way out: the bytes as received and
// lazily built copies for the other tagging, made once per frame.
type frameView struct {
	data   []byte
	raw    bool   // bridge without vlan_filtering: every copy leaves as received
	tagged bool   // data carries a tag
	tci    uint16 // TCI for tagged egress (the classified VID, the frame's PCP)
	asIsOK bool   // data's tag already carries tci

	untag, tag []byte
}

func (fv *frameView) untaggedBytes(tx *Tx) []byte {
	if !fv.tagged {
		return fv.data
	}
	if fv.untag == nil {
		fv.untag = tx.arena.alloc(len(fv.data) - wire.VLANTagLen)
		untagInto(fv.untag, fv.data)
	}
	return fv.untag
}

func (fv *frameView) taggedBytes(tx *Tx) []byte {
	if fv.asIsOK {
		return fv.data
	}
	if fv.tag == nil {
		if fv.tagged {
			fv.tag = tx.arena.alloc(len(fv.data))
			retagInto(fv.tag, fv.data, fv.tci)
		} else {
			fv.tag = tx.arena.alloc(len(fv.data) + wire.VLANTagLen)
			tagInto(fv.tag, fv.data, fv.tci)
		}
	}
	return fv.tag
}
