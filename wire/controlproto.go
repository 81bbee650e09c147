package wire

// Control-plane protocols: the frames a router must not lose to a data
// flood (neighbour resolution, routing and liveness protocols). ControlProtos
// is the one list of them, read by two classifiers that must agree (a test
// runs both over the same frames):
//
//   - pktio's socket filters (ControlFilter, DataFilter: cBPF generated from
//     the table), which steer control frames to a ring of their own in the
//     kernel, before a full data ring can drop them;
//   - MatchControl (Go), with which the host path picks the rate-limit class
//     of a frame it punts to the kernel.
//
// What an entry matches, in both: the EtherType (behind at most the tags the
// caller skipped); for IPv4, version 4 and the protocol; for ports, a first
// fragment (offset 0) and the port read behind the header length the IHL
// gives. A field that lies beyond the frame does not match. A protocol
// number or a port can be forged; the classes only keep floods of one kind
// away from the others.
//
// Locking: none; the table is read-only.

import "encoding/binary"

// ControlClass is the kind of control traffic an entry is.
type ControlClass uint8

const (
	// NotControl: no entry matches.
	NotControl ControlClass = iota
	// ControlNeigh: neighbour resolution (ARP, IPv6 ND).
	ControlNeigh
	// ControlRouting: routing and liveness protocols.
	ControlRouting
)

// PortMatch says which TCP/UDP port an entry's Port is compared with.
type PortMatch uint8

const (
	// AnyPort: the IP protocol alone decides.
	AnyPort PortMatch = iota
	// DstPort: the destination port.
	DstPort
	// EitherPort: the source or the destination port (a session protocol
	// such as BGP, whose replies come from the well-known port).
	EitherPort
)

// ControlProto is one control protocol.
type ControlProto struct {
	Name      string
	Class     ControlClass
	EtherType uint16
	// IPProto is the IPv4 protocol (EtherTypeIPv4) or the IPv6 next header
	// in the fixed header (EtherTypeIPv6); 0 for other EtherTypes.
	IPProto uint8
	// Ports and Port select by TCP/UDP port.
	Ports PortMatch
	Port  uint16
	// ICMPv6Type, with IPProto ProtoICMPv6, is the message type right
	// behind the fixed IPv6 header.
	ICMPv6Type uint8
	// HostOnly: the socket filters leave it to the data rings (the
	// dataplane forwards IPv4 only; IPv6 reaches the host path, which
	// classifies it when punting).
	HostOnly bool
}

// IP protocols of control traffic (ProtoIGMP is in ipv4.go).
const (
	ProtoICMPv6 = 58
	ProtoOSPF   = 89
	ProtoPIM    = 103
	ProtoVRRP   = 112
)

// ControlProtos is the list of control protocols. Read-only: MatchControl
// uses an index built from it when the package is initialised.
var ControlProtos = []ControlProto{
	{Name: "arp", Class: ControlNeigh, EtherType: EtherTypeARP},
	{Name: "nd-router-solicit", Class: ControlNeigh, EtherType: EtherTypeIPv6, IPProto: ProtoICMPv6, ICMPv6Type: 133, HostOnly: true},
	{Name: "nd-router-advert", Class: ControlNeigh, EtherType: EtherTypeIPv6, IPProto: ProtoICMPv6, ICMPv6Type: 134, HostOnly: true},
	{Name: "nd-neighbor-solicit", Class: ControlNeigh, EtherType: EtherTypeIPv6, IPProto: ProtoICMPv6, ICMPv6Type: 135, HostOnly: true},
	{Name: "nd-neighbor-advert", Class: ControlNeigh, EtherType: EtherTypeIPv6, IPProto: ProtoICMPv6, ICMPv6Type: 136, HostOnly: true},
	{Name: "nd-redirect", Class: ControlNeigh, EtherType: EtherTypeIPv6, IPProto: ProtoICMPv6, ICMPv6Type: 137, HostOnly: true},
	{Name: "igmp", Class: ControlRouting, EtherType: EtherTypeIPv4, IPProto: ProtoIGMP},
	{Name: "ospf", Class: ControlRouting, EtherType: EtherTypeIPv4, IPProto: ProtoOSPF},
	{Name: "pim", Class: ControlRouting, EtherType: EtherTypeIPv4, IPProto: ProtoPIM},
	{Name: "vrrp", Class: ControlRouting, EtherType: EtherTypeIPv4, IPProto: ProtoVRRP},
	{Name: "bgp", Class: ControlRouting, EtherType: EtherTypeIPv4, IPProto: ProtoTCP, Ports: EitherPort, Port: 179},
	{Name: "rip", Class: ControlRouting, EtherType: EtherTypeIPv4, IPProto: ProtoUDP, Ports: DstPort, Port: 520},
	{Name: "bfd", Class: ControlRouting, EtherType: EtherTypeIPv4, IPProto: ProtoUDP, Ports: DstPort, Port: 3784},
	{Name: "bfd-echo", Class: ControlRouting, EtherType: EtherTypeIPv4, IPProto: ProtoUDP, Ports: DstPort, Port: 3785},
	{Name: "bfd-multihop", Class: ControlRouting, EtherType: EtherTypeIPv4, IPProto: ProtoUDP, Ports: DstPort, Port: 4784},
}

