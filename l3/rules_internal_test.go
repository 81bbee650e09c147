package l3

// The flow key of rules.go field by field: the ports the kernel's flow
// dissector reads per protocol, fragments, short headers, the VRF hook.

import (
	"testing"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/wire"
)

// flowTestPacket is a 20-byte IPv4 header (no checksum: nobody checks it
// here) followed by payload.
func flowTestPacket(proto uint8, fragField uint16, tos uint8, payload ...byte) wire.IPv4 {
	h := make([]byte, 20, 20+len(payload))
	h[0], h[1], h[8], h[9] = 0x45, tos, 64, proto
	h[6], h[7] = byte(fragField>>8), byte(fragField)
	copy(h[12:], []byte{10, 0, 10, 5})
	copy(h[16:], []byte{192, 0, 2, 9})
	h = append(h, payload...)
	h[2], h[3] = byte(len(h)>>8), byte(len(h))
	return wire.IPv4(h)
}

func TestFlowRulePorts(t *testing.T) {
	ports := []byte{0x9c, 0x40, 0x00, 0x35, 0xaa, 0xbb, 0xcc, 0xdd} // 40000, 53, then 0xaabb, 0xccdd
	for _, c := range []struct {
		name         string
		proto        uint8
		frag         uint16
		payload      []byte
		sport, dport uint16
	}{
		{"tcp", wire.ProtoTCP, 0, ports, 40000, 53},
		{"udp", wire.ProtoUDP, 0, ports, 40000, 53},
		{"udplite", protoUDPLite, 0, ports, 40000, 53},
		{"dccp", protoDCCP, 0, ports, 40000, 53},
		{"sctp", protoSCTP, 0, ports, 40000, 53},
		{"esp spi", protoESP, 0, ports, 40000, 53},
		{"ah spi", protoAH, 0, ports, 0xaabb, 0xccdd},
		{"icmp", wire.ProtoICMP, 0, ports, 0, 0},
		{"gre", 47, 0, ports, 0, 0},
		{"df is no fragment", wire.ProtoUDP, wire.IPv4FlagDF, ports, 40000, 53},
		{"first fragment", wire.ProtoUDP, wire.IPv4FlagMF, ports, 0, 0},
		{"later fragment", wire.ProtoUDP, 3, ports, 0, 0},
		{"short", wire.ProtoTCP, 0, ports[:3], 0, 0},
		{"ah short", protoAH, 0, ports[:7], 0, 0},
	} {
		h := flowTestPacket(c.proto, c.frag, 0, c.payload...)
		if s, d := rulePorts(h); s != c.sport || d != c.dport {
			t.Errorf("%s: ports %d %d, want %d %d", c.name, s, d, c.sport, c.dport)
		}
	}
}

func TestFlowOutputAndVRF(t *testing.T) {
	h := flowTestPacket(wire.ProtoUDP, 0, 0xb8, 0x9c, 0x40, 0x00, 0x35)
	var k fib.Flow
	k.Mark, k.OIF, k.L3mdev = 7, 7, 7 // cleared
	outputFlow(&k, h, nil)
	want := fib.Flow{Dst: h.Dst(), Src: h.Src(), IIF: 1, TOS: 0xb8, Proto: wire.ProtoUDP, SPort: 40000, DPort: 53}
	if k != want {
		t.Fatalf("output flow %+v, want %+v", k, want)
	}
	in := &Iface{Index: 5}
	if iif, l3mdev := in.ruleInput(); iif != 5 || l3mdev != 0 {
		t.Fatalf("no VRF: iif %d l3mdev %d", iif, l3mdev)
	}
	in.VRFTable, in.VRFIndex = 1001, 9
	if iif, l3mdev := in.ruleInput(); iif != 9 || l3mdev != 1001 {
		t.Fatalf("in a VRF: iif %d l3mdev %d, want the VRF device's 9 and its table 1001", iif, l3mdev)
	}
	// An answer to a packet received in a VRF is an output lookup there:
	// oif the VRF device, its table as l3mdev, iif still lo.
	outputFlow(&k, h, in)
	want.OIF, want.L3mdev = 9, 1001
	if k != want {
		t.Fatalf("output flow in a VRF %+v, want %+v", k, want)
	}
}

// The router never hands out lo's index, and its indices are the FIB's.
func TestFlowIfIndexIsDevIndex(t *testing.T) {
	e := NewEngine(EngineOptions{})
	r := e.Router()
	for _, name := range []string{"eth0", "vlan10", "br0", "eth0", "x"} {
		i := r.IfIndex(name)
		if i == 1 || i == 0 {
			t.Fatalf("%s: index %d", name, i)
		}
		if d := r.FIB().DevIndex(name); d != i {
			t.Fatalf("%s: router index %d, FIB index %d", name, i, d)
		}
	}
	if d := r.FIB().DevIndex("lo"); d != 1 {
		t.Fatalf("lo: %d", d)
	}
}
