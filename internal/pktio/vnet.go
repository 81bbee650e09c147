package pktio

// vnet: the virtio-net header (struct virtio_net_hdr, 10 bytes, little
// endian on every Linux host we run on) that PACKET_VNET_HDR puts in front
// of each received frame and expects in front of each transmitted one.
//
// Locking: none; pure functions over byte slices.

import "encoding/binary"

const (
	vnetHdrLen = 10

	vnetFlagNeedsCsum = 1
	vnetFlagDataValid = 2
)

// vnetHdr is the decoded header.
type vnetHdr struct {
	flags      uint8
	gsoType    uint8
	hdrLen     uint16
	gsoSize    uint16
	csumStart  uint16 // from the start of the frame
	csumOffset uint16
}

func decodeVnet(b []byte) vnetHdr {
	_ = b[vnetHdrLen-1]
	return vnetHdr{
		flags:      b[0],
		gsoType:    b[1],
		hdrLen:     binary.LittleEndian.Uint16(b[2:]),
		gsoSize:    binary.LittleEndian.Uint16(b[4:]),
		csumStart:  binary.LittleEndian.Uint16(b[6:]),
		csumOffset: binary.LittleEndian.Uint16(b[8:]),
	}
}

func (h vnetHdr) encode(b []byte) {
	_ = b[vnetHdrLen-1]
	b[0] = h.flags
	b[1] = h.gsoType
	binary.LittleEndian.PutUint16(b[2:], h.hdrLen)
	binary.LittleEndian.PutUint16(b[4:], h.gsoSize)
	binary.LittleEndian.PutUint16(b[6:], h.csumStart)
	binary.LittleEndian.PutUint16(b[8:], h.csumOffset)
}

// vnetForTx builds the header for frame from its Offload. It returns false
// when the frame's L3 header cannot be found (the engine produced a frame
// that no longer matches its offload state), so the caller drops it.
func vnetForTx(frame []byte, o Offload) (vnetHdr, bool) {
	if o.IsZero() {
		return vnetHdr{}, true
	}
	l3, ok := l3Offset(frame)
	if !ok {
		return vnetHdr{}, false
	}
	h := vnetHdr{gsoType: o.GSOType, gsoSize: o.GSOSize}
	if o.NeedsCsum {
		start := l3 + int(o.L4Off)
		if start+int(o.CsumOffset)+2 > len(frame) {
			return vnetHdr{}, false
		}
		h.flags = vnetFlagNeedsCsum
		h.csumStart = uint16(start)
		h.csumOffset = o.CsumOffset
		// hdr_len is a hint for the linear part; the kernel raises it to
		// cover the checksum field. Headers up to the L4 checksum suffice.
		h.hdrLen = uint16(start) + o.CsumOffset + 2
	}
	if o.GSOType != GSONone && h.gsoSize == 0 {
		return vnetHdr{}, false
	}
	return h, true
}
