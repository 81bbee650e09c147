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

// ControlProtos is the list of control protocols. Read-only.
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

// controlFields are the fields of a frame the entries compare, each with
// whether the frame has it.
type controlFields struct {
	etherType         uint16
	srcPort, dstPort  uint16
	proto, icmpType   uint8
	hasProto, hasICMP bool
	hasSrc, hasDst    bool
	firstFragment     bool
}

// MatchControl returns the first entry of ControlProtos that the frame
// matches, or nil. The network header starts at frame[l3:] and its
// EtherType is the two bytes before it. It does not allocate.
func MatchControl(frame []byte, l3 int) *ControlProto {
	if l3 < 2 || l3 > len(frame) {
		return nil
	}
	f := readControlFields(binary.BigEndian.Uint16(frame[l3-2:]), frame[l3:])
	for i := range ControlProtos {
		if c := &ControlProtos[i]; c.matches(&f) {
			return c
		}
	}
	return nil
}

// readControlFields reads what the entries may compare from the network
// header p of EtherType et.
func readControlFields(et uint16, p []byte) controlFields {
	f := controlFields{etherType: et}
	switch et {
	case EtherTypeIPv4:
		if len(p) < 10 || p[0]>>4 != 4 {
			return f // no protocol: no IPv4 entry matches
		}
		f.proto, f.hasProto = p[9], true
		f.firstFragment = binary.BigEndian.Uint16(p[6:])&IPv4OffsetMask == 0
		ihl := int(p[0]&0x0f) * 4
		if len(p) >= ihl+2 {
			f.srcPort, f.hasSrc = binary.BigEndian.Uint16(p[ihl:]), true
		}
		if len(p) >= ihl+4 {
			f.dstPort, f.hasDst = binary.BigEndian.Uint16(p[ihl+2:]), true
		}
	case EtherTypeIPv6:
		// The fixed header only; extension headers are not followed.
		if len(p) >= 7 {
			f.proto, f.hasProto = p[6], true
		}
		if len(p) >= 41 {
			f.icmpType, f.hasICMP = p[40], true
		}
	}
	return f
}

func (c *ControlProto) matches(f *controlFields) bool {
	if c.EtherType != f.etherType {
		return false
	}
	if c.IPProto == 0 {
		return true
	}
	if !f.hasProto || f.proto != c.IPProto {
		return false
	}
	if c.EtherType == EtherTypeIPv6 && c.IPProto == ProtoICMPv6 {
		return f.hasICMP && f.icmpType == c.ICMPv6Type
	}
	switch c.Ports {
	case DstPort:
		return f.firstFragment && f.hasDst && f.dstPort == c.Port
	case EitherPort:
		return f.firstFragment && (f.hasSrc && f.srcPort == c.Port || f.hasDst && f.dstPort == c.Port)
	}
	return true
}
