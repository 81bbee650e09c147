package afxdp

// xdpprog: the XDP program that steers an interface's frames into netfwd's
// XDP sockets, built at run time with cilium/ebpf's asm package (no clang,
// no object files), and its attachment.
//
// The program is the classic XSKMAP redirect:
//
//	r2 = ctx->rx_queue_index
//	return bpf_redirect_map(&xskmap, r2, XDP_PASS)
//
// A frame received on queue q goes to the socket registered at key q; a
// queue without a socket passes its frames to the kernel (the lower bits of
// the flags argument are the action when the lookup fails). In native mode
// it first restores a VLAN tag the driver holds in metadata (see
// newXSKProgram), where the kernel has the kfunc for it.
//
// Attachment is through a bpf_link (BPF_LINK_CREATE): the kernel detaches
// the program when the link's last file descriptor closes, so a process
// that dies, even by SIGKILL, leaves nothing on the interface. Native
// (driver) mode is tried first, generic (skb) mode second. A program that
// a legacy netlink attach left behind (IFLA_XDP, which outlives its loader)
// makes the link attach fail with EBUSY; if it is netfwd's (by name) it is
// detached and the attach repeated, anything else is reported, not touched.
//
// Every attached link is also in a process-wide registry so that
// DetachXDPPrograms can remove them all from a signal handler or a panic's
// recover, before the process exits.
//
// Locking: registryMu guards the registry; the rest has one caller.

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/wire"
)

// xdpProgName names netfwd's program in the kernel (bpftool prog, ip link);
// it is also how a stale one is recognised.
const xdpProgName = "netfwd_xsk"

const xdpPass = 2 // XDP_PASS

// Attach is how the steering program is attached to an interface.
type Attach int

const (
	// AttachAuto tries native mode and falls back to generic mode.
	AttachAuto Attach = iota
	// AttachNative runs the program in the driver's receive path, on
	// the driver's own buffers (veth, most 10G+ NICs).
	AttachNative
	// AttachGeneric runs it on skbs after the driver (any interface;
	// slower, and zero-copy sockets are impossible).
	AttachGeneric
)

func (a Attach) String() string {
	switch a {
	case AttachAuto:
		return "auto"
	case AttachNative:
		return "native"
	case AttachGeneric:
		return "generic"
	}
	return fmt.Sprintf("Attach(%d)", int(a))
}

// newXSKMap creates the socket map for an interface with queues queues.
func newXSKMap(queues int) (*ebpf.Map, error) {
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "netfwd_xsks", Type: ebpf.XSKMap,
		KeySize: 4, ValueSize: 4, MaxEntries: uint32(queues)})
	if err != nil {
		return nil, fmt.Errorf("XSKMAP: %w", err)
	}
	return m, nil
}

