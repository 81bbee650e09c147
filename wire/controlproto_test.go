package wire

import (
	"encoding/binary"
	"testing"
)

// frameFor builds an untagged frame that entry c describes: the fields it
// names set, everything else zero.
func frameFor(c ControlProto, srcPort bool) []byte {
	f := make([]byte, 80)
	binary.BigEndian.PutUint16(f[12:], c.EtherType)
	p := f[EthernetHeaderLen:]
	switch c.EtherType {
	case EtherTypeIPv4:
		p[0], p[9] = 0x45, c.IPProto
		port := p[20+2:]
		if srcPort {
			port = p[20:]
		}
		binary.BigEndian.PutUint16(port, c.Port)
	case EtherTypeIPv6:
		p[0], p[6], p[40] = 0x60, c.IPProto, c.ICMPv6Type
	}
	return f
}

// Each entry is well formed and matched by the frame it describes; the
// same frame as a later fragment, with another version, cut short, or with
// the port on the other side matches as the entry says.
func TestControlProtos(t *testing.T) {
	names := map[string]bool{}
	for _, c := range ControlProtos {
		if names[c.Name] || c.Class == NotControl {
			t.Fatalf("%s: duplicate name or no class", c.Name)
		}
		names[c.Name] = true
		if c.Ports != AnyPort && c.IPProto != ProtoTCP && c.IPProto != ProtoUDP {
			t.Fatalf("%s: ports without TCP or UDP", c.Name)
		}
		f := frameFor(c, false)
		if m := MatchControl(f, EthernetHeaderLen); m == nil || m.Name != c.Name {
			t.Fatalf("%s: its own frame matched %+v", c.Name, m)
		}
		if c.EtherType != EtherTypeIPv4 {
			continue
		}
		src := MatchControl(frameFor(c, true), EthernetHeaderLen)
		if wantSrc := c.Ports != DstPort; (src != nil) != wantSrc {
			t.Errorf("%s: port as source matched %v, want %v", c.Name, src != nil, wantSrc)
		}
		frag := frameFor(c, false)
		binary.BigEndian.PutUint16(frag[EthernetHeaderLen+6:], 100)
		if m := MatchControl(frag, EthernetHeaderLen); (m != nil) != (c.Ports == AnyPort) {
			t.Errorf("%s: later fragment matched %v", c.Name, m != nil)
		}
		v6 := frameFor(c, false)
		v6[EthernetHeaderLen] = 0x65
		if m := MatchControl(v6, EthernetHeaderLen); m != nil {
			t.Errorf("%s: version 6 in an IPv4 EtherType matched %s", c.Name, m.Name)
		}
		short := f[:EthernetHeaderLen+20+3] // no destination port
		if m := MatchControl(short, EthernetHeaderLen); (m != nil) != (c.Ports == AnyPort) {
			t.Errorf("%s: frame without ports matched %v", c.Name, m != nil)
		}
	}
	// No two entries match one frame, so MatchControl may stop at the
	// first it finds in its index.
	for i, a := range ControlProtos {
		for _, b := range ControlProtos[i+1:] {
			overlap := a.EtherType == b.EtherType && (a.IPProto == 0 || b.IPProto == 0 ||
				a.IPProto == b.IPProto && (a.Ports == AnyPort || b.Ports == AnyPort || a.Port == b.Port) && a.ICMPv6Type == b.ICMPv6Type)
			if overlap {
				t.Errorf("%s and %s overlap", a.Name, b.Name)
			}
		}
	}
	for _, l3 := range []int{-1, 0, 1, 81} {
		if m := MatchControl(frameFor(ControlProtos[0], false), l3); m != nil {
			t.Errorf("l3 %d matched %s", l3, m.Name)
		}
	}
}

// MatchControl runs on every punted frame: no allocation.
func TestMatchControlAllocs(t *testing.T) {
	f := frameFor(ControlProtos[len(ControlProtos)-1], false)
	if a := testing.AllocsPerRun(100, func() { MatchControl(f, EthernetHeaderLen) }); a != 0 {
		t.Fatalf("%v allocations", a)
	}
}
