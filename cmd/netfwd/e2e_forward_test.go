package main

// End-to-end: forwarding between real Linux hosts (docs/e2e.md says what
// each test proves). The standard lab network (internal/lab.Standard):
// h1, h2 on VLAN 10, h3 on VLAN 20, the isp on the routed uplink with
// 198.51.100.1 behind it.

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/lab"
	"github.com/netfwd/netfwd/internal/testenv"
)

var (
	h1IP = netip.MustParseAddr("10.0.10.11")
	h2IP = netip.MustParseAddr("10.0.10.12")
	h3IP = netip.MustParseAddr("10.0.20.13")
	gw10 = lab.VLAN10Addr.Addr()
	gw20 = lab.VLAN20Addr.Addr()
)

// TestE2EPing: bridged within a VLAN (TTL untouched), routed between VLANs
// and through the uplink in both directions (TTL decremented once), and the
// router's own addresses answer.
func TestE2EPing(t *testing.T) {
	pingStandard(newE2E(t, lab.Standard(), nil))
}

// pingStandard pings across the standard lab: bridged, routed, the uplink
// and the router's own addresses.
func pingStandard(e *e2e) {
	for _, c := range []struct {
		from string
		dst  netip.Addr
		ttl  int
	}{
		{"h1", h2IP, 64},                              // same VLAN: bridged, not routed
		{"h2", h1IP, 64},                              //
		{"h1", h3IP, 63},                              // VLAN 10 -> VLAN 20: one routed hop
		{"h3", h1IP, 63},                              //
		{"h1", lab.InternetIP, 63},                    // out of the uplink, and back
		{"h3", lab.InternetIP, 63},                    //
		{"isp", h3IP, 63},                             // in from the uplink
		{"h1", gw10, 64},                              // the router itself
		{"h1", gw20, 64},                              // the router's address on another VLAN
		{"h3", lab.UplinkAddr.Addr(), 64},             // and on the uplink
		{"isp", netip.MustParseAddr("10.0.10.1"), 64}, //
	} {
		e.pingOK(c.from, c.dst, c.ttl)
	}
}

// TestE2EARP: ARP resolution in both directions. The router resolves a host
// it has never heard from (traffic from the uplink to h3), h3 learns the
// router from that request; h1 resolves its gateway. Both neighbour tables
// hold the other side's MAC, and the router answers only for its own
// addresses.
func TestE2EARP(t *testing.T) {
	e := newE2E(t, lab.Standard(), nil)
	if out := e.ctl("neigh show"); strings.Contains(out, h3IP.String()) {
		t.Fatalf("router knows h3 before any traffic:\n%s", out)
	}
	// The router asks for h3.
	e.pingOK("isp", h3IP, 63)
	routerHas := func(ip netip.Addr, dev, mac string) {
		t.Helper()
		out := e.ctl("neigh show")
		want := fmt.Sprintf("%s dev %s lladdr %s ", ip, dev, mac)
		if !strings.Contains(out, want) {
			t.Errorf("router neigh show lacks %q:\n%s", want, out)
		}
	}
	routerHas(h3IP, "vlan20", "02:00:00:00:20:13")
	routerHas(lab.ISPAddr.Addr(), "eth0", "02:00:00:00:e0:fe")
	hostHas := func(host string, ip netip.Addr, mac string) {
		t.Helper()
		out, err := e.net.Exec(e.host(host).NS, "ip", "neigh", "show", ip.String())
		if err != nil || !strings.Contains(out, "lladdr "+mac) {
			t.Errorf("%s: ip neigh show %s: want lladdr %s, got %q (%v)", host, ip, mac, out, err)
		}
	}
	hostHas("h3", gw20, lab.BridgeMAC.String())
	hostHas("isp", lab.UplinkAddr.Addr(), lab.UplinkMAC.String())
	// h1 asks for its gateway.
	e.pingOK("h1", gw10, 64)
	hostHas("h1", gw10, lab.BridgeMAC.String())
	routerHas(h1IP, "vlan10", "02:00:00:00:10:11")
	// arping: the router answers for its address with the VLAN interface's
	// MAC, and for nobody else's (no proxy ARP).
	if !testenv.Have(t, "arping") {
		return
	}
	out, _ := e.net.Exec(e.host("h1").NS, "arping", "-c", "2", "-w", "3", "-I", "eth0", gw10.String())
	if n := arpingReplies(out, gw10.String(), lab.BridgeMAC.String()); n != 2 {
		t.Errorf("arping 10.0.10.1: %d replies from %s, want 2:\n%s", n, lab.BridgeMAC, out)
	}
	out, _ = e.net.Exec(e.host("h1").NS, "arping", "-c", "2", "-w", "2", "-I", "eth0", "10.0.10.99")
	if n := arpingReplies(out, "10.0.10.99", ""); n != 0 {
		t.Errorf("arping 10.0.10.99 (nobody's address) got %d replies:\n%s", n, out)
	}
}

