package pktio

// Control-plane frames on a ring of their own. A port's receive rings are
// FIFOs: when a flood fills them, the kernel drops whatever arrives next,
// BGP keepalives and ARP replies alike. A router protects its control
// plane by classifying before the queue: ControlFilter selects the
// control frames (socket filter of a small, separate control ring),
// DataFilter everything else (the data rings), so a full data ring never
// drops a control frame. The classifier runs in the kernel per frame (a
// few cBPF instructions) before the frame takes ring space.
//
// Control frames: ARP; IPv4 OSPF (89), VRRP (112), PIM (103), IGMP (2);
// TCP from or to port 179 (BGP); UDP to ports 3784, 3785, 4784 (BFD) and
// 520 (RIP); for ports, only first fragments. The frame as the socket sees
// it: untagged, or with one 802.1Q/802.1ad tag left in it (drivers that
// strip tags into metadata hand the untagged view). A flood forged to look
// like control traffic competes on the control ring only (and is policed
// by the host path's limits there).
//
// Locking: none; the programs are values.

import (
	"fmt"

	"golang.org/x/net/bpf"
)

// ControlFilter is a socket filter accepting exactly the control frames.
func ControlFilter() []bpf.RawInstruction { return mustAssemble(controlProgram(true)) }

// DataFilter is a socket filter accepting exactly the frames ControlFilter
// refuses.
func DataFilter() []bpf.RawInstruction { return mustAssemble(controlProgram(false)) }

// Protocol numbers and ports of control traffic.
const (
	ctlEtherVLAN = 0x8100
	ctlEtherQinQ = 0x88a8
	ctlEtherIPv4 = 0x0800
	ctlEtherARP  = 0x0806
)

var (
	ctlIPProtos = []uint32{2, 89, 103, 112}       // IGMP, OSPF, PIM, VRRP
	ctlUDPPorts = []uint32{520, 3784, 3785, 4784} // RIP, BFD (single hop, multihop, echo)
)

// controlProgram builds the classifier; control says which side accepts.
func controlProgram(control bool) []bpf.Instruction {
	yes, no := uint32(0x40000), uint32(0) // accept the whole frame / drop
	if !control {
		yes, no = no, yes
	}
	var p asmProgram
	// EtherType, or the one after a single tag: l3 is 14 or 18.
	p.emit(bpf.LoadAbsolute{Off: 12, Size: 2})
	p.jeq(ctlEtherVLAN, "tagged")
	p.jeq(ctlEtherQinQ, "tagged")
	p.body(14)
	p.label("tagged")
	p.emit(bpf.LoadAbsolute{Off: 16, Size: 2})
	p.body(18)
	p.label("yes")
	p.emit(bpf.RetConstant{Val: yes})
	p.label("no")
	p.emit(bpf.RetConstant{Val: no})
	return p.resolve()
}

// body classifies a frame whose EtherType is in A and whose network header
// starts at l3.
func (p *asmProgram) body(l3 uint32) {
	s := func(name string) string { return fmt.Sprintf("%s@%d", name, l3) }
	p.jeq(ctlEtherARP, "yes")
	p.jne(ctlEtherIPv4, "no")
	p.emit(bpf.LoadAbsolute{Off: l3 + 9, Size: 1}) // protocol
	for _, proto := range ctlIPProtos {
		p.jeq(proto, "yes")
	}
	p.jeq(6, s("tcp"))
	p.jne(17, "no")
	// UDP: destination port of a first fragment.
	p.firstFragment(l3, "no")
	p.emit(bpf.LoadMemShift{Off: l3})
	p.emit(bpf.LoadIndirect{Off: l3 + 2, Size: 2})
	for _, port := range ctlUDPPorts {
		p.jeq(port, "yes")
	}
	p.jump("no")
	p.label(s("tcp"))
	p.firstFragment(l3, "no")
	p.emit(bpf.LoadMemShift{Off: l3})
	p.emit(bpf.LoadIndirect{Off: l3, Size: 2}) // source port
	p.jeq(179, "yes")
	p.emit(bpf.LoadIndirect{Off: l3 + 2, Size: 2}) // destination port
	p.jeq(179, "yes")
	p.jump("no")
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
