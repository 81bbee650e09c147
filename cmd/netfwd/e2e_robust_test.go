package main

// End-to-end: what the daemon does with bad input and what it tells about
// itself. Malformed frames are injected with a raw socket on a host's
// link; the metrics endpoint is scraped before and after traffic.

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/lab"
	"github.com/netfwd/netfwd/wire"
)

var h1MAC = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x10, 0x11}

// udpToH3 is a valid 60-byte frame from h1 to h3 through the router, for
// the malformed cases to break one field of.
func udpToH3() []byte {
	return lab.UDPFrame(lab.BridgeMAC, h1MAC, 0, h1IP, h3IP, 64, 1000, 9, make([]byte, 18))
}

// fixIPChecksum recomputes the IPv4 header checksum of an untagged frame
// (over 20 bytes whatever the IHL says).
func fixIPChecksum(f []byte) []byte {
	ip := f[14:34]
	binary.BigEndian.PutUint16(ip[10:], 0)
	binary.BigEndian.PutUint16(ip[10:], wire.Checksum(ip))
	return f
}

// TestE2EMalformedFrames: each kind of broken frame is dropped and counted
// under its own reason, exactly as many times as it was sent (each kind a
// different number of times, so a frame counted under the wrong reason
// shows); a burst of random garbage changes nothing either; the daemon
// keeps running and forwarding.
func TestE2EMalformedFrames(t *testing.T) {
	e := newE2E(t, lab.Standard(), nil)
	e.pingOK("h1", h3IP, 63)
	inj := e.injector("h1")
	cases := []struct {
		reason string
		metric string
		n      int
		frame  func() []byte
	}{
		{"ip_too_short", metricL3Drops, 3, func() []byte { return udpToH3()[:14+10] }}, // a runt: 24 bytes on the wire
		{"ip_checksum", metricL3Drops, 4, func() []byte { f := udpToH3(); f[24] ^= 0x5a; return f }},
		{"ip_header_len", metricL3Drops, 5, func() []byte { f := udpToH3(); f[14] = 0x44; return fixIPChecksum(f) }},
		{"ip_version", metricL3Drops, 6, func() []byte { f := udpToH3(); f[14] = 0x65; return fixIPChecksum(f) }},
		{"ip_total_len", metricL3Drops, 7, func() []byte {
			f := udpToH3()
			binary.BigEndian.PutUint16(f[16:], 200) // more than the frame holds
			return fixIPChecksum(f)
		}},
		{"ethertype", metricL3Drops, 8, func() []byte { f := udpToH3(); binary.BigEndian.PutUint16(f[12:], 0x88b5); return f }},
		{"arp", metricL3Drops, 9, func() []byte {
			return lab.ARPFrame(1, lab.BridgeMAC, h1MAC, 0, h1MAC, h1IP, nil, gw10)[:14+10] // truncated ARP
		}},
		{"invalid_source", metricL2Drops, 2, func() []byte {
			f := udpToH3()
			copy(f[6:12], []byte{0x01, 0x00, 0x5e, 0x00, 0x00, 0x01}) // multicast source MAC
			return f
		}},
	}
	before := e.scrape()
	rx0 := before.Sum(metricPortRxPackets, "port", "eth1")
	total := 0
	for _, c := range cases {
		for range c.n {
			if err := inj.Send(c.frame()); err != nil {
				t.Fatalf("%s: %v", c.reason, err)
			}
		}
		total += c.n
	}
	ok, _ := eventually(3*time.Second, func() (bool, string) {
		return e.scrape().Sum(metricPortRxPackets, "port", "eth1")-rx0 >= float64(total), ""
	})
	if !ok {
		t.Errorf("%s{port=eth1} did not count the %d injected frames", metricPortRxPackets, total)
	}
	time.Sleep(100 * time.Millisecond)
	after := e.scrape()
	for _, c := range cases {
		got := after.Sum(c.metric, "reason", c.reason) - before.Sum(c.metric, "reason", c.reason)
		if got != float64(c.n) {
			t.Errorf("%s{reason=%q} moved by %v, want %d", c.metric, c.reason, got, c.n)
		}
	}
	if !e.alive() {
		t.Fatal("the daemon exited")
	}
	e.pingOK("h1", h3IP, 63)

	// Random garbage: 5000 frames of 14-300 random bytes, to the router's
	// MAC, to random unicast MACs and to broadcast, as fast as they go.
	r := rand.New(rand.NewPCG(1, 2))
	var batch [][]byte
	for i := range 5000 {
		f := make([]byte, 14+r.IntN(287))
		for j := range f {
			f[j] = byte(r.Uint32())
		}
		switch i % 3 {
		case 0:
			copy(f, lab.BridgeMAC)
		case 1:
			f[0] &^= 1 // unicast, unknown: flooded in VLAN 10
		case 2:
			copy(f, lab.Broadcast)
		}
		f[6] &^= 1 // a unicast source, or the bridge drops it before parsing
		if i%2 == 0 {
			binary.BigEndian.PutUint16(f[12:], []uint16{0x0800, 0x0806, 0x8100}[r.IntN(3)])
		}
		batch = append(batch, f)
		if len(batch) == 64 {
			if err := inj.Send(batch...); err != nil {
				t.Logf("garbage: %v", err) // the kernel may refuse a few
			}
			batch = batch[:0]
		}
	}
	time.Sleep(200 * time.Millisecond)
	if !e.alive() {
		t.Fatal("the daemon exited on random garbage")
	}
	e.pingOK("h1", h3IP, 63)
	e.pingOK("h3", lab.InternetIP, 63)
}

