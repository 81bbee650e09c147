package afxdp

// napidefer: an interface's NAPI deferral for preferred busy polling
// (PortConfig.NAPIDefer): the kernel's napi_defer_hard_irqs and
// gro_flush_timeout of each of its NAPI instances, set through the netdev
// generic netlink family (NETDEV_CMD_NAPI_GET dump by ifindex,
// NETDEV_CMD_NAPI_SET per instance; Linux 6.13 and later) and put back
// when the port closes.
//
// Why: with a deferral count, a NAPI poll that a busy-polling socket runs
// leaves the device's interrupts off (veth: its "notify" from the sending
// CPU) for that many further polls or until gro_flush_timeout, so while
// the worker keeps polling, the device's receive work runs in the worker's
// thread only (WorkerConfig.NAPIBusyPoll). Without it, the sending CPU
// (veth) or the interrupt's CPU (a NIC) runs most of it anyway.
//
// Flow: Open (after the program is attached: veth creates its NAPI
// instances then) reads each instance's values, sets the new ones (an
// interface without NAPI, such as a bridge in generic mode, is left as it
// is);
// Close writes the old ones back (an instance that went away with the
// program, as veth's do, is skipped). Each exchange is one request on a
// fresh NETLINK_GENERIC socket of the port's network namespace.
//
// Locking: none; Open and Close.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// NAPIDefer is the NAPI deferral Open sets on an interface.
type NAPIDefer struct {
	// HardIRQs is napi_defer_hard_irqs: empty polls after which the
	// device's interrupts come back on. 0: leave the interface alone.
	HardIRQs int
	// FlushTimeout is gro_flush_timeout: how long interrupts stay off
	// without a poll before a timer runs the NAPI instance. Default
	// (with HardIRQs) 200 µs.
	FlushTimeout time.Duration
}

const defaultNAPIFlushTimeout = 200 * time.Microsecond

// The netdev family (include/uapi/linux/netdev.h).
const (
	netdevFamilyName           = "netdev"
	netdevCmdNAPIGet           = 11
	netdevCmdNAPISet           = 14
	netdevANAPIIfindex         = 1
	netdevANAPIID              = 2
	netdevANAPIDeferHardIRQs   = 5
	netdevANAPIGROFlushTimeout = 6
	genlHdrLen                 = 4 // struct genlmsghdr
	maxNAPIDeferHardIRQs       = 1<<31 - 1
)

// napiSetting is one NAPI instance's deferral.
type napiSetting struct {
	id       uint32
	hardIRQs uint32
	timeout  uint64 // ns
}

func (d NAPIDefer) withDefaults() (NAPIDefer, error) {
	if d.HardIRQs == 0 {
		return d, nil
	}
	if d.FlushTimeout == 0 {
		d.FlushTimeout = defaultNAPIFlushTimeout
	}
	if d.HardIRQs < 0 || d.HardIRQs > maxNAPIDeferHardIRQs || d.FlushTimeout < 0 {
		return d, fmt.Errorf("pktio: NAPIDefer %+v: want HardIRQs 0..2^31-1 and FlushTimeout >= 0", d)
	}
	return d, nil
}

// applyNAPIDefer sets d on every NAPI instance of ifindex (calling
// thread's namespace) and returns what they had.
func applyNAPIDefer(ifindex int, d NAPIDefer) ([]napiSetting, error) {
	fam, err := genlFamily(netdevFamilyName)
	if err != nil {
		return nil, fmt.Errorf("NAPI deferral needs the netdev netlink family (Linux 6.13+): %w", err)
	}
	old, err := napiSettings(fam, ifindex)
	if err != nil {
		return nil, err
	}
	if len(old) == 0 {
		return nil, nil // no NAPI (a virtual device, or down): nothing to defer, busy polls find nothing
	}
	for i, o := range old {
		err := setNAPISetting(fam, napiSetting{id: o.id, hardIRQs: uint32(d.HardIRQs), timeout: uint64(d.FlushTimeout)})
		if err != nil {
			restoreNAPISettings(fam, old[:i])
			return nil, fmt.Errorf("NAPI %d: %w", o.id, err)
		}
	}
	return old, nil
}

// restoreNAPIDefer writes back what applyNAPIDefer returned; instances
// that no longer exist are skipped.
func restoreNAPIDefer(old []napiSetting) error {
	if len(old) == 0 {
		return nil
	}
	fam, err := genlFamily(netdevFamilyName)
	if err != nil {
		return err
	}
	return restoreNAPISettings(fam, old)
}