// newXSKProgram builds the redirect program for m. With restoreVLAN it
// is device-bound to ifindex (native mode only) and first puts a VLAN tag
// that the driver moved into metadata (VLAN offload) back into the bytes,
// read with the bpf_xdp_metadata_rx_vlan_tag kfunc: XDP sees the frame as
// the driver holds it, and veth, like NICs with rx-vlan-offload, holds a
// tag that came with the skb outside the bytes. The tag is pushed only
// when a socket will take the frame (an XDP_PASS frame keeps its tag in
// the skb, where the kernel expects it).
func newXSKProgram(m *ebpf.Map, ifindex int, restoreVLAN bool) (*ebpf.Program, error) {
	spec := &ebpf.ProgramSpec{Name: xdpProgName, Type: ebpf.XDP, License: "Dual BSD/GPL"}
	redirect := asm.Instructions{
		asm.LoadMem(asm.R2, asm.R6, 16, asm.Word).WithSymbol("redirect"), // rx_queue_index
		asm.LoadMapPtr(asm.R1, m.FD()),
		asm.Mov.Imm(asm.R3, xdpPass),
		asm.FnRedirectMap.Call(),
		asm.Return(),
	}
	if !restoreVLAN {
		spec.Instructions = append(asm.Instructions{asm.Mov.Reg(asm.R6, asm.R1)}, redirect...)
	} else {
		id, err := kfuncID("bpf_xdp_metadata_rx_vlan_tag")
		if err != nil {
			return nil, err
		}
		spec.Flags, spec.Ifindex = unix.BPF_F_XDP_DEV_BOUND_ONLY, uint32(ifindex)
		spec.Instructions = append(asm.Instructions{
			asm.Mov.Reg(asm.R6, asm.R1), // ctx
			// A socket on this queue? Otherwise pass the frame untouched.
			asm.LoadMem(asm.R2, asm.R6, 16, asm.Word),
			asm.StoreMem(asm.RFP, -12, asm.R2, asm.Word),
			asm.LoadMapPtr(asm.R1, m.FD()),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, -12),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, "pass"),
			// proto (big endian) at fp-8, tci at fp-4.
			asm.StoreImm(asm.RFP, -8, 0, asm.Word),
			asm.StoreImm(asm.RFP, -4, 0, asm.Word),
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, -8),
			asm.Mov.Reg(asm.R3, asm.RFP),
			asm.Add.Imm(asm.R3, -4),
			{OpCode: asm.OpCode(asm.JumpClass).SetJumpOp(asm.Call), Src: asm.PseudoKfuncCall, Constant: int64(id)},
			asm.JNE.Imm(asm.R0, 0, "redirect"), // no tag in metadata
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.Mov.Imm(asm.R2, -wire.VLANTagLen),
			asm.FnXdpAdjustHead.Call(),
			asm.JNE.Imm(asm.R0, 0, "redirect"),       // no headroom: as it is
			asm.LoadMem(asm.R2, asm.R6, 0, asm.Word), // data
			asm.LoadMem(asm.R3, asm.R6, 4, asm.Word), // data_end
			asm.Mov.Reg(asm.R4, asm.R2),
			asm.Add.Imm(asm.R4, wire.EthernetHeaderLen+2),
			asm.JGT.Reg(asm.R4, asm.R3, "redirect"),
			// The MACs move 4 bytes to the front, the tag goes behind them.
			asm.LoadMem(asm.R5, asm.R2, 4, asm.DWord),
			asm.StoreMem(asm.R2, 0, asm.R5, asm.DWord),
			asm.LoadMem(asm.R5, asm.R2, 12, asm.Word),
			asm.StoreMem(asm.R2, 8, asm.R5, asm.Word),
			asm.LoadMem(asm.R5, asm.RFP, -8, asm.Half),
			asm.StoreMem(asm.R2, 12, asm.R5, asm.Half),
			asm.LoadMem(asm.R5, asm.RFP, -4, asm.Half),
			asm.HostTo(asm.BE, asm.R5, asm.Half),
			asm.StoreMem(asm.R2, 14, asm.R5, asm.Half),
			asm.Ja.Label("redirect"),
			asm.Mov.Imm(asm.R0, xdpPass).WithSymbol("pass"),
			asm.Return(),
		}, redirect...)
	}
	p, err := ebpf.NewProgram(spec)
	if err != nil {
		return nil, fmt.Errorf("XDP program: %w", err)
	}
	return p, nil
}

// kfuncID finds a kernel function's BTF id in vmlinux's BTF.
func kfuncID(name string) (btf.TypeID, error) {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return 0, fmt.Errorf("kernel BTF: %w", err)
	}
	typ, err := spec.AnyTypeByName(name)
	if err != nil {
		return 0, fmt.Errorf("kfunc %s: %w", name, err)
	}
	return spec.TypeID(typ)
}

// xskAttachment is one way to attach: a mode and a program variant.
type xskAttachment struct {
	mode        Attach
	restoreVLAN bool
}

