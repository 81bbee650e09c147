package pktio

// vnet: the virtio-net header that PACKET_VNET_HDR puts in front of each
// received frame and expects in front of each transmitted one (its layout
// is wire.VirtioNetHdr), and building it from a frame's Offload.
//
// Locking: none; pure functions over byte slices.

import "github.com/netfwd/netfwd/wire"

// pktio's short names for the header (wire.VirtioNetHdr).
type vnetHdr = wire.VirtioNetHdr

const (
	vnetHdrLen        = wire.VirtioNetHdrLen
	vnetFlagNeedsCsum = wire.VirtioNetFlagNeedsCsum
	vnetFlagDataValid = wire.VirtioNetFlagDataValid
)

func decodeVnet(b []byte) vnetHdr { return wire.DecodeVirtioNetHdr(b) }

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

// vnetForTx builds the header for frame from its Offload. It returns false
// when the frame's L3 header cannot be found or the offload state does not
// fit the frame (the engine produced a frame that no longer matches it), so
// the caller drops it.
func vnetForTx(frame []byte, o Offload) (vnetHdr, bool) {
	if o.IsZero() {
		return vnetHdr{}, true
	}
	l3, ok := l3Offset(frame)
	switch {
	case !ok,
		o.NeedsCsum && l3+int(o.L4Off)+int(o.CsumOffset)+2 > len(frame),
		o.GSOType != GSONone && o.GSOSize == 0:
		return vnetHdr{}, false
	}
	return o.VirtioNetHdr(l3), true
}
