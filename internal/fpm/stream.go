package fpm

// Building FPM streams as zebra writes them: for tests, the benchmark and
// recorded-stream tools. With nexthop groups, zebra sends RTM_NEWNEXTHOP for
// each nexthop (members first, then groups), then one RTM_NEWROUTE per
// frame: flags create|replace, table main in the header, protocol bgp (186),
// RTA_DST, RTA_PRIORITY 20 and RTA_NH_ID (52 bytes). Without groups each
// route carries RTA_GATEWAY and RTA_OIF instead (60 bytes). A withdrawal is
// RTM_DELROUTE with RTA_DST and RTA_PRIORITY (44 bytes).
//
// Locking: none.

import (
	"net/netip"

	"github.com/netfwd/netfwd/internal/rtnl"
)

// ZebraRoute describes one route as zebra sends it.
type ZebraRoute struct {
	Prefix   netip.Prefix
	Protocol uint8  // 0: bgp (186)
	Metric   uint32 // RTA_PRIORITY (zebra: 20 for eBGP)
	Type     uint8  // 0: RTN_UNICAST
	NHID     uint32 // RTA_NH_ID, or:
	Gateway  netip.Addr
	OIF      uint32
	Paths    []rtnl.NextHop // RTA_MULTIPATH
	Table    uint32         // 0: main
}

func (z *ZebraRoute) msg() rtnl.Route {
	r := rtnl.Route{Family: rtnl.AF_INET, DstLen: uint8(z.Prefix.Bits()), Table: z.Table, Protocol: z.Protocol,
		Type: z.Type, Dst: z.Prefix.Addr(), Priority: z.Metric, HasPriority: true, NHID: z.NHID,
		Gateway: z.Gateway, OIF: z.OIF, Multipath: z.Paths}
	if r.Table == 0 {
		r.Table = 254
	}
	if r.Protocol == 0 {
		r.Protocol = 186
	}
	if r.Type == 0 {
		r.Type = rtnl.RTN_UNICAST
	}
	return r
}

// AppendNewRoute appends one frame with an RTM_NEWROUTE (create|replace).
func AppendNewRoute(b []byte, z *ZebraRoute) []byte {
	r := z.msg()
	return appendFramed(b, func(m []byte) []byte {
		return rtnl.AppendRoute(m, rtnl.RTM_NEWROUTE, rtnl.NLM_F_REQUEST|rtnl.NLM_F_CREATE|rtnl.NLM_F_REPLACE, 0, &r)
	})
}

// AppendDelRoute appends one frame with an RTM_DELROUTE as zebra sends it
// (type unspec, destination and metric only).
func AppendDelRoute(b []byte, z *ZebraRoute) []byte {
	r := z.msg()
	r.Type, r.NHID, r.Gateway, r.OIF, r.Multipath = rtnl.RTN_UNSPEC, 0, netip.Addr{}, 0, nil
	return appendFramed(b, func(m []byte) []byte {
		return rtnl.AppendRoute(m, rtnl.RTM_DELROUTE, rtnl.NLM_F_REQUEST, 0, &r)
	})
}

// AppendNexthop appends one frame with an RTM_NEWNEXTHOP (del: RTM_DELNEXTHOP).
func AppendNexthop(b []byte, n *rtnl.Nexthop, del bool) []byte {
	typ := uint16(rtnl.RTM_NEWNEXTHOP)
	flags := uint16(rtnl.NLM_F_REQUEST | rtnl.NLM_F_CREATE | rtnl.NLM_F_REPLACE)
	if del {
		typ, flags = rtnl.RTM_DELNEXTHOP, rtnl.NLM_F_REQUEST
	}
	return appendFramed(b, func(m []byte) []byte { return rtnl.AppendNexthop(m, typ, flags, 0, n) })
}

// appendFramed appends a frame whose netlink payload build appends.
func appendFramed(b []byte, build func([]byte) []byte) []byte {
	start := len(b)
	b = append(b, Version, TypeNetlink, 0, 0)
	b = build(b)
	n := len(b) - start
	b[start+2], b[start+3] = byte(n>>8), byte(n)
	return b
}

// FullTableStream returns the stream zebra sends for prefixes learned from
// one eBGP peer (gateway gw on interface oif): with nexthop groups (one
// RTM_NEWNEXTHOP, id nhid, then the routes), or inline gateways.
func FullTableStream(prefixes []netip.Prefix, gw netip.Addr, oif, nhid uint32, groups bool) []byte {
	per := 60
	b := make([]byte, 0, 64+len(prefixes)*per)
	if groups {
		b = AppendNexthop(b, &rtnl.Nexthop{Family: rtnl.AF_INET, Protocol: 11, ID: nhid, OIF: oif, Gateway: gw}, false)
	}
	for _, p := range prefixes {
		z := ZebraRoute{Prefix: p, Metric: 20}
		if groups {
			z.NHID = nhid
		} else {
			z.Gateway, z.OIF = gw, oif
		}
		b = AppendNewRoute(b, &z)
	}
	return b
}
