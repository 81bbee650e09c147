package hostpath

// A small private rtnetlink client: just what the twins need (look a link
// up by name with its tun attributes, set MAC/MTU/up, delete a link, dump,
// add and delete IPv4 addresses), in the raw style of the daemon's link
// monitor. One NETLINK_ROUTE socket per Manager, created in the twins'
// namespace; requests are sent one at a time and every reply is read to
// its ack (or NLMSG_DONE for a dump). Extended acks are on, so the kernel's
// own error text ("Error: ...") reaches the caller.
//
// Locking: not safe for concurrent use; the Manager's lock serialises it.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"net/netip"
	"syscall"

	"github.com/netfwd/netfwd/internal/pktio"
	"golang.org/x/sys/unix"
)

type rtnl struct {
	fd  int
	seq uint32
	buf []byte
}

func dialRtnl(netns string) (*rtnl, error) {
	c := &rtnl{fd: -1, buf: make([]byte, 1<<16)}
	err := pktio.InNetns(netns, func() error {
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
		if err != nil {
			return err
		}
		c.fd = fd
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	if err := unix.Bind(c.fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(c.fd)
		return nil, fmt.Errorf("netlink bind: %w", err)
	}
	unix.SetsockoptInt(c.fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1)
	unix.SetsockoptInt(c.fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	// A reply that never comes must not hang Sync forever.
	tv := unix.Timeval{Sec: 5}
	unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	return c, nil
}

func (c *rtnl) close() error { return unix.Close(c.fd) }

// nlRequest builds one netlink message.
type nlRequest struct{ b []byte }

func newRequest(typ, flags uint16, fixed []byte) *nlRequest {
	r := &nlRequest{b: make([]byte, unix.NLMSG_HDRLEN, 256)}
	binary.NativeEndian.PutUint16(r.b[4:], typ)
	binary.NativeEndian.PutUint16(r.b[6:], flags)
	r.b = append(r.b, fixed...)
	return r
}

func (r *nlRequest) attr(typ uint16, data []byte) {
	r.b = binary.NativeEndian.AppendUint16(r.b, uint16(4+len(data)))
	r.b = binary.NativeEndian.AppendUint16(r.b, typ)
	r.b = append(r.b, data...)
	for len(r.b)%4 != 0 {
		r.b = append(r.b, 0)
	}
}

func (r *nlRequest) attrU32(typ uint16, v uint32) {
	r.attr(typ, binary.NativeEndian.AppendUint32(nil, v))
}

// nlError is an error the kernel answered, with its extended-ack text.
type nlError struct {
	op    string
	errno unix.Errno
	msg   string
}

func (e *nlError) Error() string {
	if e.msg != "" {
		return fmt.Sprintf("%s: %s (%v)", e.op, e.msg, e.errno)
	}
	return fmt.Sprintf("%s: %v", e.op, e.errno)
}

func (e *nlError) Unwrap() error { return e.errno }

// do sends r and reads the answer: each data message goes to onMsg, the
// ack or NLMSG_DONE ends it. Requests that are not dumps ask for an ack.
func (c *rtnl) do(op string, r *nlRequest, onMsg func(typ uint16, body []byte) error) error {
	c.seq++
	flags := binary.NativeEndian.Uint16(r.b[6:])
	dump := flags&unix.NLM_F_DUMP == unix.NLM_F_DUMP
	if !dump {
		binary.NativeEndian.PutUint16(r.b[6:], flags|unix.NLM_F_ACK)
	}
	binary.NativeEndian.PutUint32(r.b[0:], uint32(len(r.b)))
	binary.NativeEndian.PutUint32(r.b[8:], c.seq)
	if err := unix.Sendto(c.fd, r.b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("%s: netlink send: %w", op, err)
	}
	for {
		n, _, err := unix.Recvfrom(c.fd, c.buf, 0)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("%s: netlink receive: %w", op, err)
		}
		msgs, err := syscall.ParseNetlinkMessage(c.buf[:n])
		if err != nil {
			return fmt.Errorf("%s: netlink reply: %w", op, err)
		}
		for _, m := range msgs {
			if m.Header.Seq != c.seq {
				continue // a late answer to an earlier request
			}
			switch m.Header.Type {
			case unix.NLMSG_ERROR:
				return ackError(op, m)
			case unix.NLMSG_DONE:
				if len(m.Data) >= 4 {
					if code := int32(binary.NativeEndian.Uint32(m.Data)); code < 0 {
						return &nlError{op: op, errno: unix.Errno(-code)}
					}
				}
				return nil
			}
			if onMsg != nil {
				if err := onMsg(m.Header.Type, m.Data); err != nil {
					return err
				}
			}
		}
	}
}

// ackError reads an NLMSG_ERROR: code 0 is the ack.
func ackError(op string, m syscall.NetlinkMessage) error {
	if len(m.Data) < 4 {
		return fmt.Errorf("%s: short netlink error message", op)
	}
	code := int32(binary.NativeEndian.Uint32(m.Data))
	if code == 0 {
		return nil
	}
	e := &nlError{op: op, errno: unix.Errno(-code)}
	// Capped acks carry the request's header only; the TLVs follow it.
	if m.Header.Flags&unix.NLM_F_ACK_TLVS != 0 && len(m.Data) >= 4+unix.NLMSG_HDRLEN {
		off := 4 + unix.NLMSG_HDRLEN
		if m.Header.Flags&unix.NLM_F_CAPPED == 0 {
			off = 4 + int(binary.NativeEndian.Uint32(m.Data[4:]))
		}
		if off <= len(m.Data) {
			for t, v := range attrs(m.Data[off:]) {
				if t == unix.NLMSGERR_ATTR_MSG {
					e.msg = cString(v)
				}
			}
		}
	}
	return e
}

// attrs iterates over netlink attributes (type without the nested and
// byte-order flags).
func attrs(b []byte) iter.Seq2[uint16, []byte] {
	return func(yield func(uint16, []byte) bool) {
		for len(b) >= 4 {
			l := int(binary.NativeEndian.Uint16(b))
			t := binary.NativeEndian.Uint16(b[2:]) &^ (nlaFNested | nlaFNetByteorder)
			if l < 4 || l > len(b) {
				return
			}
			if !yield(t, b[4:l]) {
				return
			}
			b = b[min((l+3)&^3, len(b)):]
		}
	}
}

func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// errNoLink: no interface of that name.
var errNoLink = errors.New("no such interface")

// linkInfo is what the twins need to know about an interface.
type linkInfo struct {
	index int
	name  string
	flags uint32 // IFF_*
	mac   [6]byte
	mtu   int
	kind  string // IFLA_INFO_KIND ("tun" for TUN and TAP devices)
	alias string // IFLA_IFALIAS
	// For kind "tun":
	tunType       uint8  // IFF_TUN or IFF_TAP
	tunPersist    bool   // survives its last file
	tunMultiQueue bool   // IFF_MULTI_QUEUE
	tunQueues     uint32 // files attached, reported for multi-queue devices only
}

func (l linkInfo) isTAP() bool { return l.kind == "tun" && l.tunType == unix.IFF_TAP }

// linkByName looks an interface up; errNoLink when there is none.
func (c *rtnl) linkByName(name string) (linkInfo, error) {
	r := newRequest(unix.RTM_GETLINK, unix.NLM_F_REQUEST, make([]byte, unix.SizeofIfInfomsg))
	r.attr(unix.IFLA_IFNAME, append([]byte(name), 0))
	var li linkInfo
	found := false
	err := c.do("get link "+name, r, func(typ uint16, body []byte) error {
		if typ != unix.RTM_NEWLINK {
			return nil
		}
		var err error
		li, err = parseLink(body)
		found = err == nil
		return err
	})
	if errors.Is(err, unix.ENODEV) || err == nil && !found {
		return linkInfo{}, errNoLink
	}
	return li, err
}

func parseLink(body []byte) (linkInfo, error) {
	if len(body) < unix.SizeofIfInfomsg {
		return linkInfo{}, errors.New("short link message")
	}
	li := linkInfo{
		index: int(int32(binary.NativeEndian.Uint32(body[4:]))),
		flags: binary.NativeEndian.Uint32(body[8:]),
	}
	for t, v := range attrs(body[unix.SizeofIfInfomsg:]) {
		switch t {
		case unix.IFLA_IFNAME:
			li.name = cString(v)
		case unix.IFLA_IFALIAS:
			li.alias = cString(v)
		case unix.IFLA_ADDRESS:
			if len(v) == 6 {
				li.mac = [6]byte(v)
			}
		case unix.IFLA_MTU:
			if len(v) >= 4 {
				li.mtu = int(binary.NativeEndian.Uint32(v))
			}
		case unix.IFLA_LINKINFO:
			for it, iv := range attrs(v) {
				switch it {
				case unix.IFLA_INFO_KIND:
					li.kind = cString(iv)
				case unix.IFLA_INFO_DATA:
					parseTunInfo(&li, iv)
				}
			}
		}
	}
	return li, nil
}

func parseTunInfo(li *linkInfo, b []byte) {
	for t, v := range attrs(b) {
		switch {
		case t == unix.IFLA_TUN_TYPE && len(v) >= 1:
			li.tunType = v[0]
		case t == unix.IFLA_TUN_PERSIST && len(v) >= 1:
			li.tunPersist = v[0] != 0
		case t == unix.IFLA_TUN_MULTI_QUEUE && len(v) >= 1:
			li.tunMultiQueue = v[0] != 0
		case (t == unix.IFLA_TUN_NUM_QUEUES || t == unix.IFLA_TUN_NUM_DISABLED_QUEUES) && len(v) >= 4:
			li.tunQueues += binary.NativeEndian.Uint32(v)
		}
	}
}

func ifinfomsg(index int, flags, change uint32) []byte {
	b := make([]byte, unix.SizeofIfInfomsg)
	binary.NativeEndian.PutUint32(b[4:], uint32(index))
	binary.NativeEndian.PutUint32(b[8:], flags)
	binary.NativeEndian.PutUint32(b[12:], change)
	return b
}

// setLink sets an interface's MAC and MTU and brings it up.
func (c *rtnl) setLink(index int, mac [6]byte, mtu int) error {
	r := newRequest(unix.RTM_NEWLINK, unix.NLM_F_REQUEST, ifinfomsg(index, unix.IFF_UP, unix.IFF_UP))
	r.attr(unix.IFLA_ADDRESS, mac[:])
	r.attrU32(unix.IFLA_MTU, uint32(mtu))
	return c.do("set link", r, nil)
}

// setAlias sets an interface's ifalias.
func (c *rtnl) setAlias(index int, alias string) error {
	r := newRequest(unix.RTM_NEWLINK, unix.NLM_F_REQUEST, ifinfomsg(index, 0, 0))
	r.attr(unix.IFLA_IFALIAS, append([]byte(alias), 0))
	return c.do("set alias", r, nil)
}

// links lists every interface of the namespace.
func (c *rtnl) links() ([]linkInfo, error) {
	var out []linkInfo
	err := c.do("dump links", newRequest(unix.RTM_GETLINK, unix.NLM_F_REQUEST|unix.NLM_F_DUMP, make([]byte, unix.SizeofIfInfomsg)),
		func(typ uint16, body []byte) error {
			if typ != unix.RTM_NEWLINK {
				return nil
			}
			li, err := parseLink(body)
			if err == nil {
				out = append(out, li)
			}
			return err
		})
	return out, err
}

// delLink deletes an interface.
func (c *rtnl) delLink(index int) error {
	return c.do("delete link", newRequest(unix.RTM_DELLINK, unix.NLM_F_REQUEST, ifinfomsg(index, 0, 0)), nil)
}

// kernelAddr is one IPv4 address as the kernel lists it.
type kernelAddr struct {
	index     int
	prefix    netip.Prefix
	secondary bool
}

// addrs lists every IPv4 address of the namespace, in the kernel's order
// (per interface: primaries, then secondaries).
func (c *rtnl) addrs() ([]kernelAddr, error) {
	fixed := make([]byte, unix.SizeofIfAddrmsg)
	fixed[0] = unix.AF_INET
	var out []kernelAddr
	err := c.do("dump addresses", newRequest(unix.RTM_GETADDR, unix.NLM_F_REQUEST|unix.NLM_F_DUMP, fixed),
		func(typ uint16, body []byte) error {
			if typ != unix.RTM_NEWADDR || len(body) < unix.SizeofIfAddrmsg || body[0] != unix.AF_INET {
				return nil
			}
			a := kernelAddr{index: int(binary.NativeEndian.Uint32(body[4:]))}
			flags := uint32(body[2])
			var local, address netip.Addr
			for t, v := range attrs(body[unix.SizeofIfAddrmsg:]) {
				switch {
				case t == unix.IFA_LOCAL && len(v) == 4:
					local = netip.AddrFrom4([4]byte(v))
				case t == unix.IFA_ADDRESS && len(v) == 4:
					address = netip.AddrFrom4([4]byte(v))
				case t == unix.IFA_FLAGS && len(v) >= 4:
					flags = binary.NativeEndian.Uint32(v)
				}
			}
			if !local.IsValid() {
				local = address
			}
			if !local.IsValid() {
				return nil
			}
			a.prefix = netip.PrefixFrom(local, int(body[1]))
			a.secondary = flags&unix.IFA_F_SECONDARY != 0
			out = append(out, a)
			return nil
		})
	return out, err
}

func ifaddrmsg(index int, p netip.Prefix) []byte {
	b := make([]byte, unix.SizeofIfAddrmsg)
	b[0] = unix.AF_INET
	b[1] = byte(p.Bits())
	binary.NativeEndian.PutUint32(b[4:], uint32(index))
	return b
}

// addAddr adds an address as `ip addr add A/L brd + dev D` does: the
// broadcast is the subnet's last address for L < 31, as netfwd shows it.
func (c *rtnl) addAddr(index int, p netip.Prefix) error {
	r := newRequest(unix.RTM_NEWADDR, unix.NLM_F_REQUEST|unix.NLM_F_CREATE|unix.NLM_F_EXCL, ifaddrmsg(index, p))
	a := p.Addr().As4()
	r.attr(unix.IFA_LOCAL, a[:])
	r.attr(unix.IFA_ADDRESS, a[:])
	if p.Bits() < 31 {
		b := lastAddr(p).As4()
		r.attr(unix.IFA_BROADCAST, b[:])
	}
	return c.do("add address "+p.String(), r, nil)
}

// delAddr deletes one address (matching address and length).
func (c *rtnl) delAddr(index int, p netip.Prefix) error {
	r := newRequest(unix.RTM_DELADDR, unix.NLM_F_REQUEST, ifaddrmsg(index, p))
	a := p.Addr().As4()
	r.attr(unix.IFA_LOCAL, a[:])
	return c.do("delete address "+p.String(), r, nil)
}

// lastAddr is the last address of p's subnet.
func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Addr().As4()
	v := binary.BigEndian.Uint32(a[:]) | (1<<(32-p.Bits()) - 1)
	binary.BigEndian.PutUint32(a[:], v)
	return netip.AddrFrom4(a)
}

// Attribute type flags (NLA_F_NESTED, NLA_F_NET_BYTEORDER).
const (
	nlaFNested       = 1 << 15
	nlaFNetByteorder = 1 << 14
)
