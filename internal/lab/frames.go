package lab

// Hand-built Ethernet frames for the emulated hosts (RawHost) and for
// malformed-frame injection: ARP, ICMP echo and UDP over IPv4, optionally
// with one 802.1Q tag, and a parser that reads them back. Written by hand
// rather than with gopacket because `netfwd-lab` and the benchmark use them
// outside tests; every field is set explicitly so a test can break exactly
// one of them.
//
// Locking: none; pure functions.

import (
	"encoding/binary"
	"net"
	"net/netip"

	"github.com/netfwd/netfwd/wire"
)

// EtherTypes and IP protocols used here.
const (
	EtherTypeIPv4 = 0x0800
	EtherTypeARP  = 0x0806
	EtherTypeVLAN = 0x8100
	ProtoICMP     = 1
	ProtoUDP      = 17
)

// Broadcast is the Ethernet broadcast address.
var Broadcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// EthHeader appends an Ethernet header (with an 802.1Q tag when vid != 0)
// to b.
func EthHeader(b []byte, dst, src net.HardwareAddr, vid uint16, etherType uint16) []byte {
	b = append(b, dst...)
	b = append(b, src...)
	if vid != 0 {
		b = binary.BigEndian.AppendUint16(b, EtherTypeVLAN)
		b = binary.BigEndian.AppendUint16(b, vid&0x0fff)
	}
	return binary.BigEndian.AppendUint16(b, etherType)
}

// ARPFrame builds an ARP request (op 1) or reply (op 2).
func ARPFrame(op uint16, dst, src net.HardwareAddr, vid uint16, sha net.HardwareAddr, spa netip.Addr, tha net.HardwareAddr, tpa netip.Addr) []byte {
	b := EthHeader(make([]byte, 0, 64), dst, src, vid, EtherTypeARP)
	b = binary.BigEndian.AppendUint16(b, 1)      // Ethernet
	b = binary.BigEndian.AppendUint16(b, 0x0800) // IPv4
	b = append(b, 6, 4)
	b = binary.BigEndian.AppendUint16(b, op)
	b = append(b, sha...)
	s := spa.As4()
	b = append(b, s[:]...)
	if tha == nil {
		tha = make(net.HardwareAddr, 6)
	}
	b = append(b, tha...)
	t := tpa.As4()
	b = append(b, t[:]...)
	return pad(b)
}

// IPv4Header appends a 20-byte IPv4 header with a valid checksum.
func IPv4Header(b []byte, src, dst netip.Addr, proto uint8, ttl uint8, payloadLen int, id uint16) []byte {
	h := make([]byte, 20)
	h[0] = 0x45
	binary.BigEndian.PutUint16(h[2:], uint16(20+payloadLen))
	binary.BigEndian.PutUint16(h[4:], id)
	binary.BigEndian.PutUint16(h[6:], 0x4000) // DF
	h[8], h[9] = ttl, proto
	s, d := src.As4(), dst.As4()
	copy(h[12:], s[:])
	copy(h[16:], d[:])
	binary.BigEndian.PutUint16(h[10:], wire.Checksum(h))
	return append(b, h...)
}

// ICMPEchoFrame builds an echo request (typ 8) or reply (typ 0).
func ICMPEchoFrame(dst, src net.HardwareAddr, vid uint16, sip, dip netip.Addr, ttl uint8, typ uint8, id, seq uint16, data []byte) []byte {
	icmp := make([]byte, 8+len(data))
	icmp[0] = typ
	binary.BigEndian.PutUint16(icmp[4:], id)
	binary.BigEndian.PutUint16(icmp[6:], seq)
	copy(icmp[8:], data)
	binary.BigEndian.PutUint16(icmp[2:], wire.Checksum(icmp))
	b := EthHeader(make([]byte, 0, 64+len(data)), dst, src, vid, EtherTypeIPv4)
	b = IPv4Header(b, sip, dip, ProtoICMP, ttl, len(icmp), seq)
	return pad(append(b, icmp...))
}

