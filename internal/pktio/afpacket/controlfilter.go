package afpacket

// Control-plane frames on a ring of their own. A port's receive rings are
// FIFOs: when a flood fills them, the kernel drops whatever arrives next,
// BGP keepalives and ARP replies alike. A router protects its control
// plane by classifying before the queue: ControlFilter selects the
// control frames (socket filter of a small, separate control ring),
// DataFilter everything else (the data rings), so a full data ring never
// drops a control frame. The classifier runs in the kernel per frame (a
// few cBPF instructions) before the frame takes ring space.
//
// Control frames are the entries of wire.ControlProtos that are not
// HostOnly (ARP; IGMP, OSPF, PIM, VRRP; BGP, BFD, RIP by port; for ports
// only first fragments): the program is generated from the table, and
// wire.MatchControl, the host path's classifier, reads the same table. The
// frame as the socket sees it: untagged, or with one 802.1Q/802.1ad tag
// left in it (drivers that strip tags into metadata hand the untagged
// view). A frame too short for a field the program reads is refused by
// both filters (a cBPF load beyond the packet ends the program with 0).
// A flood forged to look like control traffic competes on the control ring
// only (and is policed by the host path's limits there).
//
// Locking: none; the programs are values.

import (
	"fmt"
	"slices"

	"golang.org/x/net/bpf"

	"github.com/netfwd/netfwd/wire"
)

// ControlFilter is a socket filter accepting exactly the control frames.
func ControlFilter() []bpf.RawInstruction { return mustAssemble(controlProgram(true)) }

// DataFilter is a socket filter accepting the frames ControlFilter refuses
// (but for those too short for what it reads, which both refuse).
func DataFilter() []bpf.RawInstruction { return mustAssemble(controlProgram(false)) }

// controlProgram builds the classifier; control says which side accepts.
func controlProgram(control bool) []bpf.Instruction {
	yes, no := uint32(0x40000), uint32(0) // accept the whole frame / drop
	if !control {
		yes, no = no, yes
	}
	var p asmProgram
	// EtherType (the two bytes before l3), or the one after a single tag: l3
	// is 14 or 18.
	p.emit(bpf.LoadAbsolute{Off: wire.EthernetHeaderLen - 2, Size: 2})
	p.jeq(wire.EtherTypeVLAN, "tagged")
	p.jeq(wire.EtherTypeQinQ, "tagged")
	p.body(wire.ControlProtos, wire.EthernetHeaderLen)
	p.label("tagged")
	p.emit(bpf.LoadAbsolute{Off: wire.EthernetHeaderLen - 2 + wire.VLANTagLen, Size: 2})
	p.body(wire.ControlProtos, wire.EthernetHeaderLen+wire.VLANTagLen)
	p.label("yes")
	p.emit(bpf.RetConstant{Val: yes})
	p.label("no")
	p.emit(bpf.RetConstant{Val: no})
	return p.resolve()
}

