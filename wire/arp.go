package wire

// ARP packets (RFC 826), Ethernet/IPv4 only: a view over the 28-byte packet
// and builders that write a whole 42-byte frame (Ethernet header + ARP) into
// a caller's buffer; a port that needs the 60-byte Ethernet minimum pads it,
// as NIC drivers do for the kernel's ARP frames.

import "encoding/binary"

// ARP sizes, opcodes and hardware types.
const (
	ARPLen             = 28
	ARPFrameLen        = EthernetHeaderLen + ARPLen
	ARPRequest         = 1
	ARPReply           = 2
	ARPHardwareEther   = 1
	ARPHardwareIEEE802 = 6
)

// ARP is a view over a 28-byte Ethernet/IPv4 ARP packet.
type ARP []byte

func (a ARP) HardwareType() uint16 { return binary.BigEndian.Uint16(a[0:2]) }
func (a ARP) ProtocolType() uint16 { return binary.BigEndian.Uint16(a[2:4]) }
func (a ARP) HardwareLen() uint8   { return a[4] }
func (a ARP) ProtocolLen() uint8   { return a[5] }
func (a ARP) Op() uint16           { return binary.BigEndian.Uint16(a[6:8]) }
func (a ARP) SenderMAC() MAC       { return MAC(a[8:14]) }
func (a ARP) SenderIP() Addr4      { return Addr4FromBytes(a[14:18]) }
func (a ARP) TargetMAC() MAC       { return MAC(a[18:24]) }
func (a ARP) TargetIP() Addr4      { return Addr4FromBytes(a[24:28]) }

// BuildARP writes an ARP frame with every field given and returns
// ARPFrameLen, or 0 if b is short.
func BuildARP(b []byte, ethDst, ethSrc MAC, op uint16, sha MAC, spa Addr4, tha MAC, tpa Addr4) int {
	if len(b) < ARPFrameLen {
		return 0
	}
	PutHeader(b, ethDst, ethSrc, EtherTypeARP)
	a := b[EthernetHeaderLen:ARPFrameLen]
	binary.BigEndian.PutUint16(a[0:2], ARPHardwareEther)
	binary.BigEndian.PutUint16(a[2:4], EtherTypeIPv4)
	a[4], a[5] = 6, 4
	binary.BigEndian.PutUint16(a[6:8], op)
	copy(a[8:14], sha[:])
	spa.Put(a[14:18])
	copy(a[18:24], tha[:])
	tpa.Put(a[24:28])
	return ARPFrameLen
}

// BuildARPRequest writes a request for target from (srcMAC, senderIP) to
// dstMAC (BroadcastMAC for resolution, the known address for a unicast
// probe). The target hardware address is zero, as Linux sends it.
func BuildARPRequest(b []byte, srcMAC MAC, senderIP, target Addr4, dstMAC MAC) int {
	return BuildARP(b, dstMAC, srcMAC, ARPRequest, srcMAC, senderIP, MAC{}, target)
}

// BuildARPReply writes a reply saying senderIP is at srcMAC, to (dstMAC,
// targetIP), the requester.
func BuildARPReply(b []byte, srcMAC MAC, senderIP Addr4, dstMAC MAC, targetIP Addr4) int {
	return BuildARP(b, dstMAC, srcMAC, ARPReply, srcMAC, senderIP, dstMAC, targetIP)
}

// BuildGratuitousARP writes a broadcast announcement of ip at mac: a request
// with sender and target address ip (what Linux sends on address add and
// link up), or, with reply set, a reply whose target hardware address is
// mac too (the form arp_is_garp also accepts).
func BuildGratuitousARP(b []byte, mac MAC, ip Addr4, reply bool) int {
	if reply {
		return BuildARP(b, BroadcastMAC, mac, ARPReply, mac, ip, mac, ip)
	}
	return BuildARP(b, BroadcastMAC, mac, ARPRequest, mac, ip, MAC{}, ip)
}
