package afxdp

// xdpnetlink: the rtnetlink side of XDP, for what a bpf_link cannot do:
// finding the program attached to an interface the legacy way (RTM_SETLINK
// with IFLA_XDP, as `ip link set dev X xdp obj ...` does) and removing it,
// and the interface's queue counts. netfwd itself attaches through a
// bpf_link (xdpprog.go), which the kernel removes when the process dies;
// a program attached through netlink stays until someone detaches it.
//
// Flow: one request on a fresh NETLINK_ROUTE socket of the calling thread's
// network namespace, one answer (the link, or an error/ack message).
//
// Locking: none; no state.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// linkXDP is what RTM_GETLINK says about an interface's XDP hook.
type linkXDP struct {
	attached uint8  // XDP_ATTACHED_*: 0 none, 1 driver, 2 generic (skb), 3 hardware, 4 several
	progID   uint32 // the attached program (0 with none or several)
	rxQueues int    // IFLA_NUM_RX_QUEUES (allocated, not necessarily active)
	txQueues int
}

// XDP_ATTACHED_* of IFLA_XDP_ATTACHED.
const (
	xdpAttachedNone   = 0
	xdpAttachedDriver = 1
	xdpAttachedSKB    = 2
)

// getLinkXDP asks the kernel about ifindex.
func getLinkXDP(ifindex int) (linkXDP, error) {
	req := newLinkRequest(unix.RTM_GETLINK, unix.NLM_F_REQUEST, ifindex)
	msgs, err := netlinkRoundTrip(req)
	if err != nil {
		return linkXDP{}, err
	}
	for _, m := range msgs {
		if m.Header.Type != unix.RTM_NEWLINK {
			continue
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(&m)
		if err != nil {
			return linkXDP{}, fmt.Errorf("RTM_GETLINK answer: %w", err)
		}
		var info linkXDP
		for _, a := range attrs {
			switch a.Attr.Type &^ unix.NLA_F_NESTED {
			case unix.IFLA_NUM_RX_QUEUES:
				info.rxQueues = int(binary.NativeEndian.Uint32(a.Value))
			case unix.IFLA_NUM_TX_QUEUES:
				info.txQueues = int(binary.NativeEndian.Uint32(a.Value))
			case unix.IFLA_XDP:
				for _, n := range parseNested(a.Value) {
					switch n.typ {
					case unix.IFLA_XDP_ATTACHED:
						info.attached = n.val[0]
					case unix.IFLA_XDP_PROG_ID:
						info.progID = binary.NativeEndian.Uint32(n.val)
					}
				}
			}
		}
		return info, nil
	}
	return linkXDP{}, fmt.Errorf("RTM_GETLINK: no answer for ifindex %d", ifindex)
}

// setLinkXDP attaches the program fd (-1: detaches) to ifindex through
// netlink, with flags XDP_FLAGS_DRV_MODE or XDP_FLAGS_SKB_MODE.
func setLinkXDP(ifindex, fd int, flags uint32) error {
	req := newLinkRequest(unix.RTM_SETLINK, unix.NLM_F_REQUEST|unix.NLM_F_ACK, ifindex)
	var nested []byte
	nested = appendAttr(nested, unix.IFLA_XDP_FD, binary.NativeEndian.AppendUint32(nil, uint32(int32(fd))))
	nested = appendAttr(nested, unix.IFLA_XDP_FLAGS, binary.NativeEndian.AppendUint32(nil, flags))
	req = appendAttr(req, unix.IFLA_XDP|unix.NLA_F_NESTED, nested)
	_, err := netlinkRoundTrip(req)
	return err
}

// newLinkRequest is a netlink header and an ifinfomsg for ifindex; the
// length is filled in by netlinkRoundTrip.
func newLinkRequest(typ, flags uint16, ifindex int) []byte {
	b := make([]byte, unix.SizeofNlMsghdr+unix.SizeofIfInfomsg, 64)
	h := (*unix.NlMsghdr)(unsafe.Pointer(&b[0]))
	h.Type, h.Flags, h.Seq = typ, flags, 1
	ifi := (*unix.IfInfomsg)(unsafe.Pointer(&b[unix.SizeofNlMsghdr]))
	ifi.Family = unix.AF_UNSPEC
	ifi.Index = int32(ifindex)
	return b
}

// appendAttr appends one route attribute (4-byte aligned).
func appendAttr(b []byte, typ uint16, val []byte) []byte {
	n := unix.SizeofRtAttr + len(val)
	b = binary.NativeEndian.AppendUint16(b, uint16(n))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, val...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

type nestedAttr struct {
	typ uint16
	val []byte
}

// parseNested splits a nested attribute's payload.
func parseNested(b []byte) []nestedAttr {
	var out []nestedAttr
	for len(b) >= unix.SizeofRtAttr {
		n := int(binary.NativeEndian.Uint16(b))
		if n < unix.SizeofRtAttr || n > len(b) {
			break
		}
		out = append(out, nestedAttr{binary.NativeEndian.Uint16(b[2:]) &^ unix.NLA_F_NESTED, b[unix.SizeofRtAttr:n]})
		n = (n + 3) &^ 3
		if n > len(b) {
			break
		}
		b = b[n:]
	}
	return out
}

// netlinkRoundTrip sends an rtnetlink request and returns the answer's
// messages; an error message from the kernel becomes the error.
func netlinkRoundTrip(req []byte) ([]syscall.NetlinkMessage, error) {
	return netlinkExchange(unix.NETLINK_ROUTE, req)
}

// netlinkExchange sends req on a fresh socket of protocol proto and
// collects the answer: a single message, the parts of a dump up to
// NLMSG_DONE, or the acknowledgement; an error message from the kernel
// becomes the error.
func netlinkExchange(proto int, req []byte) ([]syscall.NetlinkMessage, error) {
	binary.NativeEndian.PutUint32(req, uint32(len(req)))
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("netlink send: %w", err)
	}
	var out []syscall.NetlinkMessage
	buf := make([]byte, 32<<10)
	for range 1 << 16 { // a dump of a few messages per read; bounded all the same
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, fmt.Errorf("netlink receive: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, fmt.Errorf("netlink answer: %w", err)
		}
		for _, m := range msgs {
			switch {
			case m.Header.Type == unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if e := int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
						return nil, unix.Errno(-e)
					}
				}
				return out, nil // the acknowledgement
			case m.Header.Type == unix.NLMSG_DONE:
				return out, nil
			}
			out = append(out, m)
			if m.Header.Flags&unix.NLM_F_MULTI == 0 {
				return out, nil
			}
		}
	}
	return nil, errors.New("netlink answer: no end")
}
