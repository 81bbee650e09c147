package neigh

// ARP packets (RFC 826, Ethernet/IPv4 only): a header view over []byte,
// validation with counted drop reasons, and builders for requests, replies
// and gratuitous ARP.
//
// Flow: ParseARPFrame checks an Ethernet frame carrying ARP the way arp_rcv
// and arp_process do (hardware type Ethernet or IEEE 802, protocol IPv4,
// address lengths 6 and 4, opcode request or reply) and returns the view.
// Builders write a 42-byte frame (Ethernet header + 28-byte ARP) into a
// caller's buffer; a port that needs the 60-byte Ethernet minimum pads it,
// as NIC drivers do for the kernel's ARP frames.
//
// Locking: none (pure functions over caller buffers).

import "encoding/binary"

// ARP constants.
const (
	EtherTypeARP  = 0x0806
	ARPLen        = 28
	ARPFrameLen   = ethHeaderLen + ARPLen
	ARPRequestOp  = 1
	ARPReplyOp    = 2
	arpHrdEther   = 1
	arpHrdIEEE802 = 6
)

var broadcastMAC = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// ARP is a view over a 28-byte Ethernet/IPv4 ARP packet.
type ARP []byte

func (a ARP) HardwareType() uint16 { return binary.BigEndian.Uint16(a[0:2]) }
func (a ARP) ProtocolType() uint16 { return binary.BigEndian.Uint16(a[2:4]) }
func (a ARP) HardwareLen() uint8   { return a[4] }
func (a ARP) ProtocolLen() uint8   { return a[5] }
func (a ARP) Op() uint16           { return binary.BigEndian.Uint16(a[6:8]) }
func (a ARP) SenderMAC() (m [6]byte) {
	copy(m[:], a[8:14])
	return m
}
func (a ARP) SenderIP() uint32 { return binary.BigEndian.Uint32(a[14:18]) }
func (a ARP) TargetMAC() (m [6]byte) {
	copy(m[:], a[18:24])
	return m
}
func (a ARP) TargetIP() uint32 { return binary.BigEndian.Uint32(a[24:28]) }

// ARPDrop is why a received ARP frame was dropped. The names are stable:
// metrics use them.
type ARPDrop uint8

const (
	ARPOK            ARPDrop = iota // not dropped
	ARPTruncated                    // shorter than an Ethernet ARP frame
	ARPNotARP                       // EtherType is not ARP
	ARPBadHardware                  // hardware type not Ethernet/IEEE 802
	ARPBadProtocol                  // protocol type not IPv4
	ARPBadAddrLen                   // hardware length not 6 or protocol length not 4
	ARPBadOpcode                    // neither request nor reply
	ARPOtherHost                    // Ethernet destination is another host
	ARPBadSenderMAC                 // sender MAC multicast, broadcast or zero
	ARPMartianSender                // sender IP multicast, broadcast, loopback or 0.0.0.0/8
	ARPSenderIsLocal                // sender IP is one of ours (address conflict)
	ARPBadTarget                    // target IP multicast or loopback
	ARPNoReplyBuffer                // the reply buffer is shorter than ARPFrameLen
	numARPDrops
)

var arpDropNames = [...]string{
	"ok", "truncated", "not-arp", "bad-hardware-type", "bad-protocol-type", "bad-address-length",
	"bad-opcode", "other-host", "bad-sender-mac", "martian-sender", "sender-is-local",
	"bad-target", "no-reply-buffer",
}

func (d ARPDrop) String() string {
	if int(d) < len(arpDropNames) {
		return arpDropNames[d]
	}
	return "unknown"
}

// ARPDropNames lists the drop reasons' names (without "ok"), in order.
func ARPDropNames() []string { return append([]string(nil), arpDropNames[1:]...) }

// ParseARPFrame validates an Ethernet frame (no VLAN tag: the bridge strips
// it) that should carry ARP and returns the ARP view.
func ParseARPFrame(frame []byte) (ARP, ARPDrop) {
	if len(frame) < ARPFrameLen {
		return nil, ARPTruncated
	}
	if binary.BigEndian.Uint16(frame[12:14]) != EtherTypeARP {
		return nil, ARPNotARP
	}
	a := ARP(frame[ethHeaderLen:ARPFrameLen])
	switch {
	case a.HardwareType() != arpHrdEther && a.HardwareType() != arpHrdIEEE802:
		return nil, ARPBadHardware
	case a.ProtocolType() != etherTypeIPv4:
		return nil, ARPBadProtocol
	case a.HardwareLen() != 6 || a.ProtocolLen() != 4:
		return nil, ARPBadAddrLen
	case a.Op() != ARPRequestOp && a.Op() != ARPReplyOp:
		return nil, ARPBadOpcode
	}
	return a, ARPOK
}

// buildARP writes an ARP frame and returns ARPFrameLen, or 0 if b is short.
func buildARP(b []byte, ethDst, ethSrc [6]byte, op uint16, sha [6]byte, spa uint32, tha [6]byte, tpa uint32) int {
	if len(b) < ARPFrameLen {
		return 0
	}
	copy(b[0:6], ethDst[:])
	copy(b[6:12], ethSrc[:])
	binary.BigEndian.PutUint16(b[12:14], EtherTypeARP)
	a := b[ethHeaderLen:ARPFrameLen]
	binary.BigEndian.PutUint16(a[0:2], arpHrdEther)
	binary.BigEndian.PutUint16(a[2:4], etherTypeIPv4)
	a[4], a[5] = 6, 4
	binary.BigEndian.PutUint16(a[6:8], op)
	copy(a[8:14], sha[:])
	binary.BigEndian.PutUint32(a[14:18], spa)
	copy(a[18:24], tha[:])
	binary.BigEndian.PutUint32(a[24:28], tpa)
	return ARPFrameLen
}

// BuildARPRequest writes a request for target from (srcMAC, senderIP) to
// dstMAC (broadcastMAC for resolution, the known address for a unicast
// probe). The target hardware address is zero, as Linux sends it.
func BuildARPRequest(b []byte, srcMAC [6]byte, senderIP, target uint32, dstMAC [6]byte) int {
	return buildARP(b, dstMAC, srcMAC, ARPRequestOp, srcMAC, senderIP, [6]byte{}, target)
}

// BuildARPReply writes a reply saying senderIP is at srcMAC, to (dstMAC,
// targetIP), the requester.
func BuildARPReply(b []byte, srcMAC [6]byte, senderIP uint32, dstMAC [6]byte, targetIP uint32) int {
	return buildARP(b, dstMAC, srcMAC, ARPReplyOp, srcMAC, senderIP, dstMAC, targetIP)
}

// BuildGratuitousARP writes a broadcast announcement of ip at mac: a request
// with sender and target address ip (what Linux sends on address add and
// link up), or, with reply set, a reply whose target hardware address is
// mac too (the form arp_is_garp also accepts).
func BuildGratuitousARP(b []byte, mac [6]byte, ip uint32, reply bool) int {
	if reply {
		return buildARP(b, broadcastMAC, mac, ARPReplyOp, mac, ip, mac, ip)
	}
	return buildARP(b, broadcastMAC, mac, ARPRequestOp, mac, ip, [6]byte{}, ip)
}
