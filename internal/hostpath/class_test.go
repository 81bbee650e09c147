package hostpath

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"golang.org/x/net/bpf"

	"github.com/netfwd/netfwd/internal/pktio/afpacket"
	"github.com/netfwd/netfwd/wire"
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

// randomControlFrame builds a frame around the table's protocols and ports:
// untagged or with one or two 802.1Q/802.1ad tags; ARP, IPv4 (options,
// fragments, other versions, IHL below 5), IPv6 with ICMPv6 types around
// ND's, or another EtherType; sometimes cut short anywhere.
func randomControlFrame(r *rand.Rand, protos []uint8, ports []uint16) []byte {
	f := make([]byte, 12, 160)
	for i := range f {
		f[i] = byte(r.Uint32())
	}
	for range []int{0, 0, 0, 1, 1, 2}[r.IntN(6)] {
		tpid := []uint16{wire.EtherTypeVLAN, wire.EtherTypeQinQ}[r.IntN(2)]
		f = binary.BigEndian.AppendUint16(f, tpid)
		f = binary.BigEndian.AppendUint16(f, uint16(r.IntN(1<<16)))
	}
	et := []uint16{wire.EtherTypeIPv4, wire.EtherTypeIPv4, wire.EtherTypeIPv4, wire.EtherTypeIPv4,
		wire.EtherTypeARP, wire.EtherTypeIPv6, wire.EtherTypeIPv6, 0x88cc}[r.IntN(8)]
	f = binary.BigEndian.AppendUint16(f, et)
	var p []byte
	switch et {
	case wire.EtherTypeIPv4:
		ihl := 5
		switch r.IntN(8) {
		case 0:
			ihl = 6 + r.IntN(10) // options
		case 1:
			ihl = r.IntN(5) // invalid: ports read inside the header
		}
		p = make([]byte, max(ihl*4, 20)+8+r.IntN(20))
		for i := range p {
			p[i] = byte(r.Uint32())
		}
		p[0] = 4<<4 | byte(ihl)
		if r.IntN(16) == 0 {
			p[0] = byte(r.IntN(16))<<4 | byte(ihl)
		}
		frag := uint16(0)
		switch r.IntN(8) {
		case 0:
			frag = wire.IPv4FlagMF // a first fragment: ports are there
		case 1:
			frag = uint16(1 + r.IntN(wire.IPv4OffsetMask))
		}
		binary.BigEndian.PutUint16(p[6:], frag|uint16(r.IntN(2))*wire.IPv4FlagDF)
		p[9] = protos[r.IntN(len(protos))]
		binary.BigEndian.PutUint16(p[ihl*4:], ports[r.IntN(len(ports))])
		binary.BigEndian.PutUint16(p[ihl*4+2:], ports[r.IntN(len(ports))])
	case wire.EtherTypeIPv6:
		p = make([]byte, 48)
		p[0] = 0x60
		p[6] = []uint8{wire.ProtoICMPv6, wire.ProtoICMPv6, wire.ProtoTCP, wire.ProtoOSPF}[r.IntN(4)]
		p[40] = uint8(130 + r.IntN(10))
	default:
		p = make([]byte, 28+r.IntN(30))
		for i := range p {
			p[i] = byte(r.Uint32())
		}
	}
	f = append(f, p...)
	if len(f) < 60 && r.IntN(2) == 0 {
		f = append(f, make([]byte, 60-len(f))...) // padded as on the wire
	}
	if r.IntN(8) == 0 {
		f = f[:r.IntN(len(f)+1)]
	}
	return f
}

// The control-ring socket filter (cBPF from wire.ControlProtos, run in
// x/net/bpf's VM) and Classify (wire.MatchControl over the same table)
// agree on every frame: the filter takes a frame to the control ring
// exactly when Classify puts it in a control class (ClassNeigh or
// ClassRouting) by an entry the filter does not leave to the host path
// (HostOnly: IPv6 ND). Classify is given the network header as the filter
// sees it: behind at most one tag. DataFilter takes the rest but for frames
// too short for what the program reads, which both refuse.
func TestClassifyAgreesWithControlFilter(t *testing.T) {
	vm := func(raw []bpf.RawInstruction) *bpf.VM {
		ins, ok := bpf.Disassemble(raw)
		if !ok {
			t.Fatal("filter does not disassemble")
		}
		v, err := bpf.NewVM(ins)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	ctl, data := vm(afpacket.ControlFilter()), vm(afpacket.DataFilter())
	run := func(v *bpf.VM, f []byte) int {
		n, err := v.Run(f)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	protos := []uint8{wire.ProtoICMP, wire.ProtoTCP, wire.ProtoUDP, 47, 0}
	ports := []uint16{0, 22, 53, 1790, 65535}
	for _, c := range wire.ControlProtos {
		if c.IPProto != 0 {
			protos = append(protos, c.IPProto)
		}
		if c.Port != 0 {
			ports = append(ports, c.Port, c.Port+1)
		}
	}
	r := rand.New(rand.NewPCG(11, 12))
	matched := map[string]int{}
	var classes [NumClasses]int
	refusedByBoth := 0
	for i := range 50000 {
		f := randomControlFrame(r, protos, ports)
		l3 := 14
		if len(f) >= 14 {
			if et := binary.BigEndian.Uint16(f[12:]); et == wire.EtherTypeVLAN || et == wire.EtherTypeQinQ {
				l3 = 18
			}
		}
		class := Classify(f, l3)
		m := wire.MatchControl(f, l3)
		hostOnly := m != nil && m.HostOnly
		c, d := run(ctl, f), run(data, f)
		if want := class != ClassOther && !hostOnly; (c != 0) != want {
			t.Fatalf("frame %d %x (l3 %d): control filter %d, Classify %v (entry %+v)", i, f, l3, c, class, m)
		}
		switch {
		case c == 0 && d == 0:
			refusedByBoth++
		case (c != 0) == (d != 0):
			t.Fatalf("frame %d %x: control filter %d, data filter %d", i, f, c, d)
		}
		classes[class]++
		if m != nil {
			matched[m.Name]++
		}
	}
	for _, c := range wire.ControlProtos {
		if matched[c.Name] < 20 {
			t.Errorf("entry %s matched only %d frames", c.Name, matched[c.Name])
		}
	}
	if classes[ClassNeigh] < 1000 || classes[ClassRouting] < 1000 || classes[ClassOther] < 1000 || refusedByBoth > 50000/20 {
		t.Errorf("classes %v, %d refused by both filters", classes, refusedByBoth)
	}
	t.Logf("classes %v, %d refused by both filters, entries %v", classes, refusedByBoth, matched)
}

var sinkClass Class

// go test -bench Classify ./internal/hostpath: a routing frame (BFD), ARP,
// and TCP to SSH (no entry: the whole IPv4 path), per punted frame.
func BenchmarkClassify(b *testing.B) {
	a, c := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	m := [6]byte{2, 0, 0, 0, 0, 1}
	frames := [][]byte{udpFrame(b, m, m, 0, a, c, 49152, 3784, []byte("x")), arpFrame(b, 1, m, m, 0, a, c, [6]byte{}), tcpFrame(b, a, c, 40000, 22)}
	for _, f := range frames {
		b.Run(Classify(f, 14).String(), func(b *testing.B) {
			for b.Loop() {
				sinkClass += Classify(f, 14)
			}
		})
	}
}