// body classifies a frame whose EtherType is in A and whose network header
// starts at l3, by the table's entries that are not HostOnly: EtherTypes
// alone first, then IPv4 (version 4) by protocol, then by port per
// protocol. It ends in a jump to "yes" or "no".
func (p *asmProgram) body(table []wire.ControlProto, l3 uint32) {
	s := func(name string, v uint8) string { return fmt.Sprintf("%s%d@%d", name, v, l3) }
	var anyProto, portProtos []uint8
	for _, c := range table {
		switch {
		case c.HostOnly:
		case c.IPProto == 0:
			p.jeq(uint32(c.EtherType), "yes")
		case c.EtherType != wire.EtherTypeIPv4 || c.ICMPv6Type != 0:
			panic("pktio: control filter: no code for entry " + c.Name)
		case c.Ports == wire.AnyPort:
			anyProto = append(anyProto, c.IPProto)
		case !slices.Contains(portProtos, c.IPProto):
			portProtos = append(portProtos, c.IPProto)
		}
	}
	if len(anyProto)+len(portProtos) == 0 {
		p.jump("no")
		return
	}
	p.jne(wire.EtherTypeIPv4, "no")
	p.emit(bpf.LoadAbsolute{Off: l3, Size: 1}) // version and IHL
	p.emit(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0xf0})
	p.jne(0x40, "no")
	p.emit(bpf.LoadAbsolute{Off: l3 + 9, Size: 1}) // protocol
	for _, proto := range anyProto {
		p.jeq(uint32(proto), "yes")
	}
	for i, proto := range portProtos {
		if i == len(portProtos)-1 {
			p.jne(uint32(proto), "no") // the last falls through to its block
		} else {
			p.jeq(uint32(proto), s("ports", proto))
		}
	}
	if len(portProtos) == 0 {
		p.jump("no")
	}
	// The last protocol's block first: its test fell through to it.
	for i := range portProtos {
		proto := portProtos[(i+len(portProtos)-1)%len(portProtos)]
		p.label(s("ports", proto))
		p.firstFragment(l3, "no")
		p.emit(bpf.LoadMemShift{Off: l3}) // X = IHL
		loaded := false
		for _, c := range table {
			if !c.HostOnly && c.IPProto == proto && c.Ports == wire.EitherPort {
				if !loaded {
					p.emit(bpf.LoadIndirect{Off: l3, Size: 2}) // source port
					loaded = true
				}
				p.jeq(uint32(c.Port), "yes")
			}
		}
		p.emit(bpf.LoadIndirect{Off: l3 + 2, Size: 2}) // destination port
		for _, c := range table {
			if !c.HostOnly && c.IPProto == proto && c.Ports != wire.AnyPort {
				p.jeq(uint32(c.Port), "yes")
			}
		}
		p.jump("no")
	}
}

// firstFragment jumps to otherwise unless the fragment offset is 0.
func (p *asmProgram) firstFragment(l3 uint32, otherwise string) {
	p.emit(bpf.LoadAbsolute{Off: l3 + 6, Size: 2})
	p.emit(bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: 0x1fff})
	p.fixups = append(p.fixups, fixup{at: len(p.ins) - 1, trueTo: otherwise})
}

// asmProgram is a tiny assembler with labels over x/net/bpf's relative
// jumps.
type asmProgram struct {
	ins    []bpf.Instruction
	labels map[string]int
	fixups []fixup
}

type fixup struct {
	at              int
	trueTo, falseTo string // "" = the next instruction
	always          string
}

func (p *asmProgram) emit(i bpf.Instruction) { p.ins = append(p.ins, i) }

func (p *asmProgram) label(name string) {
	if p.labels == nil {
		p.labels = map[string]int{}
	}
	p.labels[name] = len(p.ins)
}

func (p *asmProgram) jeq(v uint32, to string) {
	p.emit(bpf.JumpIf{Cond: bpf.JumpEqual, Val: v})
	p.fixups = append(p.fixups, fixup{at: len(p.ins) - 1, trueTo: to})
}

func (p *asmProgram) jne(v uint32, to string) {
	p.emit(bpf.JumpIf{Cond: bpf.JumpEqual, Val: v})
	p.fixups = append(p.fixups, fixup{at: len(p.ins) - 1, falseTo: to})
}

func (p *asmProgram) jump(to string) {
	p.emit(bpf.Jump{})
	p.fixups = append(p.fixups, fixup{at: len(p.ins) - 1, always: to})
}

// resolve turns labels into relative skips (cBPF jumps only forward).
func (p *asmProgram) resolve() []bpf.Instruction {
	skip := func(from int, label string) uint32 {
		if label == "" {
			return 0
		}
		to, ok := p.labels[label]
		if !ok || to <= from || to-from-1 > 255 {
			panic("pktio: control filter: bad jump to " + label)
		}
		return uint32(to - from - 1)
	}
	for _, f := range p.fixups {
		switch in := p.ins[f.at].(type) {
		case bpf.JumpIf:
			in.SkipTrue, in.SkipFalse = uint8(skip(f.at, f.trueTo)), uint8(skip(f.at, f.falseTo))
			p.ins[f.at] = in
		case bpf.Jump:
			p.ins[f.at] = bpf.Jump{Skip: skip(f.at, f.always)}
		}
	}
	return p.ins
}

func mustAssemble(ins []bpf.Instruction) []bpf.RawInstruction {
	raw, err := bpf.Assemble(ins)
	if err != nil {
		panic("pktio: control filter: " + err.Error())
	}
	return raw
}
