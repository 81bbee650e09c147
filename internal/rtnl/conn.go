package rtnl

// Conn is a NETLINK_ROUTE socket: requests (dumps), multicast group
// subscriptions, and the receive loop's buffer.
//
// Flow: Open creates the socket in the calling thread's network namespace
// (wrap it in pktio.InNetns for another one) and joins the groups; Request
// sends a request; Receive returns the next datagram (one or more
// messages, see NextMessage). Keep dumps on a socket of their own: an
// overrun of a subscribed socket can make the kernel refuse a dump running
// on it (ENOBUFS, then EBUSY for the next request).
//
// Errors: Receive reports a receive buffer overrun (ENOBUFS: notifications
// were lost) as ErrOverrun, and a read timeout (SetReadTimeout) as
// ErrTimeout, so loops can check for shutdown.
//
// Locking: a Conn belongs to one goroutine; Close is safe to call once
// from anywhere after that goroutine stopped using it.

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// Multicast groups (enum rtnetlink_groups).
const (
	RTNLGRP_LINK        = 1
	RTNLGRP_NEIGH       = 3
	RTNLGRP_IPV4_IFADDR = 5
	RTNLGRP_IPV4_ROUTE  = 7
	RTNLGRP_NEXTHOP     = 32
)

// Receive's errors.
var (
	ErrOverrun = errors.New("rtnetlink: receive buffer overrun, notifications lost (ENOBUFS)")
	ErrTimeout = errors.New("rtnetlink: read timeout")
)

// Conn is an open NETLINK_ROUTE socket.
type Conn struct {
	fd  int
	pid uint32
	seq uint32
	buf []byte
}

// Open opens a NETLINK_ROUTE socket in the current thread's namespace and
// joins the given groups (RTNLGRP_*).
func Open(groups ...uint32) (*Conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, err
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	for _, g := range groups {
		if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, int(g)); err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	c := &Conn{fd: fd, seq: uint32(time.Now().UnixNano()), buf: make([]byte, 1<<18)}
	if nl, ok := sa.(*unix.SockaddrNetlink); ok {
		c.pid = nl.Pid
	}
	return c, nil
}

// Fd returns the socket's file descriptor (for poll).
func (c *Conn) Fd() int { return c.fd }

// PortID is the socket's netlink port id: the PID of the replies to its
// requests.
func (c *Conn) PortID() uint32 { return c.pid }

// SetReceiveBuffer sets the socket's receive buffer: SO_RCVBUFFORCE (root:
// past net.core.rmem_max), else SO_RCVBUF. The kernel doubles the value
// for its bookkeeping; ReceiveBuffer reports what it holds.
func (c *Conn) SetReceiveBuffer(bytes int) error {
	if err := unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, bytes); err == nil {
		return nil
	}
	return unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_RCVBUF, bytes)
}

// ReceiveBuffer returns the socket's receive buffer size (SO_RCVBUF).
func (c *Conn) ReceiveBuffer() int {
	n, _ := unix.GetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
	return n
}

// SetReadTimeout makes Receive return ErrTimeout after d without data.
func (c *Conn) SetReadTimeout(d time.Duration) error {
	tv := unix.NsecToTimeval(d.Nanoseconds())
	return unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
}

// Request sends one request with the given body and returns its sequence
// number.
func (c *Conn) Request(typ, flags uint16, body []byte) (uint32, error) {
	c.seq++
	b := AppendHeader(make([]byte, 0, HeaderLen+len(body)), Header{Type: typ, Flags: flags | NLM_F_REQUEST, Seq: c.seq}, len(body))
	b = append(b, body...)
	return c.seq, unix.Sendto(c.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
}

// DumpRequest asks for a dump of one object kind (RTM_GETROUTE,
// RTM_GETNEXTHOP, RTM_GETNEIGH, RTM_GETADDR, RTM_GETLINK) of a family.
func (c *Conn) DumpRequest(typ uint16, family uint8) (uint32, error) {
	var body []byte
	switch typ {
	case RTM_GETROUTE:
		body = make([]byte, SizeofRtMsg)
	case RTM_GETNEXTHOP:
		body = make([]byte, SizeofNhMsg)
	case RTM_GETNEIGH:
		body = make([]byte, SizeofNdMsg)
	case RTM_GETADDR:
		body = make([]byte, SizeofIfAddrmsg)
	default:
		body = make([]byte, SizeofIfInfomsg)
	}
	body[0] = family
	return c.Request(typ, NLM_F_DUMP, body)
}

// Receive reads the next datagram. The returned bytes are valid until the
// next call.
func (c *Conn) Receive() ([]byte, error) { return c.recv(0, ErrTimeout) }

// TryReceive reads the next datagram if one is queued (nil if none), without
// blocking.
func (c *Conn) TryReceive() ([]byte, error) { return c.recv(unix.MSG_DONTWAIT, nil) }

// recv reads one datagram; EAGAIN (the receive timeout, or nothing queued
// with MSG_DONTWAIT) returns onEmpty.
func (c *Conn) recv(flags int, onEmpty error) ([]byte, error) {
	for {
		n, _, err := unix.Recvfrom(c.fd, c.buf, flags)
		switch {
		case err == nil:
			return c.buf[:n], nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return nil, onEmpty
		case errors.Is(err, unix.ENOBUFS):
			return nil, ErrOverrun
		}
		return nil, err
	}
}

// Close closes the socket.
func (c *Conn) Close() error { return unix.Close(c.fd) }

// IsReply reports whether a message answers request seq of this socket.
func (c *Conn) IsReply(h Header, seq uint32) bool { return h.PID == c.pid && h.Seq == seq }

// Dump runs one dump on the socket and calls fn for every message of the
// reply (not NLMSG_DONE). Messages that are not part of the reply (group
// notifications on a subscribed socket) go to other, which may be nil.
// A socket whose receive buffer overruns returns ErrOverrun.
func (c *Conn) Dump(typ uint16, family uint8, fn func(Header, []byte) error, other func(Header, []byte) error) error {
	seq, err := c.DumpRequest(typ, family)
	if err != nil {
		return err
	}
	for {
		b, err := c.Receive()
		if err != nil {
			return err
		}
		for len(b) > 0 {
			h, body, rest, err := NextMessage(b)
			if err != nil {
				return err
			}
			b = rest
			if !c.IsReply(h, seq) {
				if other != nil {
					if err := other(h, body); err != nil {
						return err
					}
				}
				continue
			}
			switch h.Type {
			case NLMSG_DONE:
				return nil
			case NLMSG_ERROR:
				errno, err := ErrnoOf(body)
				if err != nil {
					return err
				}
				if errno != 0 {
					return unix.Errno(errno)
				}
				return nil
			}
			if err := fn(h, body); err != nil {
				return err
			}
		}
	}
}