// TestE2ETTLAndUnreachable: the ICMP errors a sending host sees, from the
// router's address on the sender's side, by kind, and the router's ICMP
// counters that moved with them.
func TestE2ETTLAndUnreachable(t *testing.T) {
	e := newE2E(t, lab.Standard(), nil)
	e.pingOK("h1", lab.InternetIP, 63) // resolve everything first
	before := e.scrape()
	one := lab.PingOptions{Count: 1}
	expect := func(r lab.PingResult, kind string) {
		t.Helper()
		if r.Received != 0 || len(r.Errors) != 1 || r.ErrorsFrom(gw10, kind) != 1 {
			t.Errorf("ping %s (ttl %d): want exactly one %s from %s, got %d replies, errors %+v\n%s",
				r.Dst, r.RequestedTTL, kind, gw10, r.Received, r.Errors, r.Output)
		}
	}
	ttl1 := one
	ttl1.TTL = 1
	expect(e.ping("h1", lab.InternetIP, ttl1), lab.KindTTLExceeded)
	ttl2 := one
	ttl2.TTL = 2
	if r := e.ping("h1", lab.InternetIP, ttl2); r.Received != 1 || r.ReplyFrom != lab.InternetIP {
		t.Errorf("ping -t 2 198.51.100.1: want the reply (two hops), got %d replies, errors %+v\n%s", r.Received, r.Errors, r.Output)
	}
	expect(e.ping("h1", lab.UnreachIP, one), lab.KindHostUnreachable)
	expect(e.ping("h1", lab.ProhibitIP, one), lab.KindProhibited)
	if r := e.ping("h1", lab.BlackholeIP, one); r.Received != 0 || len(r.Errors) != 0 {
		t.Errorf("ping 10.66.0.1 (blackhole): want silence, got %d replies, errors %+v", r.Received, r.Errors)
	}
	// A neighbour that never answers: host unreachable after ARP gives up
	// (3 requests, 1 s apart).
	wait := lab.PingOptions{Count: 1, Wait: 6 * time.Second}
	expect(e.ping("h1", netip.MustParseAddr("10.0.20.99"), wait), lab.KindHostUnreachable)

	after := e.scrape()
	for kind, want := range map[string]float64{
		"ttl_exceeded": 1, "host_unreachable": 2, "admin_prohibited": 1, "net_unreachable": 0,
	} {
		got := after.Sum(metricICMPSent, "type", kind) - before.Sum(metricICMPSent, "type", kind)
		if got != want {
			t.Errorf("%s{type=%q} moved by %v, want %v", metricICMPSent, kind, got, want)
		}
	}
}

// arpingReplies counts the replies from ip (at mac, unless empty) in the
// output of either arping: iputils ("Unicast reply from 10.0.10.1
// [02:00:00:00:0B:01]") or Debian's arping package ("42 bytes from
// 02:00:00:00:0b:01 (10.0.10.1): index=0").
func arpingReplies(out, ip, mac string) int {
	n := 0
	for _, line := range strings.Split(strings.ToLower(out), "\n") {
		iputils := strings.Contains(line, "reply from "+ip+" [")
		habets := strings.Contains(line, " bytes from ") && strings.Contains(line, "("+ip+")")
		if (iputils || habets) && strings.Contains(line, strings.ToLower(mac)) {
			n++
		}
	}
	return n
}
