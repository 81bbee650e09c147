package hostpath

import (
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

func TestClassify(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	m1, m2 := [6]byte{2, 0, 0, 0, 0, 1}, [6]byte{2, 0, 0, 0, 0, 2}
	proto := func(p layers.IPProtocol) []byte {
		return serialize(t, append(eth(m1, m2, 0, layers.EthernetTypeIPv4), ipv4(a, b, p), gopacket.Payload("12345678"))...)
	}
	fragment := udpFrame(t, m1, m2, 0, b, a, 1000, 179, []byte("x"))
	fragment[14+7] = 10 // fragment offset != 0: the "ports" are payload
	ip6ns := serialize(t, append(eth(m1, m2, 0, layers.EthernetTypeIPv6),
		&layers.IPv6{Version: 6, NextHeader: layers.IPProtocolICMPv6, HopLimit: 255, SrcIP: ip(netip.MustParseAddr("fe80::1")), DstIP: ip(netip.MustParseAddr("ff02::1:ff00:1"))},
		gopacket.Payload([]byte{135, 0, 0, 0, 0, 0, 0, 0}))...)
	cases := []struct {
		name  string
		frame []byte
		l3    int
		want  Class
	}{
		{"arp", arpFrame(t, 1, m1, m2, 0, b, a, [6]byte{}), 14, ClassNeigh},
		{"arp tagged", arpFrame(t, 1, m1, m2, 10, b, a, [6]byte{}), 18, ClassNeigh},
		{"bgp to router", tcpFrame(t, b, a, 40000, 179), 14, ClassRouting},
		{"bgp from router's port", tcpFrame(t, b, a, 179, 40000), 14, ClassRouting},
		{"ssh", tcpFrame(t, b, a, 40000, 22), 14, ClassOther},
		{"bfd", udpFrame(t, m1, m2, 0, b, a, 49152, 3784, []byte("x")), 14, ClassRouting},
		{"bfd multihop", udpFrame(t, m1, m2, 0, b, a, 49152, 4784, []byte("x")), 14, ClassRouting},
		{"rip", udpFrame(t, m1, m2, 0, b, a, 520, 520, []byte("x")), 14, ClassRouting},
		{"dns", udpFrame(t, m1, m2, 0, b, a, 5353, 53, []byte("x")), 14, ClassOther},
		{"udp tagged", udpFrame(t, m1, m2, 7, b, a, 49152, 3784, []byte("x")), 18, ClassRouting},
		{"ospf", proto(89), 14, ClassRouting},
		{"vrrp", proto(112), 14, ClassRouting},
		{"igmp", proto(2), 14, ClassRouting},
		{"pim", proto(103), 14, ClassRouting},
		{"gre", proto(47), 14, ClassOther},
		{"echo", echoFrame(t, m1, m2, b, a, 1, 1), 14, ClassOther},
		{"later fragment", fragment, 14, ClassOther},
		{"ipv6 nd", ip6ns, 14, ClassNeigh},
		{"short", []byte{1, 2, 3}, 14, ClassOther},
		{"bad l3", arpFrame(t, 1, m1, m2, 0, b, a, [6]byte{}), 1, ClassOther},
	}
	for _, c := range cases {
		if got := Classify(c.frame, c.l3); got != c.want {
			t.Errorf("%s: class %v, want %v", c.name, got, c.want)
		}
		if len(c.frame) >= 14 && c.l3 >= 14 {
			if got := l3Offset(c.frame); got != c.l3 {
				t.Errorf("%s: l3Offset %d, want %d", c.name, got, c.l3)
			}
		}
	}
	for c := range NumClasses {
		if p, ok := ParseClass(c.String()); !ok || p != c {
			t.Errorf("ParseClass(%q) = %v, %v", c.String(), p, ok)
		}
	}
}

// Malformed input never panics.
func FuzzClassify(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 8, 0, 0x45}, 14)
	f.Fuzz(func(t *testing.T, b []byte, l3 int) {
		Classify(b, l3)
		l3Offset(b)
		isARPReply(b)
	})
}
