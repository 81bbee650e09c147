package hostpath

// Punt classes: each twin rate-limits three kinds of traffic separately
// (the idea of a router's control-plane policing, CoPP), so a flood of one
// kind (TCP SYNs at the router's address, ARP requests) does not starve
// the others (a BGP keepalive, a BFD packet). The classifier is
// wire.MatchControl, over the table of control protocols that pktio's
// control-ring filter is generated from; anything it cannot place is Other.
//
// Known limit: the routing class is recognised by protocol and port, which
// a sender can forge; a flood that forges them (TCP to port 179) competes
// with the real sessions of that class only. Per-peer filtering is for a
// later ACL.
//
// Locking: none; pure functions.

import (
	"encoding/binary"

	"github.com/netfwd/netfwd/wire"
)

// Class is a punt traffic class.
type Class uint8

const (
	// ClassNeigh: the neighbour protocols (wire.ControlNeigh: ARP; IPv6
	// ND when punted).
	ClassNeigh Class = iota
	// ClassRouting: routing and liveness protocols (wire.ControlRouting:
	// BGP, OSPF, VRRP, PIM, IGMP, BFD, RIP).
	ClassRouting
	// ClassOther: everything else punted (SSH, SNMP, TCP and UDP to the
	// router's addresses, broadcasts).
	ClassOther
	// NumClasses counts the classes.
	NumClasses
)

var classNames = [NumClasses]string{"neigh", "routing", "other"}

func (c Class) String() string {
	if c < NumClasses {
		return classNames[c]
	}
	return "invalid"
}

// ParseClass reads a class name as String writes it.
func ParseClass(s string) (Class, bool) {
	for i, n := range classNames {
		if n == s {
			return Class(i), true
		}
	}
	return 0, false
}

// Classify says which class the frame is: its network header starts at
// frame[l3:] and the EtherType is the two bytes before it.
func Classify(frame []byte, l3 int) Class {
	if c := wire.MatchControl(frame, l3); c != nil {
		switch c.Class {
		case wire.ControlNeigh:
			return ClassNeigh
		case wire.ControlRouting:
			return ClassRouting
		}
	}
	return ClassOther
}

// l3Offset finds the network header of an Ethernet frame: behind the MAC
// addresses and any 802.1Q/802.1ad tags. It returns 0 when the frame is too
// short.
func l3Offset(frame []byte) int {
	off := 12
	for {
		if len(frame) < off+2 {
			return 0
		}
		switch binary.BigEndian.Uint16(frame[off:]) {
		case wire.EtherTypeVLAN, wire.EtherTypeQinQ:
			off += wire.VLANTagLen
		default:
			return off + 2
		}
	}
}
