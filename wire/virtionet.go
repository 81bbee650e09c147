package wire

// The virtio-net header (struct virtio_net_hdr, the 10-byte legacy layout)
// that AF_PACKET sockets with PACKET_VNET_HDR and TAP devices with
// IFF_VNET_HDR put in front of every frame they hand over and expect in
// front of every frame they are given. It carries the frame's offload
// state: a partial checksum (NEEDS_CSUM, csum_start, csum_offset) and GSO
// (gso_type, gso_size, hdr_len). The legacy layout is in host byte order
// (neither socket is switched to TUNSETVNETLE/BE or a v1 header), so the
// fields are read and written native-endian.
//
// CompletePartialChecksum finishes a partial checksum in software, for a
// frame that goes where no device will finish it.

import "encoding/binary"

// VirtioNetHdrLen is the size of the legacy header.
const VirtioNetHdrLen = 10

// Header flags.
const (
	// VirtioNetFlagNeedsCsum: CsumStart and CsumOffset locate a partial
	// checksum (VIRTIO_NET_HDR_F_NEEDS_CSUM).
	VirtioNetFlagNeedsCsum = 1
	// VirtioNetFlagDataValid: the device checked the checksum
	// (VIRTIO_NET_HDR_F_DATA_VALID).
	VirtioNetFlagDataValid = 2
)

// GSO types (VIRTIO_NET_HDR_GSO_*).
const (
	VirtioNetGSONone  = 0
	VirtioNetGSOTCPv4 = 1
	VirtioNetGSOUDP   = 3
	VirtioNetGSOTCPv6 = 4
	VirtioNetGSOUDPL4 = 5
	VirtioNetGSOECN   = 0x80
)

// VirtioNetHdr is the decoded header.
type VirtioNetHdr struct {
	Flags      uint8
	GSOType    uint8
	HdrLen     uint16 // length of the headers (a hint for the linear part)
	GSOSize    uint16 // payload bytes per segment
	CsumStart  uint16 // from the start of the frame
	CsumOffset uint16 // of the checksum field, from CsumStart
}

// DecodeVirtioNetHdr reads the header from b[:VirtioNetHdrLen].
func DecodeVirtioNetHdr(b []byte) VirtioNetHdr {
	_ = b[VirtioNetHdrLen-1] // one bounds check
	return VirtioNetHdr{
		Flags:      b[0],
		GSOType:    b[1],
		HdrLen:     binary.NativeEndian.Uint16(b[2:]),
		GSOSize:    binary.NativeEndian.Uint16(b[4:]),
		CsumStart:  binary.NativeEndian.Uint16(b[6:]),
		CsumOffset: binary.NativeEndian.Uint16(b[8:]),
	}
}

// Encode writes the header into b[:VirtioNetHdrLen].
func (h VirtioNetHdr) Encode(b []byte) {
	_ = b[VirtioNetHdrLen-1] // one bounds check
	b[0] = h.Flags
	b[1] = h.GSOType
	binary.NativeEndian.PutUint16(b[2:], h.HdrLen)
	binary.NativeEndian.PutUint16(b[4:], h.GSOSize)
	binary.NativeEndian.PutUint16(b[6:], h.CsumStart)
	binary.NativeEndian.PutUint16(b[8:], h.CsumOffset)
}

// CompletePartialChecksum finishes a partial L4 checksum (CHECKSUM_PARTIAL)
// in frame the way the kernel's skb_checksum_help does: the field at
// start+offset already holds the folded pseudo-header sum, so the checksum
// is the complement of the sum of everything from start on, the field
// included. A result of 0 is written as 0xffff (equal in one's complement;
// 0 means "no checksum" to UDP). It returns false, changing nothing, when
// the field does not lie inside the frame.
func CompletePartialChecksum(frame []byte, start, offset int) bool {
	if start < 0 || offset < 0 || start+offset+2 > len(frame) {
		return false
	}
	c := ^Fold(Sum(0, frame[start:]))
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(frame[start+offset:], c)
	return true
}
