package l3

import (
	"bytes"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/netfwd/netfwd/wire"
)

func TestBuildICMPError(t *testing.T) {
	orig, _ := wire.ParseIPv4(udpPacket(t, "192.0.2.10", "198.51.100.1", 1, 1200))
	buf := make([]byte, wire.ICMPErrorMaxSize)
	n := buildICMPError(buf, orig, wire.ICMPDestUnreach, wire.ICMPCodeFragNeeded, 1400, 0x0a000001)
	if n != wire.ICMPErrorMaxSize {
		t.Fatalf("error packet is %d bytes, want the 576 cap", n)
	}
	p := gopacket.NewPacket(buf[:n], layers.LayerTypeIPv4, gopacket.Default)
	ip := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	icmp := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	if !ip.SrcIP.Equal(net.IP{10, 0, 0, 1}) || !ip.DstIP.Equal(net.IP{192, 0, 2, 10}) || ip.TTL != 64 || ip.TOS&0xc0 != 0xc0 {
		t.Fatalf("ip header %+v", ip)
	}
	if icmp.TypeCode != layers.CreateICMPv4TypeCode(3, 4) || icmp.Seq != 1400 {
		t.Fatalf("icmp %v mtu %d", icmp.TypeCode, icmp.Seq)
	}
	if wire.Checksum(buf[20:n]) != 0 || wire.Checksum(buf[:20]) != 0 {
		t.Fatal("checksums")
	}
	if !bytes.Equal(icmp.Payload, orig[:n-28]) {
		t.Fatal("quote is not the start of the original datagram")
	}
}

func TestICMPErrorAllowed(t *testing.T) {
	ok, _ := wire.ParseIPv4(udpPacket(t, "192.0.2.10", "198.51.100.1", 1, 10))
	if !icmpErrorAllowed(ok, false, false) {
		t.Fatal("plain unicast refused")
	}
	for name, c := range map[string]struct {
		p            []byte
		l2, dstBcast bool
	}{
		"l2 broadcast": {udpPacket(t, "192.0.2.10", "198.51.100.1", 1, 10), true, false},
		"directed bc":  {udpPacket(t, "192.0.2.10", "198.51.100.255", 1, 10), false, true},
		"multicast":    {udpPacket(t, "192.0.2.10", "224.0.0.5", 1, 10), false, false},
		"src zero":     {udpPacket(t, "0.0.0.0", "198.51.100.1", 1, 10), false, false},
		"src loop":     {udpPacket(t, "127.0.0.1", "198.51.100.1", 1, 10), false, false},
		"non-first":    {mutate16(udpPacket(t, "192.0.2.10", "198.51.100.1", 1, 10), 6, 0x0001), false, false},
	} {
		h := wire.IPv4(c.p)
		h.SetChecksum(0)
		h.SetChecksum(wire.Checksum(h[:20]))
		if icmpErrorAllowed(h, c.l2, c.dstBcast) {
			t.Errorf("%s: allowed", name)
		}
	}
	// An ICMP error is never answered with an error; an echo request is.
	buf := make([]byte, wire.ICMPErrorMaxSize)
	n := buildICMPError(buf, ok, wire.ICMPTimeExceeded, 0, 0, 0x0a000001)
	if icmpErrorAllowed(wire.IPv4(buf[:n]), false, false) {
		t.Error("error about an error allowed")
	}
}

func TestEchoReply(t *testing.T) {
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolICMPv4,
		SrcIP: net.IP{192, 0, 2, 10}, DstIP: net.IP{10, 0, 0, 1}}
	echo := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0), Id: 7, Seq: 3}
	b := gopacket.NewSerializeBuffer()
	gopacket.SerializeLayers(b, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ip, echo, gopacket.Payload("hello"))
	req, r := wire.ParseIPv4(b.Bytes())
	if r != wire.IPv4OK {
		t.Fatal(r)
	}
	out := make([]byte, len(req))
	n := buildEchoReply(out, req)
	p := gopacket.NewPacket(out[:n], layers.LayerTypeIPv4, gopacket.Default)
	rip := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	ricmp := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	if !rip.SrcIP.Equal(ip.DstIP) || !rip.DstIP.Equal(ip.SrcIP) || ricmp.TypeCode.Type() != 0 || ricmp.Id != 7 || ricmp.Seq != 3 || string(ricmp.Payload) != "hello" {
		t.Fatalf("reply %+v %+v", rip, ricmp)
	}
	if wire.Checksum(out[20:n]) != 0 {
		t.Fatal("icmp checksum")
	}
}

// Linux's budgets: a burst of 6 per destination, then one per second; 50
// globally, then 1000 per second; fragmentation-needed is never limited.
func TestICMPRateLimit(t *testing.T) {
	l := newICMPLimiter(RateLimitConfig{}, 1)
	now := int64(1e12)
	sent := 0
	for range 100 {
		if l.allow(wire.ICMPTimeExceeded, 0, 0xc0000201, now) {
			sent++
		}
	}
	if sent != 6 {
		t.Fatalf("burst to one destination: %d, want 6", sent)
	}
	if l.allow(wire.ICMPTimeExceeded, 0, 0xc0000201, now+900e6) {
		t.Fatal("allowed again before a second")
	}
	if !l.allow(wire.ICMPTimeExceeded, 0, 0xc0000201, now+1001e6) {
		t.Fatal("not allowed after a second")
	}
	for i := range 1000 {
		if !l.allow(wire.ICMPDestUnreach, wire.ICMPCodeFragNeeded, 0xc0000201, now+1001e6) {
			t.Fatalf("frag needed limited at %d", i)
		}
	}
	// Many destinations: the global budget (50 burst) caps them.
	l = newICMPLimiter(RateLimitConfig{}, 2)
	sent = 0
	for d := range wire.Addr4(10000) {
		if l.allow(wire.ICMPDestUnreach, wire.ICMPCodeHostUnreach, 0x0a000000+d, now) {
			sent++
		}
	}
	if sent != 50 {
		t.Fatalf("global burst: %d, want 50", sent)
	}
	sent = 0
	for ms := range int64(1000) { // one second later, spread over a second
		if l.allow(wire.ICMPDestUnreach, wire.ICMPCodeHostUnreach, 0x0b000000+wire.Addr4(ms), now+1e9+ms*1e6) {
			sent++
		}
	}
	if sent < 990 || sent > 1000 {
		t.Fatalf("global rate: %d in a second, want about 1000", sent)
	}
}
