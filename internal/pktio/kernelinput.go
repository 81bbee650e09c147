package pktio

// Keeping the kernel's own stack off a port that netfwd owns. An AF_PACKET
// socket taps frames; the kernel still runs its own input on each of them
// (IP, ARP, IPv6) after the taps, and an AF_XDP port passes the frames of a
// queue without a bound socket to it. Without addresses in the kernel that
// input finds nothing to do, but once the box's stack has the router's
// addresses (the host path's twins) it would answer ARP for them on the
// port with the port's own MAC, accept TCP segments there a second time
// and answer pings beside netfwd. DropKernelInput attaches a tcx ingress
// program that drops every frame: tcx ingress runs after the packet taps
// (so netfwd's sockets and tcpdump still see everything) and before the
// protocol handlers; an XDP redirect to a socket never reaches it.
//
// The program is held by a bpf_link, never pinned: it goes when the last
// descriptor of the link closes. netfwd holds one, and the twin keeper
// holds another (internal/daemon/kernelguard.go): the guard lasts exactly
// as long as the twins' carrier, through a restart and a kill -9.

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// tcActShot is TC_ACT_SHOT: drop the frame.
const tcActShot = 2

// DropKernelInput makes the kernel drop every frame it receives on the
// interface, after packet sockets got their copy (tcx, Linux 6.6 or
// later). Close the link to undo it.
func DropKernelInput(ifindex int) (link.Link, error) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "netfwd_noinput", Type: ebpf.SchedCLS, License: "Dual BSD/GPL",
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R0, tcActShot),
			asm.Return(),
		}})
	if err != nil {
		return nil, fmt.Errorf("kernel input guard: %w", err)
	}
	defer prog.Close() // the link holds it
	l, err := link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: prog, Attach: ebpf.AttachTCXIngress})
	if err != nil {
		return nil, fmt.Errorf("kernel input guard: tcx ingress: %w", err)
	}
	return l, nil
}

// KernelInputDropped reports whether DropKernelInput's program is attached
// to the interface (tests and diagnostics; in the caller's namespace).
func KernelInputDropped(ifindex int) (bool, error) {
	r, err := link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: ebpf.AttachTCXIngress})
	if err != nil {
		return false, err
	}
	for _, p := range r.Programs {
		prog, err := ebpf.NewProgramFromID(p.ID)
		if err != nil {
			continue // detached meanwhile
		}
		info, err := prog.Info()
		prog.Close()
		if err == nil && info.Name == "netfwd_noinput" {
			return true, nil
		}
	}
	return false, nil
}