// UDPFrame builds a UDP datagram (checksum 0: none).
func UDPFrame(dst, src net.HardwareAddr, vid uint16, sip, dip netip.Addr, ttl uint8, sport, dport uint16, data []byte) []byte {
	udp := make([]byte, 8+len(data))
	binary.BigEndian.PutUint16(udp[0:], sport)
	binary.BigEndian.PutUint16(udp[2:], dport)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	copy(udp[8:], data)
	b := EthHeader(make([]byte, 0, 64+len(data)), dst, src, vid, EtherTypeIPv4)
	b = IPv4Header(b, sip, dip, ProtoUDP, ttl, len(udp), 1)
	return pad(append(b, udp...))
}

// pad pads a frame to the Ethernet minimum of 60 bytes (without FCS).
func pad(b []byte) []byte {
	for len(b) < 60 {
		b = append(b, 0)
	}
	return b
}

// Frame is a parsed received frame (the fields tests look at).
type Frame struct {
	Raw       []byte
	Dst, Src  net.HardwareAddr
	Tagged    bool
	TPID, VID uint16
	EtherType uint16
	// Payload after the Ethernet header (and tag).
	Payload []byte

	// IPv4 (EtherType 0x0800 with a sane header).
	IPv4     bool
	IPSrc    netip.Addr
	IPDst    netip.Addr
	TTL      uint8
	Proto    uint8
	L4       []byte // after the IP header
	ICMPType uint8
	ICMPCode uint8

	// ARP.
	ARP      bool
	ARPOp    uint16
	ARPSHA   net.HardwareAddr
	ARPSPA   netip.Addr
	ARPTPA   netip.Addr
	ARPTHA   net.HardwareAddr
	Checksum bool // IPv4 header checksum valid
}

// ParseFrame parses an Ethernet frame (untagged or with one 802.1Q/802.1ad
// tag). It never fails: fields it cannot read stay zero.
func ParseFrame(raw []byte) Frame {
	f := Frame{Raw: raw}
	if len(raw) < 14 {
		return f
	}
	f.Dst, f.Src = net.HardwareAddr(raw[0:6]), net.HardwareAddr(raw[6:12])
	et := binary.BigEndian.Uint16(raw[12:])
	off := 14
	if (et == EtherTypeVLAN || et == 0x88a8) && len(raw) >= 18 {
		f.Tagged, f.TPID, f.VID = true, et, binary.BigEndian.Uint16(raw[14:])&0x0fff
		et = binary.BigEndian.Uint16(raw[16:])
		off = 18
	}
	f.EtherType, f.Payload = et, raw[off:]
	p := f.Payload
	switch et {
	case EtherTypeIPv4:
		if len(p) < 20 || p[0]>>4 != 4 {
			return f
		}
		ihl := int(p[0]&0x0f) * 4
		if ihl < 20 || len(p) < ihl {
			return f
		}
		f.IPv4 = true
		f.Checksum = wire.Checksum(p[:ihl]) == 0
		f.TTL, f.Proto = p[8], p[9]
		f.IPSrc = netip.AddrFrom4([4]byte(p[12:16]))
		f.IPDst = netip.AddrFrom4([4]byte(p[16:20]))
		end := min(len(p), int(binary.BigEndian.Uint16(p[2:])))
		if end >= ihl {
			f.L4 = p[ihl:end]
		}
		if f.Proto == ProtoICMP && len(f.L4) >= 2 {
			f.ICMPType, f.ICMPCode = f.L4[0], f.L4[1]
		}
	case EtherTypeARP:
		if len(p) < 28 {
			return f
		}
		f.ARP = true
		f.ARPOp = binary.BigEndian.Uint16(p[6:])
		f.ARPSHA = net.HardwareAddr(p[8:14])
		f.ARPSPA = netip.AddrFrom4([4]byte(p[14:18]))
		f.ARPTHA = net.HardwareAddr(p[18:24])
		f.ARPTPA = netip.AddrFrom4([4]byte(p[24:28]))
	}
	return f
}
