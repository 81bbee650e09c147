package daemon

// The link monitor: a NETLINK_ROUTE socket subscribed to link messages
// (RTMGRP_LINK) in the daemon's namespace. Every RTM_NEWLINK/RTM_DELLINK
// says an interface's index, whether it is running (IFF_RUNNING:
// administratively up with carrier, the kernel's operstate UP) and its MTU;
// the daemon follows them (linkevents.go): carrier into the router's link
// state so routes fail over, MTU into the interface, and a deleted and
// re-created interface into a re-opened port.
//
// Flow: run reads with a 200 ms timeout so it sees the stop channel; a
// state is reported only when it differs from the last one seen for that
// interface (the kernel repeats RTM_NEWLINK for unrelated attribute
// changes); deletions always. A receive buffer overrun (ENOBUFS) re-reads every interface's
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
	last     map[string]linkEvent
}

func newLinkMonitor(netns string) (*linkMonitor, error) {
	m := &linkMonitor{fd: -1, last: map[string]linkEvent{}}
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

// linkEvent is one interface's state as a link message reports it.
type linkEvent struct {
	name    string
	index   int
	up      bool // IFF_UP and IFF_RUNNING: administratively up with carrier
	mtu     int  // 0: not reported
	deleted bool // RTM_DELLINK
}

// run reports link changes until stop is closed: an event whenever an
// interface's index, running state or MTU differs from the last one seen,
// and every deletion.
func (m *linkMonitor) run(stop <-chan struct{}, report func(linkEvent)) {
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
		// read(2), not recvfrom: unix.Recvfrom allocates the sender's
		// address on every call, timeouts included (a few hundred bytes a
		// second of garbage in a daemon whose datapath allocates nothing).
		n, err := unix.Read(m.fd, buf)
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
			ev, ok := parseLink(msg)
			if !ok {
				continue
			}
			if ev.deleted {
				delete(m.last, ev.name)
				report(ev)
				continue
			}
			if prev, seen := m.last[ev.name]; seen && prev == ev {
				continue
			}
			m.last[ev.name] = ev
			report(ev)
		}
	}
}

// parseLink reads the name, index, running state and MTU of a link
// message.
func parseLink(msg syscall.NetlinkMessage) (ev linkEvent, ok bool) {
	if len(msg.Data) < unix.SizeofIfInfomsg {
		return ev, false
	}
	ev.index = int(int32(binary.NativeEndian.Uint32(msg.Data[4:8])))
	flags := binary.NativeEndian.Uint32(msg.Data[8:12])
	ev.deleted = msg.Header.Type == unix.RTM_DELLINK
	ev.up = flags&unix.IFF_RUNNING != 0 && flags&unix.IFF_UP != 0 && !ev.deleted
	attrs, err := syscall.ParseNetlinkRouteAttr(&msg)
	if err != nil {
		return ev, false
	}
	for _, a := range attrs {
		switch a.Attr.Type {
		case unix.IFLA_IFNAME:
			v := a.Value
			for len(v) > 0 && v[len(v)-1] == 0 {
				v = v[:len(v)-1]
			}
			ev.name = string(v)
		case unix.IFLA_MTU:
			if len(a.Value) >= 4 {
				ev.mtu = int(binary.NativeEndian.Uint32(a.Value))
			}
		}
	}
	return ev, ev.name != ""
}
