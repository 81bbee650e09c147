package main

// End-to-end: two customers with the same addresses behind one router, each
// in its own VRF (issue 29). Customer A's host c1 (eth1) and customer B's
// host c2 (eth2) both are 10.0.0.2/24 behind the router's 10.0.0.1; each
// customer's uplink host, s1 (eth3) and s2 (eth4), both are 192.0.2.2/24
// behind the router's 192.0.2.1 and hold the same "Internet" address
// 198.51.100.1. Only the VRFs tell the two apart, so which uplink host's
// kernel counted an echo request says which VRF forwarded it.

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/netfwd/netfwd/internal/lab"
)

var (
	vrfCustomerRouter = netip.MustParsePrefix("10.0.0.1/24")
	vrfCustomerHost   = netip.MustParsePrefix("10.0.0.2/24")
	vrfUplinkRouter   = netip.MustParsePrefix("192.0.2.1/24")
	vrfUplinkHost     = netip.MustParsePrefix("192.0.2.2/24")
	vrfInternet       = netip.MustParseAddr("198.51.100.1")
)

// vrfSpec is the two-customer network: no bridge, four routed ports.
func vrfSpec() lab.Spec {
	customer := func(name, port, mac, routerMAC string) lab.HostSpec {
		return lab.HostSpec{Name: name, Port: port, MAC: mustMAC(mac), Addr: vrfCustomerHost,
			Gateway: vrfCustomerRouter.Addr(), RouterAddr: vrfCustomerRouter, RouterMAC: mustMAC(routerMAC)}
	}
	uplink := func(name, port, mac, routerMAC string) lab.HostSpec {
		return lab.UplinkHost(name, port, vrfUplinkHost, vrfUplinkRouter, mustMAC(routerMAC), mac, vrfInternet)
	}
	return lab.Spec{
		Hosts: []lab.HostSpec{
			customer("c1", "eth1", "02:00:00:00:0a:02", "02:00:00:00:0a:01"),
			customer("c2", "eth2", "02:00:00:00:0b:02", "02:00:00:00:0b:01"),
			uplink("s1", "eth3", "02:00:00:00:1a:02", "02:00:00:00:1a:01"),
			uplink("s2", "eth4", "02:00:00:00:1b:02", "02:00:00:00:1b:01"),
		},
		RouterConfig: []string{
			"link add red type vrf table 10",
			"link add blue type vrf table 20",
			"link set eth1 master red",
			"link set eth3 master red",
			"link set eth2 vrf blue",
			"link set eth4 vrf blue",
			"route add default via 192.0.2.2 dev eth3 table 10",
			"route add default via 192.0.2.2 dev eth4 table 20",
			"route add unreachable 10.67.0.0/16 table 10",
		},
	}
}

