package daemon

// The link monitor: a NETLINK_ROUTE socket subscribed to link messages
// (RTMGRP_LINK) in the daemon's namespace. Every RTM_NEWLINK/RTM_DELLINK
// says whether an interface is running (IFF_RUNNING: administratively up
// with carrier, the kernel's operstate UP); the daemon turns changes into
// the router's link down/up (Controller.SetCarrier), so routes fail over.
//
// Flow: run reads with a 200 ms timeout so it sees the stop channel; a
// state is reported only when it differs from the last one seen for that
// interface (the kernel repeats RTM_NEWLINK for unrelated attribute
// changes). A receive buffer overrun (ENOBUFS) re-reads every interface's
// state with a dump request.
//
// Locking: the monitor is owned by its goroutine; close is safe once.

import (
	"encoding/binary"
	"errors"
	"sync"
	"syscall"

	"github.com/netfwd/netfwd/internal/pktio"
	"golang.org/x/sys/unix"
)

type linkMonitor struct {
	fd       int
	closeMu  sync.Mutex
	isClosed bool // guarded by closeMu
	last     map[string]bool
}

func newLinkMonitor(netns string) (*linkMonitor, error) {
	m := &linkMonitor{fd: -1, last: map[string]bool{}}
	err := pktio.InNetns(netns, func() error {
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
		if err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: unix.RTMGRP_LINK}); err != nil {
			unix.Close(fd)
			return err
		}
		m.fd = fd
		return nil
	})
	if err != nil {
		return nil, err
	}
	tv := unix.Timeval{Usec: 200000}
	if err := unix.SetsockoptTimeval(m.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(m.fd)
		return nil, err
	}
	unix.SetsockoptInt(m.fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20)
	return m, nil
}

func (m *linkMonitor) close() error {
	m.closeMu.Lock()
	defer m.closeMu.Unlock()
	if m.isClosed {
		return nil
	}
	m.isClosed = true
	return unix.Close(m.fd)
}

// requestDump asks for every link's state.
func (m *linkMonitor) requestDump() error {
	req := make([]byte, unix.NLMSG_HDRLEN+unix.SizeofIfInfomsg)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], unix.RTM_GETLINK)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], 1)
	req[unix.NLMSG_HDRLEN] = unix.AF_UNSPEC
	return unix.Sendto(m.fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
}

// run reports link state changes until stop is closed.
func (m *linkMonitor) run(stop <-chan struct{}, report func(name string, up bool)) {
	defer m.close()
	// States may have changed between the ports' opening and the
	// subscription: start from a full dump.
	m.requestDump()
	buf := make([]byte, 1<<16)
	for {
		select {
		case <-stop:
			return
		default:
		}
		n, _, err := unix.Recvfrom(m.fd, buf, 0)
		if err != nil {
			switch {
			case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
			case errors.Is(err, unix.ENOBUFS):
				m.requestDump() // missed messages: re-read everything
			default:
				return // closed
			}
			continue
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			continue
		}
		for _, msg := range msgs {
			if msg.Header.Type != unix.RTM_NEWLINK && msg.Header.Type != unix.RTM_DELLINK {
				continue
			}
			name, up, ok := parseLink(msg)
			if !ok {
				continue
			}
			if prev, seen := m.last[name]; seen && prev == up {
				continue
			}
			m.last[name] = up
			report(name, up)
		}
	}
}

// parseLink reads the name and running state of a link message.
func parseLink(msg syscall.NetlinkMessage) (name string, up, ok bool) {
	if len(msg.Data) < unix.SizeofIfInfomsg {
		return "", false, false
	}
	flags := binary.NativeEndian.Uint32(msg.Data[8:12])
	up = flags&unix.IFF_RUNNING != 0 && flags&unix.IFF_UP != 0 && msg.Header.Type == unix.RTM_NEWLINK
	attrs, err := syscall.ParseNetlinkRouteAttr(&msg)
	if err != nil {
		return "", false, false
	}
	for _, a := range attrs {
		if a.Attr.Type == unix.IFLA_IFNAME {
			v := a.Value
			for len(v) > 0 && v[len(v)-1] == 0 {
				v = v[:len(v)-1]
			}
			return string(v), up, true
		}
	}
	return "", false, false
}