// attachXSK builds the program and links it to ifindex, trying the
// attachments want allows in order (native with VLAN restore, native,
// generic); it returns the link, the program and what it got.
func attachXSK(m *ebpf.Map, ifindex int, want Attach) (link.Link, *ebpf.Program, xskAttachment, error) {
	tries := []xskAttachment{{AttachNative, true}, {AttachNative, false}, {AttachGeneric, false}}
	switch want {
	case AttachNative:
		tries = tries[:2]
	case AttachGeneric:
		tries = tries[2:]
	}
	var errs []error
	for _, a := range tries {
		prog, err := newXSKProgram(m, ifindex, a.restoreVLAN)
		if err != nil {
			errs = append(errs, fmt.Errorf("%v (VLAN restore %v): %w", a.mode, a.restoreVLAN, err))
			continue
		}
		l, err := attachXDPMode(prog, ifindex, a.mode)
		if err == nil {
			return l, prog, a, nil
		}
		prog.Close()
		errs = append(errs, fmt.Errorf("%v: %w", a.mode, err))
		if errors.Is(err, errForeignXDP) {
			break // another program owns the hook: no other mode will do
		}
	}
	return nil, nil, xskAttachment{}, errors.Join(errs...)
}

// errForeignXDP: the interface runs an XDP program that is not netfwd's.
var errForeignXDP = errors.New("another XDP program is attached")

func attachXDPMode(prog *ebpf.Program, ifindex int, mode Attach) (link.Link, error) {
	flags := link.XDPDriverMode
	if mode == AttachGeneric {
		flags = link.XDPGenericMode
	}
	opts := link.XDPOptions{Program: prog, Interface: ifindex, Flags: flags}
	l, err := link.AttachXDP(opts)
	if err == nil || !errors.Is(err, unix.EBUSY) && !errors.Is(err, unix.EEXIST) {
		return l, err
	}
	// Something is attached. Ours, left by a netlink attach? Replace it.
	if rerr := removeStaleXDP(ifindex); rerr != nil {
		return nil, rerr
	}
	return link.AttachXDP(opts)
}

// removeStaleXDP detaches a netfwd program attached through netlink.
func removeStaleXDP(ifindex int) error {
	info, err := getLinkXDP(ifindex)
	if err != nil {
		return err
	}
	if info.attached == xdpAttachedNone {
		return nil // gone meanwhile
	}
	name := "?"
	if info.progID != 0 {
		if p, err := ebpf.NewProgramFromID(ebpf.ProgramID(info.progID)); err == nil {
			if pi, err := p.Info(); err == nil {
				name = pi.Name
			}
			p.Close()
		}
	}
	if name != xdpProgName {
		return fmt.Errorf("%w (id %d, name %q): netfwd replaces only its own", errForeignXDP, info.progID, name)
	}
	flags := uint32(unix.XDP_FLAGS_DRV_MODE)
	if info.attached == xdpAttachedSKB {
		flags = unix.XDP_FLAGS_SKB_MODE
	}
	if err := setLinkXDP(ifindex, -1, flags); err != nil {
		// EBUSY here: it is held by a bpf_link, i.e. a live process (another
		// netfwd on the same interface).
		return fmt.Errorf("%w (netfwd's, id %d, held by a live process?): detach: %v", errForeignXDP, info.progID, err)
	}
	return nil
}

// The registry of attached links, for DetachXDPPrograms.
var (
	registryMu sync.Mutex
	registry   = map[*Port]struct{}{}
)

func registerXDP(p *Port) {
	registryMu.Lock()
	registry[p] = struct{}{}
	registryMu.Unlock()
}

func unregisterXDP(p *Port) {
	registryMu.Lock()
	delete(registry, p)
	registryMu.Unlock()
}

// DetachXDPPrograms detaches the XDP program of every Port of the
// process (sockets and rings stay until their owners close them). For a
// signal handler or a recovered panic, before exiting: the kernel would
// detach them at exit anyway (bpf_link), this makes it happen first.
// Safe from any goroutine, any number of times.
func DetachXDPPrograms() {
	registryMu.Lock()
	ports := make([]*Port, 0, len(registry))
	for p := range registry {
		ports = append(ports, p)
	}
	registryMu.Unlock()
	for _, p := range ports {
		p.detach()
	}
}