func TestE2EVRFTwoCustomers(t *testing.T) {
	waitingTest(t)
	e := newE2E(t, vrfSpec(), nil)
	s1, s2 := e.host("s1").NS, e.host("s2").NS
	echos := func() (int64, int64) {
		return kernelCounter(t, s1, "Icmp", "InEchos"), kernelCounter(t, s2, "Icmp", "InEchos")
	}
	// pingVia pings the Internet address from a customer and requires
	// every echo request at the given uplink host and none at the other.
	pingVia := func(from, via string) {
		t.Helper()
		a0, b0 := echos()
		e.pingOK(from, vrfInternet, 63)
		a1, b1 := echos()
		want := map[string][2]int64{"s1": {3, 0}, "s2": {0, 3}}[via]
		if a1-a0 != want[0] || b1-b0 != want[1] {
			t.Fatalf("%s -> %s: s1 counted %d echo requests, s2 %d; want all 3 via %s\nroutes:\n%s",
				from, vrfInternet, a1-a0, b1-b0, via, e.ctl("route show table all"))
		}
	}
	check := func(stage string) {
		t.Helper()
		pingVia("c1", "s1")
		pingVia("c2", "s2")
		// The router answers each customer at the same address from the
		// customer's VRF (the echo reply's output lookup is in that VRF).
		e.pingOK("c1", vrfCustomerRouter.Addr(), 64)
		e.pingOK("c2", vrfCustomerRouter.Addr(), 64)
		// An unreachable route of red answers c1 with host unreachable (as Linux: EHOSTUNREACH) sourced
		// from red's address; blue has no such route and forwards c2's
		// ping to s2 (where it dies unanswered: s2 routes 10/8 back, but
		// no host holds 10.67.0.1).
		r := e.ping("c1", netip.MustParseAddr("10.67.0.1"), lab.PingOptions{Count: 1})
		if r.Received != 0 || r.ErrorsFrom(vrfCustomerRouter.Addr(), lab.KindHostUnreachable) != 1 {
			t.Fatalf("%s: c1 -> 10.67.0.1: want one %s from %s, got %d replies, errors %+v\n%s", stage,
				lab.KindHostUnreachable, vrfCustomerRouter.Addr(), r.Received, r.Errors, r.Output)
		}
		if got := e.ctl("route get 198.51.100.1 vrf blue"); !(strings.Contains(got, "via 192.0.2.2") && strings.Contains(got, "dev eth4") && strings.Contains(got, "table 20")) {
			t.Fatalf("%s: route get ... vrf blue: %q", stage, got)
		}
		if out, err := e.ctlErr("route get 198.51.100.1 vrf nosuch"); err == nil || !strings.Contains(err.Error(), "Invalid VRF") {
			t.Fatalf("%s: route get ... vrf nosuch: %q, %v; want Invalid VRF", stage, out, err)
		}
	}
	m0 := e.scrape()
	check("start")
	// Per-VRF counters: each VRF forwarded its customer's 3 pings (and
	// their 3 replies from the uplink); red dropped one as unreachable.
	m := e.scrape()
	delta := func(name string, labels ...string) float64 { return m.Sum(name, labels...) - m0.Sum(name, labels...) }
	if r, b := delta(metricVRFForwarded, "vrf", "red"), delta(metricVRFForwarded, "vrf", "blue"); r != 6 || b != 6 {
		t.Errorf("netfwd_vrf_forwarded_total: red %v, blue %v; want 6 each", r, b)
	}
	if r, b := delta("netfwd_vrf_l3_drops_total", "vrf", "red", "reason", "unreachable"), delta("netfwd_vrf_l3_drops_total", "vrf", "blue"); r != 1 || b != 0 {
		t.Errorf("netfwd_vrf_l3_drops_total: red unreachable %v, blue (all) %v; want 1 and 0", r, b)
	}

	// ctl makes a third VRF and moves customer B (both its ports) into
	// it, through the journal: its traffic still reaches s2 after a hot
	// restart, from table 30 (its default route added with `vrf green`);
	// moved back, it is blue's again.
	e.ctl("link add green type vrf table 30", "link set eth2 master green", "link set eth4 vrf green",
		"route add default via 192.0.2.2 dev eth4 vrf green") // table 30, by the VRF's name
	green := func(stage string) {
		t.Helper()
		pingVia("c2", "s2")
		pingVia("c1", "s1")
		if got := e.ctl("route show vrf green"); !strings.Contains(got, "10.0.0.0/24 dev eth2") || !strings.Contains(got, "192.0.2.0/24 dev eth4") ||
			strings.Contains(got, "local ") || strings.Contains(got, "broadcast ") {
			t.Fatalf("%s: vrf green (table 30) lacks the moved ports' connected routes, or shows local ones:\n%s", stage, got)
		}
		want := "Name              Table\n-----------------------\nblue                20\ngreen               30\nred                 10\n"
		if got := e.ctl("vrf show"); got != want {
			t.Fatalf("%s: vrf show:\n%s\nwant\n%s", stage, got, want)
		}
		if got := e.ctl("route show table 20"); strings.Contains(got, "10.0.0.0/24") {
			t.Fatalf("%s: blue's table kept c2's subnet:\n%s", stage, got)
		}
	}
	green("in green")
	e.hotRestart()
	green("after the hot restart")
	e.ctl("link set eth2 master blue", "link set eth4 master blue", "link del green")
	check("back in blue")
}
