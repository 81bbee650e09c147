package hostpath

// Test frames, built with gopacket (independent of the code under test).

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

func serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func hw(m [6]byte) net.HardwareAddr { return net.HardwareAddr(m[:]) }

func ip(a netip.Addr) net.IP { return net.IP(a.AsSlice()) }

// eth returns the Ethernet layer (with a Dot1Q tag when vid != 0) for a
// frame of EtherType et.
func eth(dst, src [6]byte, vid uint16, et layers.EthernetType) []gopacket.SerializableLayer {
	if vid == 0 {
		return []gopacket.SerializableLayer{&layers.Ethernet{DstMAC: hw(dst), SrcMAC: hw(src), EthernetType: et}}
	}
	return []gopacket.SerializableLayer{
		&layers.Ethernet{DstMAC: hw(dst), SrcMAC: hw(src), EthernetType: layers.EthernetTypeDot1Q},
		&layers.Dot1Q{VLANIdentifier: vid, Type: et},
	}
}

func arpFrame(t testing.TB, op uint16, dst, src [6]byte, vid uint16, spa, tpa netip.Addr, tha [6]byte) []byte {
	return serialize(t, append(eth(dst, src, vid, layers.EthernetTypeARP), &layers.ARP{
		AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
		Operation: op, SourceHwAddress: hw(src), SourceProtAddress: ip(spa), DstHwAddress: hw(tha), DstProtAddress: ip(tpa),
	})...)
}

func ipv4(src, dst netip.Addr, proto layers.IPProtocol) *layers.IPv4 {
	return &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: proto, SrcIP: ip(src), DstIP: ip(dst), Flags: layers.IPv4DontFragment}
}

func echoFrame(t testing.TB, dst, src [6]byte, sip, dip netip.Addr, id, seq uint16) []byte {
	return serialize(t, append(eth(dst, src, 0, layers.EthernetTypeIPv4), ipv4(sip, dip, layers.IPProtocolICMPv4),
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: id, Seq: seq},
		gopacket.Payload("hostpath echo"))...)
}

func udpFrame(t testing.TB, dst, src [6]byte, vid uint16, sip, dip netip.Addr, sport, dport uint16, payload []byte) []byte {
	ip4 := ipv4(sip, dip, layers.IPProtocolUDP)
	u := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)}
	u.SetNetworkLayerForChecksum(ip4)
	return serialize(t, append(eth(dst, src, vid, layers.EthernetTypeIPv4), ip4, u, gopacket.Payload(payload))...)
}

func tcpFrame(t testing.TB, sip, dip netip.Addr, sport, dport uint16) []byte {
	ip4 := ipv4(sip, dip, layers.IPProtocolTCP)
	tc := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: layers.TCPPort(dport), SYN: true, Window: 1000}
	tc.SetNetworkLayerForChecksum(ip4)
	return serialize(t, append(eth([6]byte{2, 0, 0, 0, 0, 1}, [6]byte{2, 0, 0, 0, 0, 2}, 0, layers.EthernetTypeIPv4), ip4, tc)...)
}
