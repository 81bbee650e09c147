package rtnl

// Neighbour (ARP) messages: RTM_NEWNEIGH, RTM_DELNEIGH (struct ndmsg,
// NDA_DST, NDA_LLADDR).

import (
	"encoding/binary"
	"net/netip"
)

// Neighbour attributes and states (linux/neighbour.h).
const (
	NDA_DST    = 1
	NDA_LLADDR = 2

	NUD_INCOMPLETE = 0x01
	NUD_REACHABLE  = 0x02
	NUD_STALE      = 0x04
	NUD_DELAY      = 0x08
	NUD_PROBE      = 0x10
	NUD_FAILED     = 0x20
	NUD_NOARP      = 0x40
	NUD_PERMANENT  = 0x80

	// SizeofNdMsg is sizeof(struct ndmsg).
	SizeofNdMsg = 12
)

// Neigh is a decoded neighbour message.
type Neigh struct {
	Family    uint8
	IfIndex   uint32
	State     uint16
	Flags     uint8
	Type      uint8
	Dst       netip.Addr
	LLAddr    [6]byte
	HasLLAddr bool // NDA_LLADDR of Ethernet length
}

// Decode fills n from a neighbour message body.
func (n *Neigh) Decode(body []byte) error {
	if len(body) < SizeofNdMsg {
		return ErrShortBody
	}
	*n = Neigh{Family: body[0], IfIndex: binary.NativeEndian.Uint32(body[4:]),
		State: binary.NativeEndian.Uint16(body[8:]), Flags: body[10], Type: body[11]}
	b := body[SizeofNdMsg:]
	for len(b) > 0 {
		typ, v, rest, err := nextAttr(b)
		if err != nil {
			return err
		}
		b = rest
		switch typ {
		case NDA_DST:
			if n.Dst, err = addr(n.Family, v); err != nil {
				return err
			}
		case NDA_LLADDR:
			if len(v) == 6 {
				n.LLAddr, n.HasLLAddr = [6]byte(v), true
			}
		}
	}
	return nil
}

// AppendNeigh appends a complete neighbour message built from n.
func AppendNeigh(b []byte, typ, flags uint16, seq uint32, n *Neigh) []byte {
	b, start := beginMessage(b, typ, flags, seq)
	b = append(b, n.Family, 0, 0, 0)
	b = binary.NativeEndian.AppendUint32(b, n.IfIndex)
	b = binary.NativeEndian.AppendUint16(b, n.State)
	b = append(b, n.Flags, n.Type)
	if n.Dst.IsValid() {
		b = AppendAttrAddr(b, NDA_DST, n.Dst)
	}
	if n.HasLLAddr {
		b = AppendAttr(b, NDA_LLADDR, n.LLAddr[:])
	}
	return endMessage(b, start)
}
