package rtnl

// Route messages (RTM_NEWROUTE, RTM_DELROUTE: struct rtmsg and its
// attributes), as the kernel and FRR's zebra write them.

import (
	"encoding/binary"
	"net/netip"
)

// Route attribute types (enum rtattr_type_t).
const (
	RTA_DST       = 1
	RTA_SRC       = 2
	RTA_IIF       = 3
	RTA_OIF       = 4
	RTA_GATEWAY   = 5
	RTA_PRIORITY  = 6
	RTA_PREFSRC   = 7
	RTA_METRICS   = 8
	RTA_MULTIPATH = 9
	RTA_TABLE     = 15
	RTA_VIA       = 18
	RTA_NEWDST    = 19
	RTA_ENCAP     = 22
	RTA_NH_ID     = 30
)

// Route types (rtm_type).
const (
	RTN_UNSPEC      = 0
	RTN_UNICAST     = 1
	RTN_LOCAL       = 2
	RTN_BROADCAST   = 3
	RTN_ANYCAST     = 4
	RTN_MULTICAST   = 5
	RTN_BLACKHOLE   = 6
	RTN_UNREACHABLE = 7
	RTN_PROHIBIT    = 8
	RTN_THROW       = 9
)

// Nexthop flags (rtnh_flags, and rtm_flags for a single-path route).
const (
	RTNH_F_DEAD     = 0x1
	RTNH_F_ONLINK   = 0x4
	RTNH_F_LINKDOWN = 0x10
)

// SizeofRtMsg is sizeof(struct rtmsg); SizeofRtNexthop sizeof(struct rtnexthop).
const (
	SizeofRtMsg     = 12
	SizeofRtNexthop = 8
)

// Unsupported marks what a route asks for that an IPv4 forwarder without
// policy routing, tunnels or MPLS cannot do.
type Unsupported uint8

const (
	UnsupportedVia    Unsupported = 1 << iota // RTA_VIA: a gateway of another family
	UnsupportedEncap                          // RTA_ENCAP: lightweight tunnel
	UnsupportedSource                         // a source prefix (src_len > 0)
	UnsupportedTOS                            // a TOS selector
	UnsupportedMPLS                           // RTA_NEWDST: MPLS label
)

// Reason is a short label for the first unsupported feature.
func (u Unsupported) Reason() string {
	switch {
	case u&UnsupportedVia != 0:
		return "gateway of another family (RTA_VIA)"
	case u&UnsupportedEncap != 0:
		return "encapsulation (RTA_ENCAP)"
	case u&UnsupportedSource != 0:
		return "source prefix"
	case u&UnsupportedTOS != 0:
		return "tos"
	case u&UnsupportedMPLS != 0:
		return "mpls"
	}
	return ""
}

// NextHop is one path of a multipath route (struct rtnexthop).
type NextHop struct {
	Flags   uint8
	Weight  uint16 // rtnh_hops + 1
	OIF     uint32
	Gateway netip.Addr
}

// Route is a decoded route message. Decode reuses Multipath's array.
type Route struct {
	Family   uint8
	DstLen   uint8
	SrcLen   uint8
	TOS      uint8
	Table    uint32 // RTA_TABLE if present, else rtm_table
	Protocol uint8
	Scope    uint8
	Type     uint8
	Flags    uint32 // rtm_flags

	Dst         netip.Addr // the prefix address (unset: the zero address of the family)
	Gateway     netip.Addr
	Prefsrc     netip.Addr
	OIF         uint32
	Priority    uint32
	HasPriority bool
	NHID        uint32
	Multipath   []NextHop
	Unsupported Unsupported
}

// Prefix returns the destination prefix (ok false when Dst has bits set past
// DstLen, which the kernel refuses).
func (r *Route) Prefix() (netip.Prefix, bool) {
	p := netip.PrefixFrom(r.Dst, int(r.DstLen))
	return p, p.IsValid() && p.Masked() == p
}

