package lab

// The standard lab network of `netfwd-lab` and of most end-to-end tests:
//
//	h1 10.0.10.11 ──eth1─┐                       ┌─eth0── isp 203.0.113.1
//	h2 10.0.10.12 ──eth2─┤ br0: VLAN 10 (vlan10)  │        lo 198.51.100.1
//	h3 10.0.20.13 ──eth3─┘      VLAN 20 (vlan20)  │        route 10.0.0.0/8 via 203.0.113.2
//	                       netfwd in namespace r ─┘ eth0 203.0.113.2/24 (routed)
//
// h1 and h2 are access hosts of VLAN 10, h3 of VLAN 20; their default
// routes point at the router's VLAN interfaces (10.0.10.1, 10.0.20.1). The
// uplink host "isp" holds an address "on the Internet" (198.51.100.1) and
// routes the lab's 10.0.0.0/8 back. The router's default route points at
// the isp; 10.66/16 is blackholed, 10.67/16 unreachable, 10.68/16 prohibited.

import (
	"net"
	"net/netip"
)

// Addresses and MACs of the standard network (fixed, so output is readable
// and tests can name them).
var (
	BridgeMAC   = mustMAC("02:00:00:00:0b:01") // br0, vlan10, vlan20
	UplinkMAC   = mustMAC("02:00:00:00:e0:01") // router eth0
	VLAN10Addr  = netip.MustParsePrefix("10.0.10.1/24")
	VLAN20Addr  = netip.MustParsePrefix("10.0.20.1/24")
	UplinkAddr  = netip.MustParsePrefix("203.0.113.2/24")
	ISPAddr     = netip.MustParsePrefix("203.0.113.1/24")
	InternetIP  = netip.MustParseAddr("198.51.100.1")
	BlackholeIP = netip.MustParseAddr("10.66.0.1")
	UnreachIP   = netip.MustParseAddr("10.67.0.1")
	ProhibitIP  = netip.MustParseAddr("10.68.0.1")
)

// Standard returns the standard network's spec.
func Standard() Spec {
	return Spec{
		Bridge:    "br0",
		BridgeMAC: BridgeMAC,
		VLANs: []VLAN{
			{VID: 10, Iface: "vlan10", Addr: VLAN10Addr},
			{VID: 20, Iface: "vlan20", Addr: VLAN20Addr},
		},
		Hosts: []HostSpec{
			AccessHost("h1", "eth1", 10, "10.0.10.11/24", "02:00:00:00:10:11"),
			AccessHost("h2", "eth2", 10, "10.0.10.12/24", "02:00:00:00:10:12"),
			AccessHost("h3", "eth3", 20, "10.0.20.13/24", "02:00:00:00:20:13"),
			UplinkHost("isp", "eth0", ISPAddr, UplinkAddr, UplinkMAC, "02:00:00:00:e0:fe", InternetIP),
		},
		RouterConfig: []string{
			"route add default via 203.0.113.1 dev eth0",
			"route add blackhole 10.66.0.0/16",
			"route add unreachable 10.67.0.0/16",
			"route add prohibit 10.68.0.0/16",
		},
	}
}

// AccessHost is a host on an access port of VLAN vid whose default route
// is the router's address in that VLAN (.1 of its subnet).
func AccessHost(name, port string, vid uint16, addr, mac string) HostSpec {
	a := netip.MustParsePrefix(addr)
	gw := a.Masked().Addr().Next()
	return HostSpec{Name: name, Port: port, VLAN: vid, MAC: mustMAC(mac), Addr: a, Gateway: gw}
}

// UplinkHost is a host on a routed port: it has address addr, the router
// routerAddr (MAC routerMAC) on port, and it routes 10.0.0.0/8 back to the
// router and holds loopback addresses ("the Internet").
func UplinkHost(name, port string, addr, routerAddr netip.Prefix, routerMAC net.HardwareAddr, mac string, loopback ...netip.Addr) HostSpec {
	h := HostSpec{Name: name, Port: port, MAC: mustMAC(mac), Addr: addr, RouterAddr: routerAddr, RouterMAC: routerMAC,
		Routes: []string{"10.0.0.0/8 via " + routerAddr.Addr().String()}}
	for _, l := range loopback {
		h.Loopback = append(h.Loopback, netip.PrefixFrom(l, 32))
	}
	return h
}

func mustMAC(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}
