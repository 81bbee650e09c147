package pktio

// Meta: what Recv says about each frame beyond its bytes, and the offload
// state (GSO, partial checksum) that must travel with a frame to Tx.Send.
//
// Locking: none; values.

import "github.com/netfwd/netfwd/wire"

// Flags describe what the kernel reported and what Recv fixed up.
type Flags uint16

const (
	// FlagVLANRestored: the kernel had moved an 802.1Q/802.1ad tag into
	// packet metadata (VLAN offload); Recv put it back into the bytes.
	FlagVLANRestored Flags = 1 << iota
	// FlagChecksumCompleted: the frame arrived with a partial L4 checksum
	// (CHECKSUM_PARTIAL, TP_STATUS_CSUMNOTREADY) and Recv completed it.
	FlagChecksumCompleted
	// FlagChecksumPartial: the L4 checksum is still partial (GSO frames, or
	// KeepPartialChecksum); Offload says where, and Tx.Send lets the egress
	// device finish it.
	FlagChecksumPartial
	// FlagChecksumValid: the kernel vouched for the L4 checksum.
	FlagChecksumValid
	// FlagGSO: a GSO/GRO super-frame (larger than the MTU); Offload.GSOType
	// and GSOSize describe the segments it stands for.
	FlagGSO
)

// GSO types, as in the virtio-net header (VIRTIO_NET_HDR_GSO_*).
const (
	GSONone  = wire.VirtioNetGSONone
	GSOTCPv4 = wire.VirtioNetGSOTCPv4
	GSOUDP   = wire.VirtioNetGSOUDP
	GSOTCPv6 = wire.VirtioNetGSOTCPv6
	GSOUDPL4 = wire.VirtioNetGSOUDPL4
	GSOECN   = wire.VirtioNetGSOECN
)

// Offload is the offload state of a frame that Tx.Send needs to pass it on
// unchanged: a GSO super-frame or a frame with a partial checksum. The zero
// value means a plain, complete frame.
//
// Offsets are kept relative to the L3 header so the engine may change the
// L2 header (push or pop VLAN tags, rewrite MACs) without touching Offload:
// Tx.Send finds the L3 header of the outgoing bytes again.
type Offload struct {
	// GSOType is one of the GSO* constants (GSONone for a single frame).
	GSOType uint8
	// NeedsCsum: the L4 checksum is partial; L4Off and CsumOffset locate it.
	NeedsCsum bool
	// GSOSize is the payload size of each segment (the MSS for TCP).
	GSOSize uint16
	// L4Off is the offset of the checksummed L4 header from the L3 header.
	L4Off uint16
	// CsumOffset is the offset of the checksum field within the L4 header.
	CsumOffset uint16
}

// IsZero reports whether o describes a plain frame.
func (o Offload) IsZero() bool { return o == Offload{} }

// Meta describes one received frame.
type Meta struct {
	// Len is the frame's length on the wire, tag included (FCS excluded).
	// Equal to the frame's length: truncated frames are dropped and counted.
	Len uint32
	// Flags say what the kernel reported and what Recv fixed up.
	Flags Flags
	// VLANTCI is the tag control information Recv restored (FlagVLANRestored).
	VLANTCI uint16
	// Offload carries GSO and partial-checksum state to Tx.Send.
	Offload Offload
}

// VirtioNetHdr is the virtio-net header announcing o for a frame whose
// network header is at l3; the zero header for the zero Offload. With a
// partial checksum, hdr_len covers the headers up to the checksum field (a
// hint for the linear part; the kernel raises it to that anyway).
func (o Offload) VirtioNetHdr(l3 int) wire.VirtioNetHdr {
	h := wire.VirtioNetHdr{GSOType: o.GSOType, GSOSize: o.GSOSize}
	if o.NeedsCsum {
		start := uint16(l3) + o.L4Off
		h.Flags = wire.VirtioNetFlagNeedsCsum
		h.CsumStart = start
		h.CsumOffset = o.CsumOffset
		h.HdrLen = start + o.CsumOffset + 2
	}
	return h
}