// Decode fills r from a route message body. Any structural problem is an
// *Error and leaves r unspecified.
func (r *Route) Decode(body []byte) error {
	if len(body) < SizeofRtMsg {
		return ErrShortBody
	}
	*r = Route{Multipath: r.Multipath[:0],
		Family: body[0], DstLen: body[1], SrcLen: body[2], TOS: body[3],
		Table: uint32(body[4]), Protocol: body[5], Scope: body[6], Type: body[7],
		Flags: binary.NativeEndian.Uint32(body[8:]),
	}
	maxLen := uint8(32)
	switch r.Family {
	case AF_INET:
		r.Dst = netip.IPv4Unspecified()
	case AF_INET6:
		maxLen = 128
		r.Dst = netip.IPv6Unspecified()
	}
	if r.DstLen > maxLen || r.SrcLen > maxLen {
		return ErrPrefixLength
	}
	if r.SrcLen > 0 {
		r.Unsupported |= UnsupportedSource
	}
	if r.TOS != 0 {
		r.Unsupported |= UnsupportedTOS
	}
	b := body[SizeofRtMsg:]
	for len(b) > 0 {
		typ, v, rest, err := nextAttr(b)
		if err != nil {
			return err
		}
		b = rest
		switch typ {
		case RTA_DST:
			if r.Dst, err = addr(r.Family, v); err != nil {
				return err
			}
		case RTA_GATEWAY:
			if r.Gateway, err = addr(r.Family, v); err != nil {
				return err
			}
		case RTA_PREFSRC:
			if r.Prefsrc, err = addr(r.Family, v); err != nil {
				return err
			}
		case RTA_OIF:
			if r.OIF, err = u32(v); err != nil {
				return err
			}
		case RTA_PRIORITY:
			if r.Priority, err = u32(v); err != nil {
				return err
			}
			r.HasPriority = true
		case RTA_TABLE:
			if r.Table, err = u32(v); err != nil {
				return err
			}
		case RTA_NH_ID:
			if r.NHID, err = u32(v); err != nil {
				return err
			}
		case RTA_MULTIPATH:
			if err = r.decodeMultipath(v); err != nil {
				return err
			}
		case RTA_VIA:
			r.Unsupported |= UnsupportedVia
		case RTA_ENCAP:
			if len(v) > 0 {
				r.Unsupported |= UnsupportedEncap
			}
		case RTA_NEWDST:
			r.Unsupported |= UnsupportedMPLS
		}
	}
	return nil
}

// decodeMultipath appends the paths of an RTA_MULTIPATH value.
func (r *Route) decodeMultipath(v []byte) error {
	for len(v) > 0 {
		if len(v) < SizeofRtNexthop {
			return ErrMultipath
		}
		n := int(binary.NativeEndian.Uint16(v))
		if n < SizeofRtNexthop || n > len(v) {
			return ErrMultipath
		}
		nh := NextHop{Flags: v[2], Weight: uint16(v[3]) + 1, OIF: binary.NativeEndian.Uint32(v[4:])}
		attrs := v[SizeofRtNexthop:n]
		for len(attrs) > 0 {
			typ, av, rest, err := nextAttr(attrs)
			if err != nil {
				return err
			}
			attrs = rest
			switch typ {
			case RTA_GATEWAY:
				if nh.Gateway, err = addr(r.Family, av); err != nil {
					return err
				}
			case RTA_VIA:
				r.Unsupported |= UnsupportedVia
			case RTA_ENCAP:
				if len(av) > 0 {
					r.Unsupported |= UnsupportedEncap
				}
			case RTA_NEWDST:
				r.Unsupported |= UnsupportedMPLS
			}
		}
		r.Multipath = append(r.Multipath, nh)
		next := align4(n)
		if next > len(v) {
			next = len(v)
		}
		v = v[next:]
	}
	return nil
}

// AppendRoute appends a complete route message (header included) built
// from r: the attributes that are set (Dst when DstLen > 0, Gateway, OIF,
// Prefsrc, Priority when HasPriority, NHID, Multipath, RTA_TABLE when the
// table does not fit in rtm_table).
func AppendRoute(b []byte, typ, flags uint16, seq uint32, r *Route) []byte {
	b, start := beginMessage(b, typ, flags, seq)
	table := uint8(r.Table)
	if r.Table > 255 {
		table = 252 // RT_TABLE_COMPAT
	}
	b = append(b, r.Family, r.DstLen, r.SrcLen, r.TOS, table, r.Protocol, r.Scope, r.Type)
	b = binary.NativeEndian.AppendUint32(b, r.Flags)
	if r.Table > 255 {
		b = AppendAttrU32(b, RTA_TABLE, r.Table)
	}
	if r.DstLen > 0 {
		b = AppendAttrAddr(b, RTA_DST, r.Dst)
	}
	if r.HasPriority {
		b = AppendAttrU32(b, RTA_PRIORITY, r.Priority)
	}
	if r.Prefsrc.IsValid() {
		b = AppendAttrAddr(b, RTA_PREFSRC, r.Prefsrc)
	}
	if r.NHID != 0 {
		b = AppendAttrU32(b, RTA_NH_ID, r.NHID)
	}
	if r.Gateway.IsValid() {
		b = AppendAttrAddr(b, RTA_GATEWAY, r.Gateway)
	}
	if r.OIF != 0 {
		b = AppendAttrU32(b, RTA_OIF, r.OIF)
	}
	if len(r.Multipath) > 0 {
		var mstart int
		b, mstart = beginNested(b, RTA_MULTIPATH)
		for _, nh := range r.Multipath {
			hstart := len(b)
			b = binary.NativeEndian.AppendUint16(b, 0)
			b = append(b, nh.Flags, uint8(max(nh.Weight, 1)-1))
			b = binary.NativeEndian.AppendUint32(b, nh.OIF)
			if nh.Gateway.IsValid() {
				b = AppendAttrAddr(b, RTA_GATEWAY, nh.Gateway)
			}
			binary.NativeEndian.PutUint16(b[hstart:], uint16(len(b)-hstart))
		}
		b = endNested(b, mstart)
	}
	return endMessage(b, start)
}
