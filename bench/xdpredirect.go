package bench

// xdpredirect: the classic XSKMAP redirect program for the minimal AF_XDP
// forwarder (xdpminimal.go), built with cilium/ebpf's asm package:
//
//	return bpf_redirect_map(&xskmap, ctx->rx_queue_index, XDP_PASS)
//
// nothing else (pktio's program first restores an offloaded VLAN tag,
// a map lookup and a kfunc call per frame; the minimal forwarder leaves
// that out on purpose). Attached in native (driver) mode, or generic,
// through a bpf_link that goes away with the process.
//
// Locking: none; one caller.

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

const xdpPassAction = 2 // XDP_PASS

// xskRedirect is the map, program and link on one interface.
type xskRedirect struct {
	xsks *ebpf.Map
	prog *ebpf.Program
	lnk  link.Link
}

// attachXSKRedirect attaches the redirect program to ifindex (the caller's
// thread is in the interface's namespace).
func attachXSKRedirect(ifindex int, generic bool) (*xskRedirect, error) {
	r := &xskRedirect{}
	var err error
	r.xsks, err = ebpf.NewMap(&ebpf.MapSpec{Name: "min_xsks", Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: 64})
	if err != nil {
		return nil, fmt.Errorf("XSKMAP: %w", err)
	}
	r.prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{Name: "min_xsk", Type: ebpf.XDP, License: "Dual BSD/GPL",
		Instructions: asm.Instructions{
			asm.LoadMem(asm.R2, asm.R1, 16, asm.Word), // ctx->rx_queue_index
			asm.LoadMapPtr(asm.R1, r.xsks.FD()),
			asm.Mov.Imm(asm.R3, xdpPassAction),
			asm.FnRedirectMap.Call(),
			asm.Return(),
		}})
	if err != nil {
		r.close()
		return nil, fmt.Errorf("XDP program: %w", err)
	}
	flags := link.XDPDriverMode
	if generic {
		flags = link.XDPGenericMode
	}
	r.lnk, err = link.AttachXDP(link.XDPOptions{Program: r.prog, Interface: ifindex, Flags: flags})
	if err != nil {
		r.close()
		return nil, fmt.Errorf("attach XDP: %w", err)
	}
	return r, nil
}

// register puts the socket fd at key queue.
func (r *xskRedirect) register(queue, fd int) error {
	return r.xsks.Put(uint32(queue), uint32(fd))
}

func (r *xskRedirect) close() error {
	if r == nil {
		return nil
	}
	var errs []error
	if r.lnk != nil {
		errs = append(errs, r.lnk.Close())
	}
	if r.prog != nil {
		errs = append(errs, r.prog.Close())
	}
	if r.xsks != nil {
		errs = append(errs, r.xsks.Close())
	}
	return errors.Join(errs...)
}
