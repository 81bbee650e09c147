package fpm

// Who owns the other end of a TCP connection on this host: the kernel's
// socket diagnostics (NETLINK_SOCK_DIAG, inet_diag) look a socket up by its
// exact tuple and report its owner's uid (what `ss -e` prints as uid:N).
// The peer of a connection accepted from a local address is a socket of
// the same network namespace: its local address and port are the
// connection's remote ones, its remote ones the listener's.
//
// Flow: openSockDiag opens the netlink socket in the calling thread's
// namespace (the listener's: Listen runs in the daemon's namespace); each
// lookup sends one INET_DIAG_REQ_V2 (SOCK_DIAG_BY_FAMILY, no dump) and
// reads its one answer: an inet_diag_msg, or ENOENT when no such socket
// exists here (a remote peer, or one that closed already).
//
// Locking: mu serialises lookups and Close (one request in flight).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/rtnl"
)

// Sizes and offsets of the kernel's structures (linux/inet_diag.h).
const (
	sizeofSockID     = 48 // struct inet_diag_sockid
	sizeofDiagReqV2  = 8 + sizeofSockID
	sizeofDiagMsg    = 4 + sizeofSockID + 20
	sockIDTupleLen   = 36 // ports and addresses, before idiag_if
	diagMsgUIDOffset = 4 + sizeofSockID + 12
	tcpListen        = 10 // TCP_LISTEN, idiag_state
)

// errNoSocket: no socket with that tuple in the namespace.
var errNoSocket = errors.New("no such socket")

// sockDiag is a NETLINK_SOCK_DIAG socket.
type sockDiag struct {
	mu  sync.Mutex
	fd  int    // guarded by mu; -1 once closed
	seq uint32 // guarded by mu
	buf []byte // guarded by mu
}

// openSockDiag opens the socket in the calling thread's namespace.
func openSockDiag() (*sockDiag, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("sock_diag socket: %w", err)
	}
	// A lookup never waits long: the kernel answers at once.
	tv := unix.NsecToTimeval(int64(time.Second))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("sock_diag socket: %w", err)
	}
	return &sockDiag{fd: fd, buf: make([]byte, 8192)}, nil
}

func (d *sockDiag) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}

// tcpOwner returns the uid owning the TCP socket whose local end is src
// and remote end dst, in the namespace of the diag socket; errNoSocket
// when there is none. An IPv4 tuple is looked up among IPv4 sockets, then
// among IPv6 ones (a dual-stack client with mapped addresses).
func (d *sockDiag) tcpOwner(src, dst netip.AddrPort) (uint32, error) {
	src = netip.AddrPortFrom(src.Addr().Unmap(), src.Port())
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	if src.Addr().Is4() != dst.Addr().Is4() {
		return 0, errNoSocket
	}
	if !src.Addr().Is4() {
		return d.lookup(unix.AF_INET6, src, dst)
	}
	uid, err := d.lookup(unix.AF_INET, src, dst)
	if errors.Is(err, errNoSocket) {
		m := func(a netip.AddrPort) netip.AddrPort {
			return netip.AddrPortFrom(netip.AddrFrom16(a.Addr().As16()), a.Port())
		}
		uid, err = d.lookup(unix.AF_INET6, m(src), m(dst))
	}
	return uid, err
}

// lookup sends one exact-match request of the family and reads the answer.
func (d *sockDiag) lookup(family uint8, src, dst netip.AddrPort) (uint32, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fd < 0 {
		return 0, errors.New("sock_diag socket closed")
	}
	d.seq++
	req := rtnl.AppendHeader(nil, rtnl.Header{Type: unix.SOCK_DIAG_BY_FAMILY, Flags: unix.NLM_F_REQUEST, Seq: d.seq},
		sizeofDiagReqV2)
	req = append(req, family, unix.IPPROTO_TCP, 0, 0)
	req = binary.NativeEndian.AppendUint32(req, ^uint32(0)) // every state
	req = appendSockID(req, src, dst)
	if err := unix.Sendto(d.fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, fmt.Errorf("sock_diag send: %w", err)
	}
	for {
		n, _, err := unix.Recvfrom(d.fd, d.buf, 0)
		if err != nil {
			return 0, fmt.Errorf("sock_diag receive: %w", err)
		}
		for b := d.buf[:n]; len(b) > 0; {
			h, body, rest, err := rtnl.NextMessage(b)
			if err != nil {
				return 0, fmt.Errorf("sock_diag answer: %w", err)
			}
			b = rest
			if h.Seq != d.seq {
				continue // the answer to an earlier request that timed out
			}
			switch h.Type {
			case unix.NLMSG_ERROR:
				errno, err := rtnl.ErrnoOf(body)
				if err != nil {
					return 0, fmt.Errorf("sock_diag answer: %w", err)
				}
				if unix.Errno(errno) == unix.ENOENT {
					return 0, errNoSocket
				}
				return 0, fmt.Errorf("sock_diag: %w", unix.Errno(errno))
			case unix.SOCK_DIAG_BY_FAMILY:
				return diagOwner(body, src, dst)
			}
		}
	}
}

// diagOwner checks that an inet_diag_msg is the socket asked for (the
// kernel falls back to a listener on the port) and returns its uid.
func diagOwner(m []byte, src, dst netip.AddrPort) (uint32, error) {
	if len(m) < sizeofDiagMsg {
		return 0, fmt.Errorf("sock_diag answer: %d bytes", len(m))
	}
	if m[1] == tcpListen || string(m[4:4+sockIDTupleLen]) != string(appendSockID(nil, src, dst)[:sockIDTupleLen]) {
		return 0, errNoSocket
	}
	return binary.NativeEndian.Uint32(m[diagMsgUIDOffset:]), nil
}

// appendSockID appends a struct inet_diag_sockid (ports and addresses in
// network order; any interface, no cookie).
func appendSockID(b []byte, src, dst netip.AddrPort) []byte {
	b = binary.BigEndian.AppendUint16(b, src.Port())
	b = binary.BigEndian.AppendUint16(b, dst.Port())
	for _, a := range []netip.Addr{src.Addr(), dst.Addr()} {
		var raw [16]byte
		if a.Is4() {
			v4 := a.As4()
			copy(raw[:], v4[:])
		} else {
			raw = a.As16()
		}
		b = append(b, raw[:]...)
	}
	b = binary.NativeEndian.AppendUint32(b, 0)          // idiag_if
	b = binary.NativeEndian.AppendUint32(b, ^uint32(0)) // INET_DIAG_NOCOOKIE
	return binary.NativeEndian.AppendUint32(b, ^uint32(0))
}
