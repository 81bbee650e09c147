package rtnl

// Nexthop object messages (RTM_NEWNEXTHOP, RTM_DELNEXTHOP: struct nhmsg and
// the NHA_* attributes), as `ip nexthop` and zebra use them.

import (
	"encoding/binary"
	"net/netip"
)

// Nexthop attribute types (linux/nexthop.h).
const (
	NHA_ID         = 1
	NHA_GROUP      = 2
	NHA_GROUP_TYPE = 3
	NHA_BLACKHOLE  = 4
	NHA_OIF        = 5
	NHA_GATEWAY    = 6
	NHA_ENCAP      = 8
	NHA_FDB        = 11
)

// SizeofNhMsg is sizeof(struct nhmsg); sizeofNhGrp sizeof(struct nexthop_grp).
const (
	SizeofNhMsg = 8
	sizeofNhGrp = 8
)

// GroupMember is one entry of NHA_GROUP.
type GroupMember struct {
	ID     uint32
	Weight uint16 // 1..256 (the wire holds weight-1)
}

// Nexthop is a decoded nexthop object message. Decode reuses Group's array.
type Nexthop struct {
	Family    uint8
	Scope     uint8
	Protocol  uint8
	Flags     uint32
	ID        uint32
	Group     []GroupMember
	GroupType uint16
	Blackhole bool
	OIF       uint32
	Gateway   netip.Addr
	// Unsupported is set for FDB nexthops and encapsulation.
	Unsupported bool
}

// Decode fills n from a nexthop message body.
func (n *Nexthop) Decode(body []byte) error {
	if len(body) < SizeofNhMsg {
		return ErrShortBody
	}
	*n = Nexthop{Family: body[0], Scope: body[1], Protocol: body[2], Flags: binary.NativeEndian.Uint32(body[4:]),
		Group: n.Group[:0]}
	b := body[SizeofNhMsg:]
	for len(b) > 0 {
		typ, v, rest, err := nextAttr(b)
		if err != nil {
			return err
		}
		b = rest
		switch typ {
		case NHA_ID:
			if n.ID, err = u32(v); err != nil {
				return err
			}
		case NHA_GROUP:
			if len(v) == 0 || len(v)%sizeofNhGrp != 0 {
				return ErrGroup
			}
			for ; len(v) > 0; v = v[sizeofNhGrp:] {
				// weight (u8) and, since Linux 6.12, weight_high (u8).
				w := uint16(v[4]) | uint16(v[5])<<8
				n.Group = append(n.Group, GroupMember{ID: binary.NativeEndian.Uint32(v), Weight: w + 1})
			}
		case NHA_GROUP_TYPE:
			if n.GroupType, err = u16(v); err != nil {
				return err
			}
		case NHA_BLACKHOLE:
			n.Blackhole = true
		case NHA_OIF:
			if n.OIF, err = u32(v); err != nil {
				return err
			}
		case NHA_GATEWAY:
			if n.Gateway, err = addr(n.Family, v); err != nil {
				return err
			}
		case NHA_ENCAP, NHA_FDB:
			n.Unsupported = true
		}
	}
	return nil
}

// AppendNexthop appends a complete nexthop message built from n.
func AppendNexthop(b []byte, typ, flags uint16, seq uint32, n *Nexthop) []byte {
	b, start := beginMessage(b, typ, flags, seq)
	b = append(b, n.Family, n.Scope, n.Protocol, 0)
	b = binary.NativeEndian.AppendUint32(b, n.Flags)
	if n.ID != 0 {
		b = AppendAttrU32(b, NHA_ID, n.ID)
	}
	if len(n.Group) > 0 {
		v := make([]byte, 0, sizeofNhGrp*len(n.Group))
		for _, m := range n.Group {
			w := max(m.Weight, 1) - 1
			v = binary.NativeEndian.AppendUint32(v, m.ID)
			v = append(v, uint8(w), uint8(w>>8), 0, 0)
		}
		b = AppendAttr(b, NHA_GROUP, v)
		b = AppendAttr(b, NHA_GROUP_TYPE, binary.NativeEndian.AppendUint16(nil, n.GroupType))
	}
	if n.Blackhole {
		b = AppendAttr(b, NHA_BLACKHOLE, nil)
	}
	if n.OIF != 0 {
		b = AppendAttrU32(b, NHA_OIF, n.OIF)
	}
	if n.Gateway.IsValid() {
		b = AppendAttrAddr(b, NHA_GATEWAY, n.Gateway)
	}
	return endMessage(b, start)
}