// TestE2EForwardedCountsHeldPackets: the first pings to a host the router
// has not resolved wait for ARP; forwarded still counts every routed frame
// (three requests, three replies: 6), and the held ones show as queued and
// released.
func TestE2EForwardedCountsHeldPackets(t *testing.T) {
	e := newE2E(t, lab.Standard(), nil)
	before := e.scrape()
	const n = 3
	r := e.ping("h1", h3IP, lab.PingOptions{Count: n, Interval: 100 * time.Millisecond})
	if r.Received != n {
		t.Fatalf("%d of %d replies\n%s", r.Received, n, r.Output)
	}
	after := e.scrape()
	delta := func(name string) float64 { return after.Sum(name) - before.Sum(name) }
	if d := delta(metricForwarded); d != 2*n {
		t.Errorf("%s moved by %v, want %d (every routed frame, held ones included)", metricForwarded, d, 2*n)
	}
	if q, rel, exp := delta(metricARPQueued), delta(metricARPReleased), delta(metricARPExpired); q < 1 || rel != q || exp != 0 {
		t.Errorf("held for ARP: queued %v, released %v, expired %v; want at least 1 queued, all released", q, rel, exp)
	}
}

// TestE2EMetrics: counters move with traffic (per port, forwarded, ICMP),
// gauges say what the tables hold, pprof answers on the same listener.
func TestE2EMetrics(t *testing.T) {
	e := newE2E(t, lab.Standard(), nil)
	e.pingOK("h1", h3IP, 63) // learn and resolve first
	before := e.scrape()
	const n = 20
	r := e.ping("h1", h3IP, lab.PingOptions{Count: n, Interval: 20 * time.Millisecond})
	if r.Received != n {
		t.Fatalf("%d of %d replies\n%s", r.Received, n, r.Output)
	}
	after := e.scrape()
	delta := func(name string, labels ...string) float64 {
		return after.Sum(name, labels...) - before.Sum(name, labels...)
	}
	// Each echo request enters on eth1 and leaves on eth3, each reply the
	// other way: at least n each (ARP refreshes may add a few).
	for _, c := range []struct {
		name, port string
	}{
		{metricPortRxPackets, "eth1"}, {metricPortTxPackets, "eth1"},
		{metricPortRxPackets, "eth3"}, {metricPortTxPackets, "eth3"},
	} {
		if d := delta(c.name, "port", c.port); d < n || d > n+6 {
			t.Errorf("%s{port=%q} moved by %v, want %d (+ at most 6 ARP)", c.name, c.port, d, n)
		}
	}
	if d := delta(metricPortRxBytes, "port", "eth1"); d < n*98 {
		t.Errorf("%s{port=eth1} moved by %v, want at least %d", metricPortRxBytes, d, n*98)
	}
	if d := delta(metricForwarded); d < 2*n || d > 2*n+4 {
		t.Errorf("%s moved by %v, want %d", metricForwarded, d, 2*n)
	}
	if d := delta(metricICMPSent); d != 0 {
		t.Errorf("%s moved by %v with no errors due", metricICMPSent, d)
	}
	// Tables: h1 and h3 learned in the FDB (h2 and the isp sent nothing
	// bridged), the bridge's own local entries (VID 0, 10, 20), h1 and h3
	// resolved, and the routes the config makes (per table).
	if v := after.Sum(metricFDBEntries, "bridge", "br0", "type", "learned"); v != 2 {
		t.Errorf("%s{type=learned} = %v, want 2 (h1, h3)", metricFDBEntries, v)
	}
	if v := after.Sum(metricFDBEntries, "bridge", "br0", "type", "local"); v != 3 {
		t.Errorf("%s{type=local} = %v, want 3 (br0 in VLAN 0, 10, 20)", metricFDBEntries, v)
	}
	if v := after.Sum(metricNeighEntries); v != 2 {
		t.Errorf("%s = %v, want 2 (h1, h3)", metricNeighEntries, v)
	}
	// main: 3 connected + default + blackhole + unreachable + prohibit;
	// local: 3 local + 3 broadcast.
	if v := after.Sum(metricRoutes, "table", "main"); v != 7 {
		t.Errorf("%s{table=main} = %v, want 7", metricRoutes, v)
	}
	if v := after.Sum(metricRoutes, "table", "local"); v != 6 {
		t.Errorf("%s{table=local} = %v, want 6", metricRoutes, v)
	}
	// Profiles are not for every local user: not on the metrics listener
	// (--pprof opens them on a listener of their own).
	resp, err := e.metrics.Get("http://" + metricsAddr + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/debug/pprof/ on the metrics listener: %s, want 404", resp.Status)
	}
}