func restoreNAPISettings(fam uint16, old []napiSetting) error {
	var errs []error
	for _, o := range old {
		if err := setNAPISetting(fam, o); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("NAPI %d: %w", o.id, err))
		}
	}
	return errors.Join(errs...)
}

// napiSettings dumps the NAPI instances of ifindex.
func napiSettings(fam uint16, ifindex int) ([]napiSetting, error) {
	req := newGenlRequest(fam, netdevCmdNAPIGet, unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	req = appendAttr(req, netdevANAPIIfindex, binary.NativeEndian.AppendUint32(nil, uint32(ifindex)))
	msgs, err := netlinkExchange(unix.NETLINK_GENERIC, req)
	if err != nil {
		return nil, fmt.Errorf("NETDEV_CMD_NAPI_GET: %w", err)
	}
	var out []napiSetting
	for _, m := range msgs {
		if m.Header.Type != fam || len(m.Data) < genlHdrLen {
			continue
		}
		var s napiSetting
		for _, a := range parseNested(m.Data[genlHdrLen:]) {
			switch a.typ {
			case netdevANAPIID:
				s.id = nlaUint(a.val)
			case netdevANAPIDeferHardIRQs:
				s.hardIRQs = nlaUint(a.val)
			case netdevANAPIGROFlushTimeout:
				s.timeout = nlaUint64(a.val)
			}
		}
		if s.id != 0 {
			out = append(out, s)
		}
	}
	return out, nil
}

func setNAPISetting(fam uint16, s napiSetting) error {
	req := newGenlRequest(fam, netdevCmdNAPISet, unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	req = appendAttr(req, netdevANAPIID, binary.NativeEndian.AppendUint32(nil, s.id))
	req = appendAttr(req, netdevANAPIDeferHardIRQs, binary.NativeEndian.AppendUint32(nil, s.hardIRQs))
	req = appendAttr(req, netdevANAPIGROFlushTimeout, binary.NativeEndian.AppendUint64(nil, s.timeout))
	_, err := netlinkExchange(unix.NETLINK_GENERIC, req)
	return err
}

// genlFamily resolves a generic netlink family's id.
func genlFamily(name string) (uint16, error) {
	req := newGenlRequest(unix.GENL_ID_CTRL, unix.CTRL_CMD_GETFAMILY, unix.NLM_F_REQUEST)
	req = appendAttr(req, unix.CTRL_ATTR_FAMILY_NAME, append([]byte(name), 0))
	msgs, err := netlinkExchange(unix.NETLINK_GENERIC, req)
	if err != nil {
		return 0, fmt.Errorf("generic netlink family %q: %w", name, err)
	}
	for _, m := range msgs {
		if m.Header.Type != unix.GENL_ID_CTRL || len(m.Data) < genlHdrLen {
			continue
		}
		for _, a := range parseNested(m.Data[genlHdrLen:]) {
			if a.typ == unix.CTRL_ATTR_FAMILY_ID && len(a.val) >= 2 {
				return binary.NativeEndian.Uint16(a.val), nil
			}
		}
	}
	return 0, fmt.Errorf("generic netlink family %q: no id in the answer", name)
}

// newGenlRequest is a netlink header and a genlmsghdr; the length is
// filled in by netlinkExchange.
func newGenlRequest(typ uint16, cmd uint8, flags uint16) []byte {
	b := make([]byte, unix.SizeofNlMsghdr+genlHdrLen, 64)
	h := (*unix.NlMsghdr)(unsafe.Pointer(&b[0]))
	h.Type, h.Flags, h.Seq = typ, flags, 1
	b[unix.SizeofNlMsghdr] = cmd
	b[unix.SizeofNlMsghdr+1] = 1 // version
	return b
}

// nlaUint reads a u32 (or the low bits of an NLA_UINT).
func nlaUint(b []byte) uint32 { return uint32(nlaUint64(b)) }

// nlaUint64 reads an NLA_UINT: 4 or 8 bytes.
func nlaUint64(b []byte) uint64 {
	switch len(b) {
	case 4:
		return uint64(binary.NativeEndian.Uint32(b))
	case 8:
		return binary.NativeEndian.Uint64(b)
	}
	return 0
}
