package hostpath

// Punt classes: each twin rate-limits three kinds of traffic separately
// (the idea of a router's control-plane policing, CoPP), so a flood of one
// kind (TCP SYNs at the router's address, ARP requests) does not starve
// the others (a BGP keepalive, a BFD packet). The classifier reads a few
// header fields of the frame; anything it cannot place is Other.
//
// Known limit: the routing class is recognised by protocol and port, which
// a sender can forge; a flood that forges them (TCP to port 179) competes
// with the real sessions of that class only. Per-peer filtering is for a
// later ACL.
//
// Locking: none; pure functions.

import "encoding/binary"

// Class is a punt traffic class.
type Class uint8

const (
	// ClassNeigh: the neighbour protocols (ARP; IPv6 ND when punted).
	ClassNeigh Class = iota
	// ClassRouting: routing and liveness protocols: BGP (TCP port 179,
	// either side), OSPF (89), VRRP (112), PIM (103), IGMP (2), BFD (UDP
	// 3784, 3785, 4784), RIP (UDP 520).
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

// EtherTypes and IP protocols the classifier knows.
const (
	etherTypeIPv4 = 0x0800
	etherTypeARP  = 0x0806
	etherTypeIPv6 = 0x86dd
	etherTypeVLAN = 0x8100
	etherTypeQinQ = 0x88a8
	protoIGMP     = 2
	protoTCP      = 6
	protoUDP      = 17
	protoICMPv6   = 58
	protoOSPF     = 89
	protoPIM      = 103
	protoVRRP     = 112
)

// Classify says which class the frame is: its network header starts at
// frame[l3:] and the EtherType is the two bytes before it.
func Classify(frame []byte, l3 int) Class {
	if l3 < 2 || l3 > len(frame) {
		return ClassOther
	}
	p := frame[l3:]
	switch binary.BigEndian.Uint16(frame[l3-2:]) {
	case etherTypeARP:
		return ClassNeigh
	case etherTypeIPv4:
		return classifyIPv4(p)
	case etherTypeIPv6:
		// Fixed header only: ND (ICMPv6 133-137) right behind it.
		if len(p) >= 41 && p[6] == protoICMPv6 && p[40] >= 133 && p[40] <= 137 {
			return ClassNeigh
		}
	}
	return ClassOther
}

func classifyIPv4(p []byte) Class {
	if len(p) < 20 || p[0]>>4 != 4 {
		return ClassOther
	}
	switch p[9] {
	case protoOSPF, protoVRRP, protoPIM, protoIGMP:
		return ClassRouting
	case protoTCP, protoUDP:
	default:
		return ClassOther
	}
	ihl := int(p[0]&15) * 4
	if binary.BigEndian.Uint16(p[6:])&0x1fff != 0 || len(p) < ihl+4 {
		return ClassOther // a later fragment: no ports to read
	}
	sport := binary.BigEndian.Uint16(p[ihl:])
	dport := binary.BigEndian.Uint16(p[ihl+2:])
	if p[9] == protoTCP {
		if sport == 179 || dport == 179 {
			return ClassRouting
		}
		return ClassOther
	}
	switch dport {
	case 3784, 3785, 4784, 520:
		return ClassRouting
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
		case etherTypeVLAN, etherTypeQinQ:
			off += 4
		default:
			return off + 2
		}
	}
}
