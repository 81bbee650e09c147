package bench

// sink: a BPF program that counts and drops every frame an interface
// receives. The veth suite puts one on H2's interface (the counter of
// delivered frames, the same for every forwarder) and one on the router's
// ingress for the ceiling (what the generator can push into the router
// namespace at all).
//
// Program: one per-CPU array slot incremented per frame, then drop. On the
// router's ingress it is an XDP program in native mode (XDP_DROP: the
// ceiling, the earliest point a frame can be taken); on H2 a tc
// (tcx ingress) program: native XDP on a veth moves its receive path to
// NAPI and copies every skb into a page-pool page first, a cost the
// counter would add to every forwarder's transmit path. Attached through
// bpf_links, so they go away with the process.
//
// Locking: none; Count may be called from any goroutine (a map read).

import (
	"fmt"
	"net"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/netfwd/netfwd/internal/pktio"
)

const (
	xdpDrop   = 1 // XDP_DROP
	tcActShot = 2 // TC_ACT_SHOT
)

// sinkKind is where the counter runs.
type sinkKind int

const (
	sinkXDP sinkKind = iota // native XDP, XDP_DROP
	sinkTC                  // tcx ingress, TC_ACT_SHOT
)

type sink struct {
	counts *ebpf.Map
	prog   *ebpf.Program
	lnk    link.Link
}

// TCDropSink attaches the H2 sink (count and drop every frame at iface's
// tcx ingress, in namespace ns) for callers outside the suites, such as
// the hot restart rate test; it returns the count and the detach.
func TCDropSink(ns, iface string) (count func() (uint64, error), detach func(), err error) {
	s, err := newSink(ns, iface, sinkTC)
	if err != nil {
		return nil, nil, err
	}
	return s.Count, s.close, nil
}

// newSink attaches a counting drop program to iface in namespace ns.
func newSink(ns, iface string, kind sinkKind) (*sink, error) {
	s := &sink{}
	var err error
	s.counts, err = ebpf.NewMap(&ebpf.MapSpec{Name: "sink_counts", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		return nil, fmt.Errorf("sink map: %w", err)
	}
	typ, verdict := ebpf.XDP, int32(xdpDrop)
	if kind == sinkTC {
		typ, verdict = ebpf.SchedCLS, tcActShot
	}
	s.prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{Name: "bench_sink", Type: typ, License: "Dual BSD/GPL",
		Instructions: asm.Instructions{
			asm.StoreImm(asm.RFP, -4, 0, asm.Word),
			asm.LoadMapPtr(asm.R1, s.counts.FD()),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, -4),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, "drop"),
			asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
			asm.Add.Imm(asm.R1, 1),
			asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
			asm.Mov.Imm(asm.R0, verdict).WithSymbol("drop"),
			asm.Return(),
		}})
	if err != nil {
		s.close()
		return nil, fmt.Errorf("sink program: %w", err)
	}
	err = pktio.InNetns(ns, func() error {
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		if kind == sinkTC {
			s.lnk, err = link.AttachTCX(link.TCXOptions{Interface: ifi.Index, Program: s.prog, Attach: ebpf.AttachTCXIngress})
		} else {
			s.lnk, err = link.AttachXDP(link.XDPOptions{Program: s.prog, Interface: ifi.Index, Flags: link.XDPDriverMode})
		}
		return err
	})
	if err != nil {
		s.close()
		return nil, fmt.Errorf("sink on %s: %w", iface, err)
	}
	return s, nil
}

// Count is the number of frames dropped so far.
func (s *sink) Count() (uint64, error) {
	var per []uint64
	if err := s.counts.Lookup(uint32(0), &per); err != nil {
		return 0, err
	}
	var n uint64
	for _, c := range per {
		n += c
	}
	return n, nil
}

func (s *sink) close() {
	if s.lnk != nil {
		s.lnk.Close()
	}
	if s.prog != nil {
		s.prog.Close()
	}
	if s.counts != nil {
		s.counts.Close()
	}
}