// controlIndex is ControlProtos arranged for MatchControl, so that a frame
// is compared only with the entries that can match it: the entries that
// name no protocol (by EtherType alone), the IPv4 entries of each
// protocol, and the other entries with a protocol (IPv6), each group in
// table order.
type controlIndex struct {
	etherOnly, otherProto []*ControlProto
	ipv4                  [256][]*ControlProto
}

// controlIdx is built once, from the table as the package declares it.
var controlIdx = indexControl(ControlProtos)

func indexControl(table []ControlProto) *controlIndex {
	x := &controlIndex{}
	for i := range table {
		c := &table[i]
		switch {
		case c.IPProto == 0:
			x.etherOnly = append(x.etherOnly, c)
		case c.EtherType == EtherTypeIPv4:
			x.ipv4[c.IPProto] = append(x.ipv4[c.IPProto], c)
		default:
			x.otherProto = append(x.otherProto, c)
		}
	}
	return x
}

// MatchControl returns the entry of ControlProtos that the frame matches
// (entries do not overlap; TestControlProtos checks), or nil. The network
// header starts at frame[l3:] and its EtherType is the two bytes before
// it. It does not allocate.
func MatchControl(frame []byte, l3 int) *ControlProto {
	if l3 < 2 || l3 > len(frame) {
		return nil
	}
	et, p := binary.BigEndian.Uint16(frame[l3-2:]), frame[l3:]
	for _, c := range controlIdx.etherOnly {
		if c.EtherType == et {
			return c
		}
	}
	switch et {
	case EtherTypeIPv4:
		if len(p) < 10 || p[0]>>4 != 4 {
			return nil
		}
		return matchIPv4(controlIdx.ipv4[p[9]], p)
	case EtherTypeIPv6:
		// The fixed header only; extension headers are not followed.
		for _, c := range controlIdx.otherProto {
			if c.EtherType == et && len(p) > 6 && p[6] == c.IPProto &&
				(c.IPProto != ProtoICMPv6 || len(p) > 40 && p[40] == c.ICMPv6Type) {
				return c
			}
		}
	}
	return nil
}

// matchIPv4 picks among the entries of the protocol of the IPv4 header p
// (its first 10 bytes present): ports are read only from a first fragment,
// behind the IHL, and only where the frame has them.
func matchIPv4(entries []*ControlProto, p []byte) *ControlProto {
	if len(entries) == 0 {
		return nil
	}
	first := binary.BigEndian.Uint16(p[6:])&IPv4OffsetMask == 0
	ihl := int(p[0]&0x0f) * 4
	src, dst := -1, -1 // -1: not in the frame
	if first && len(p) >= ihl+2 {
		src = int(binary.BigEndian.Uint16(p[ihl:]))
	}
	if first && len(p) >= ihl+4 {
		dst = int(binary.BigEndian.Uint16(p[ihl+2:]))
	}
	for _, c := range entries {
		switch c.Ports {
		case AnyPort:
			return c
		case DstPort:
			if dst == int(c.Port) {
				return c
			}
		case EitherPort:
			if src == int(c.Port) || dst == int(c.Port) {
				return c
			}
		}
	}
	return nil
}
