package afpacket

// vnet: the virtio-net header that PACKET_VNET_HDR puts in front of each
// received frame and expects in front of each transmitted one (its layout
// is wire.VirtioNetHdr), and building it from a frame's Offload.
//
// Locking: none; pure functions over byte slices.

import (
	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/wire"
)

// pktio's short names for the header (wire.VirtioNetHdr).
type vnetHdr = wire.VirtioNetHdr

const (
	vnetHdrLen        = wire.VirtioNetHdrLen
	vnetFlagNeedsCsum = wire.VirtioNetFlagNeedsCsum
	vnetFlagDataValid = wire.VirtioNetFlagDataValid
)

func decodeVnet(b []byte) vnetHdr { return wire.DecodeVirtioNetHdr(b) }

// vnetForTx builds the header for frame from its Offload. It returns false
// when the frame's L3 header cannot be found or the offload state does not
// fit the frame (the engine produced a frame that no longer matches it), so
// the caller drops it.
func vnetForTx(frame []byte, o pktio.Offload) (vnetHdr, bool) {
	if o.IsZero() {
		return vnetHdr{}, true
	}
	l3, ok := pktio.L3Offset(frame)
	switch {
	case !ok,
		o.NeedsCsum && l3+int(o.L4Off)+int(o.CsumOffset)+2 > len(frame),
		o.GSOType != pktio.GSONone && o.GSOSize == 0:
		return vnetHdr{}, false
	}
	return o.VirtioNetHdr(l3), true
}
