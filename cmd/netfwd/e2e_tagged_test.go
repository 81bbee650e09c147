package main

// End-to-end: tagged and untagged hosts on one bridge. This kernel has no
// 802.1Q devices, so the tagged host is emulated (internal/lab.RawHost): an
// AF_PACKET socket on the far end of a trunk port (eth4, VLANs 10 and 20
// tagged) that answers ARP and echo requests per VLAN, with tagged frames
// it builds itself, and records everything it receives. The untagged hosts
// are real Linux stacks on access ports.

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/lab"
)

var (
	trunkMAC = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x7f, 0x01}
	t10IP    = netip.MustParseAddr("10.0.10.50") // the trunk host in VLAN 10
	t20IP    = netip.MustParseAddr("10.0.20.50") // and in VLAN 20
	t20bIP   = netip.MustParseAddr("10.0.20.51") // a second address it never sends from
)

func taggedSpec() lab.Spec {
	s := lab.Standard()
	s.Trunks = []lab.TrunkSpec{{Name: "t1", Port: "eth4", VLANs: []uint16{10, 20}, MAC: trunkMAC}}
	return s
}

// TestE2ETaggedHost: a host on a trunk port reaches the router and the
// access hosts in both its VLANs; every frame it receives is tagged with
// the right VID, every frame the access hosts receive is untagged, and
// frames in a VLAN the port does not carry go nowhere.
func TestE2ETaggedHost(t *testing.T) {
	e := newE2E(t, taggedSpec(), nil)
	tr := e.net.Trunk("t1")
	th, err := lab.StartRawHost(tr.NS, tr.Iface, lab.RawHostConfig{MAC: trunkMAC, Record: true,
		Addrs: []lab.RawAddr{{VID: 10, IP: t10IP}, {VID: 20, IP: t20IP}, {VID: 20, IP: t20bIP}}})
	if err != nil {
		t.Fatal(err)
	}
	defer th.Close()
	rec3 := e.recorder("h3") // what the untagged VLAN 20 host receives

	// 1. The trunk host asks for its gateway in each VLAN: tagged replies.
	for _, c := range []struct {
		vid uint16
		src netip.Addr
		gw  netip.Addr
	}{{10, t10IP, gw10}, {20, t20IP, gw20}} {
		if err := th.Send(lab.ARPFrame(1, lab.Broadcast, trunkMAC, c.vid, trunkMAC, c.src, nil, c.gw)); err != nil {
			t.Fatal(err)
		}
		f, err := th.WaitFor(2*time.Second, func(f lab.Frame) bool {
			return f.ARP && f.ARPOp == 2 && f.ARPSPA == c.gw
		})
		if err != nil {
			t.Fatalf("VLAN %d: no ARP reply for %s: %v", c.vid, c.gw, err)
		}
		if !f.Tagged || f.TPID != 0x8100 || f.VID != c.vid || f.ARPSHA.String() != lab.BridgeMAC.String() ||
			f.Dst.String() != trunkMAC.String() || f.ARPTPA != c.src {
			t.Errorf("VLAN %d: ARP reply tagged=%v TPID %#x VID %d sender %s dst %s target %s; want 802.1Q VID %d from %s to %s/%s",
				c.vid, f.Tagged, f.TPID, f.VID, f.ARPSHA, f.Dst, f.ARPTPA, c.vid, lab.BridgeMAC, trunkMAC, c.src)
		}
	}

	// 2. Bridged in VLAN 10: h1 (untagged) pings the trunk host.
	e.pingOK("h1", t10IP, 64)
	if _, err := th.WaitFor(time.Second, func(f lab.Frame) bool {
		return f.IPv4 && f.ICMPType == 8 && f.IPSrc == h1IP && f.IPDst == t10IP
	}); err != nil {
		t.Errorf("trunk host saw no echo request from h1: %v", err)
	}

	// The trunk host's broadcasts reached the untagged VLAN 20 host
	// untagged (flooded), and not the VLAN 10 ones.
	if _, err := rec3.WaitFor(time.Second, func(f lab.Frame) bool {
		return f.ARP && f.ARPOp == 1 && f.ARPSPA == t20IP && f.ARPTPA == gw20 && !f.Tagged
	}); err != nil {
		t.Errorf("h3 did not see the trunk host's VLAN 20 ARP request flooded untagged: %v", err)
	}

	// 3. Routed from VLAN 10 into VLAN 20, tagged on the trunk. The router
	// learned 10.0.20.50 from its ARP request (as Linux does); for
	// 10.0.20.51 it has to ask, flooding the request in VLAN 20 (eth3
	// untagged, eth4 tagged).
	for _, dst := range []netip.Addr{t20IP, t20bIP} {
		e.pingOK("h1", dst, 63)
		if _, err := th.WaitFor(time.Second, func(f lab.Frame) bool {
			return f.IPv4 && f.ICMPType == 8 && f.IPSrc == h1IP && f.IPDst == dst &&
				f.TTL == 63 && f.Src.String() == lab.BridgeMAC.String() && f.Tagged && f.VID == 20
		}); err != nil {
			t.Errorf("trunk host saw no routed echo request to %s (VID 20, TTL 63, from the router's MAC): %v", dst, err)
		}
	}
	if _, err := rec3.WaitFor(time.Second, func(f lab.Frame) bool {
		return f.ARP && f.ARPOp == 1 && f.ARPTPA == t20bIP && f.ARPSPA == gw20 && !f.Tagged
	}); err != nil {
		t.Errorf("h3 did not see the router's ARP request for %s flooded untagged in VLAN 20: %v", t20bIP, err)
	}

	// 4. Bridged in VLAN 20: h3 (untagged) pings the trunk host.
	e.pingOK("h3", t20IP, 64)

	// 5. A VLAN the trunk does not carry, and a tagged frame on an access
	// port: dropped at ingress, delivered nowhere.
	before := e.scrape()
	const bogus = 7
	for range bogus {
		if err := th.Send(lab.ARPFrame(1, lab.Broadcast, trunkMAC, 30, trunkMAC, netip.MustParseAddr("10.0.30.50"), nil, netip.MustParseAddr("10.0.30.1"))); err != nil {
			t.Fatal(err)
		}
	}
	inj := e.injector("h1")
	for range bogus {
		if err := inj.Send(lab.ARPFrame(1, lab.Broadcast, net.HardwareAddr{2, 0, 0, 0, 0x10, 0x11}, 20, net.HardwareAddr{2, 0, 0, 0, 0x10, 0x11}, h1IP, nil, netip.MustParseAddr("10.0.20.77"))); err != nil {
			t.Fatal(err)
		}
	}
	ok, why := eventually(3*time.Second, func() (bool, string) {
		got := e.scrape().Sum(metricL2Drops, "reason", "vlan_ingress") - before.Sum(metricL2Drops, "reason", "vlan_ingress")
		return got == 2*bogus, "vlan_ingress drops moved by " + ftoa(got)
	})
	if !ok {
		t.Errorf("want %d vlan_ingress drops: %s", 2*bogus, why)
	}
	for _, f := range rec3.Frames() {
		if f.Tagged {
			t.Errorf("h3 (access port) received a tagged frame: VID %d %x", f.VID, f.Raw)
		}
		if f.ARP && (f.ARPTPA == netip.MustParseAddr("10.0.30.1") || f.ARPTPA == netip.MustParseAddr("10.0.20.77")) {
			t.Errorf("h3 received a frame that should have been dropped at ingress: %x", f.Raw)
		}
	}
	for _, f := range th.Frames() {
		if !f.Tagged || f.TPID != 0x8100 || (f.VID != 10 && f.VID != 20) {
			t.Errorf("trunk host received a frame not tagged 10 or 20: tagged=%v TPID %#x VID %d %x", f.Tagged, f.TPID, f.VID, f.Raw)
		}
		if f.ARP && f.ARPTPA == netip.MustParseAddr("10.0.20.77") {
			t.Errorf("a tagged frame from an access port leaked to the trunk")
		}
	}
}
