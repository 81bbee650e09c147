package fpm

// FPM framing and the decoding of one frame's netlink messages.
//
// A frame is a 4-byte header (version 1, type 1 = netlink or 2 = protobuf,
// big-endian length including the header) and a payload; a netlink payload
// holds one or more netlink messages (zebra writes one per frame, an update
// without route replace as RTM_DELROUTE + RTM_NEWROUTE in one frame).
//
// Flow: NextFrame finds a complete frame at the start of a buffer;
// Frame.Decode decodes all its messages into reused structs before anything
// is applied, so a frame with any malformed message applies nothing.
//
// Locking: none (a Frame belongs to its connection).

import (
	"encoding/binary"

	"github.com/netfwd/netfwd/internal/rtnl"
)

// FPM header constants.
const (
	HeaderLen       = 4
	Version         = 1
	TypeNetlink     = 1
	TypeProtobuf    = 2
	MaxFrameLen     = 1<<16 - 1
	maxMessagesPerF = 64 // more netlink messages in one frame is malformed
)

// Malformed-frame reasons (metric labels).
var (
	ErrVersion     = &rtnl.Error{Reason: "fpm version"}
	ErrFrameLength = &rtnl.Error{Reason: "fpm frame length"}
	ErrEmptyFrame  = &rtnl.Error{Reason: "empty netlink frame"}
	ErrTooMany     = &rtnl.Error{Reason: "too many messages in a frame"}
)

// NextFrame looks for a complete frame at the start of b. It returns the
// frame's type and payload and the number of bytes it occupies; n == 0 with
// a nil error means b holds only part of a frame.
func NextFrame(b []byte) (typ uint8, payload []byte, n int, err error) {
	if len(b) < HeaderLen {
		return 0, nil, 0, nil
	}
	if b[0] != Version {
		return 0, nil, 0, ErrVersion
	}
	l := int(binary.BigEndian.Uint16(b[2:]))
	if l < HeaderLen {
		return 0, nil, 0, ErrFrameLength
	}
	if l > len(b) {
		return 0, nil, 0, nil
	}
	return b[1], b[HeaderLen:l], l, nil
}

// AppendFrame appends a netlink frame holding msgs (one or more complete
// netlink messages).
func AppendFrame(b []byte, msgs []byte) []byte {
	b = append(b, Version, TypeNetlink)
	b = binary.BigEndian.AppendUint16(b, uint16(HeaderLen+len(msgs)))
	return append(b, msgs...)
}

// Message is one decoded netlink message of a frame: Route is valid for
// RTM_NEWROUTE/RTM_DELROUTE, Nexthop for RTM_NEWNEXTHOP/RTM_DELNEXTHOP.
type Message struct {
	Type    uint16
	Flags   uint16
	Route   rtnl.Route
	Nexthop rtnl.Nexthop
}

// Frame holds the decoded messages of one frame; its slices are reused.
type Frame struct {
	Msgs []Message
	// Unknown counts messages of types the decoder skips.
	Unknown int
}

// Decode decodes every message of a netlink payload. On error the frame is
// malformed and none of it may be applied.
func (f *Frame) Decode(payload []byte) error {
	f.Msgs, f.Unknown = f.Msgs[:0], 0
	if len(payload) == 0 {
		return ErrEmptyFrame
	}
	for b := payload; len(b) > 0; {
		h, body, rest, err := rtnl.NextMessage(b)
		if err != nil {
			return err
		}
		b = rest
		switch h.Type {
		case rtnl.RTM_NEWROUTE, rtnl.RTM_DELROUTE, rtnl.RTM_NEWNEXTHOP, rtnl.RTM_DELNEXTHOP:
		default:
			f.Unknown++
			continue
		}
		if len(f.Msgs) == maxMessagesPerF {
			return ErrTooMany
		}
		if len(f.Msgs) < cap(f.Msgs) {
			f.Msgs = f.Msgs[:len(f.Msgs)+1]
		} else {
			f.Msgs = append(f.Msgs, Message{})
		}
		m := &f.Msgs[len(f.Msgs)-1]
		m.Type, m.Flags = h.Type, h.Flags
		if h.Type == rtnl.RTM_NEWROUTE || h.Type == rtnl.RTM_DELROUTE {
			err = m.Route.Decode(body)
		} else {
			err = m.Nexthop.Decode(body)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
