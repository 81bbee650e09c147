// Package rtnl reads and writes rtnetlink messages (routes, nexthop objects,
// neighbours, links, addresses) and talks to the kernel over a NETLINK_ROUTE
// socket: dump requests and group subscriptions.
//
// It serves two readers of route streams: the FPM server (FRR's zebra sends
// the same netlink messages over TCP) and the kernel mirror. Both decode
// hundreds of thousands of messages per second, so decoding works in place:
// a message decodes into a caller-owned struct whose slices are reused, and
// nothing allocates per message.
//
// Flow: NextMessage splits a buffer into messages; the Decode methods of
// Route, Nexthop, Neigh, Link and Addr fill their struct from a message
// body (the bytes after the netlink header); the Append functions build
// messages (requests, tests, recorded streams). Conn (conn.go) is the
// socket.
//
// Errors: every way a message can be malformed is a *Error with a short,
// stable reason, so callers count them by reason.
//
// Locking: none; values are owned by their caller.
package rtnl

import (
	"encoding/binary"
	"strings"
)

// Message types and flags the package's users need beyond x/sys/unix.
const (
	// RTM_* (linux/rtnetlink.h).
	RTM_NEWLINK     = 16
	RTM_DELLINK     = 17
	RTM_GETLINK     = 18
	RTM_NEWADDR     = 20
	RTM_DELADDR     = 21
	RTM_GETADDR     = 22
	RTM_NEWROUTE    = 24
	RTM_DELROUTE    = 25
	RTM_GETROUTE    = 26
	RTM_NEWNEIGH    = 28
	RTM_DELNEIGH    = 29
	RTM_GETNEIGH    = 30
	RTM_NEWNEXTHOP  = 104
	RTM_DELNEXTHOP  = 105
	RTM_GETNEXTHOP  = 106
	NLMSG_NOOP      = 1
	NLMSG_ERROR     = 2
	NLMSG_DONE      = 3
	NLMSG_OVERRUN   = 4
	NLM_F_REQUEST   = 0x1
	NLM_F_MULTI     = 0x2
	NLM_F_ACK       = 0x4
	NLM_F_DUMP_INTR = 0x10
	NLM_F_ROOT      = 0x100
	NLM_F_MATCH     = 0x200
	NLM_F_DUMP      = NLM_F_ROOT | NLM_F_MATCH
	NLM_F_REPLACE   = 0x100
	NLM_F_EXCL      = 0x200
	NLM_F_CREATE    = 0x400
	NLM_F_APPEND    = 0x800

	// HeaderLen is sizeof(struct nlmsghdr).
	HeaderLen = 16

	AF_UNSPEC = 0
	AF_INET   = 2
	AF_INET6  = 10
)

// Header is a netlink message header (struct nlmsghdr).
type Header struct {
	Len   uint32 // whole message, header included, before alignment
	Type  uint16
	Flags uint16
	Seq   uint32
	PID   uint32
}

// Error is a decoding error; Reason is short and stable, and its metric
// label (Label) is Reason in snake_case, as every label value of netfwd's.
type Error struct{ Reason string }

func (e *Error) Error() string { return "rtnetlink: " + e.Reason }

// Label is the reason as a metric label value: "bad_address_length".
func (e *Error) Label() string { return strings.ReplaceAll(e.Reason, " ", "_") }

// The ways a message can be malformed.
var (
	ErrShortHeader   = &Error{"short netlink header"}
	ErrMessageLength = &Error{"bad netlink message length"}
	ErrShortBody     = &Error{"short message body"}
	ErrAttrLength    = &Error{"bad attribute length"}
	ErrAddrLength    = &Error{"bad address length"}
	ErrValueLength   = &Error{"bad attribute value length"}
	ErrPrefixLength  = &Error{"bad prefix length"}
	ErrMultipath     = &Error{"bad multipath nexthop"}
	ErrGroup         = &Error{"bad nexthop group"}
)

// align4 rounds n up to the netlink alignment (NLMSG_ALIGN, RTA_ALIGN).
func align4(n int) int { return (n + 3) &^ 3 }

// NextMessage splits the first message off b: its header, its body (the
// bytes after the header, up to Len) and what follows it (aligned). b must
// start at a message boundary.
func NextMessage(b []byte) (h Header, body, rest []byte, err error) {
	if len(b) < HeaderLen {
		return h, nil, nil, ErrShortHeader
	}
	h = Header{
		Len:   binary.NativeEndian.Uint32(b[0:]),
		Type:  binary.NativeEndian.Uint16(b[4:]),
		Flags: binary.NativeEndian.Uint16(b[6:]),
		Seq:   binary.NativeEndian.Uint32(b[8:]),
		PID:   binary.NativeEndian.Uint32(b[12:]),
	}
	if h.Len < HeaderLen || uint64(h.Len) > uint64(len(b)) {
		return h, nil, nil, ErrMessageLength
	}
	body = b[HeaderLen:h.Len]
	next := align4(int(h.Len))
	if next > len(b) {
		next = len(b) // the last message of a buffer need not be padded
	}
	return h, body, b[next:], nil
}

// AppendHeader appends a header for a message whose body will be bodyLen
// bytes long.
func AppendHeader(b []byte, h Header, bodyLen int) []byte {
	h.Len = uint32(HeaderLen + bodyLen)
	b = binary.NativeEndian.AppendUint32(b, h.Len)
	b = binary.NativeEndian.AppendUint16(b, h.Type)
	b = binary.NativeEndian.AppendUint16(b, h.Flags)
	b = binary.NativeEndian.AppendUint32(b, h.Seq)
	return binary.NativeEndian.AppendUint32(b, h.PID)
}

// beginMessage appends a header with a zero length and returns where the
// message starts; endMessage fills the length in.
func beginMessage(b []byte, typ, flags uint16, seq uint32) ([]byte, int) {
	start := len(b)
	return AppendHeader(b, Header{Type: typ, Flags: flags, Seq: seq}, 0), start
}

func endMessage(b []byte, start int) []byte {
	binary.NativeEndian.PutUint32(b[start:], uint32(len(b)-start))
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// ErrnoOf returns the errno of an NLMSG_ERROR body (0 is an ACK).
func ErrnoOf(body []byte) (int32, error) {
	if len(body) < 4 {
		return 0, ErrShortBody
	}
	return -int32(binary.NativeEndian.Uint32(body)), nil
}

func putU32(b []byte, v uint32) { binary.NativeEndian.PutUint32(b, v) }
