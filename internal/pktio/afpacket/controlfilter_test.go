package afpacket

import (
	"math/rand/v2"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"golang.org/x/net/bpf"
)

// frameOf builds an Ethernet frame (tag: 0 none, else an 802.1Q VID).
func frameOf(t *testing.T, tag uint16, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	eth := &layers.Ethernet{SrcMAC: mac, DstMAC: mac}
	all := []gopacket.SerializableLayer{eth}
	var next layers.EthernetType
	switch l := ls[0].(type) {
	case *layers.ARP:
		next = layers.EthernetTypeARP
	case *layers.IPv4:
		next = layers.EthernetTypeIPv4
	case *layers.IPv6:
		next = layers.EthernetTypeIPv6
	default:
		t.Fatalf("layer %T", l)
	}
	if tag != 0 {
		eth.EthernetType = layers.EthernetTypeDot1Q
		all = append(all, &layers.Dot1Q{VLANIdentifier: tag, Type: next})
	} else {
		eth.EthernetType = next
	}
	all = append(all, ls...)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, all...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// isControl is the reference classifier: what the filter must decide.
func isControl(f []byte) bool {
	p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
	if p.Layer(layers.LayerTypeARP) != nil {
		return true
	}
	ip, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if !ok {
		return false
	}
	switch ip.Protocol {
	case 2, 89, 103, 112:
		return true
	}
	if ip.FragOffset != 0 {
		return false
	}
	switch l := p.TransportLayer().(type) {
	case *layers.TCP:
		return l.SrcPort == 179 || l.DstPort == 179
	case *layers.UDP:
		switch l.DstPort {
		case 520, 3784, 3785, 4784:
			return true
		}
	}
	return false
}

func TestControlFilterAgainstReference(t *testing.T) {
	ctl, err := bpf.NewVM(disassemble(t, ControlFilter()))
	if err != nil {
		t.Fatal(err)
	}
	data, err := bpf.NewVM(disassemble(t, DataFilter()))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	ports := []uint16{179, 22, 520, 3784, 3785, 4784, 53, 1790, 17900, 9}
	protos := []layers.IPProtocol{6, 17, 1, 2, 89, 103, 112, 47}
	seen := map[bool]int{}
	for i := range 4000 {
		tag := uint16(0)
		if rng.IntN(3) == 0 {
			tag = uint16(1 + rng.IntN(4094))
		}
		var f []byte
		switch rng.IntN(8) {
		case 0:
			f = frameOf(t, tag, &layers.ARP{AddrType: 1, Protocol: 0x0800, HwAddressSize: 6, ProtAddressSize: 4, Operation: 1,
				SourceHwAddress: make([]byte, 6), SourceProtAddress: make([]byte, 4), DstHwAddress: make([]byte, 6), DstProtAddress: make([]byte, 4)})
		case 1:
			f = frameOf(t, tag, &layers.IPv6{Version: 6, NextHeader: 6, HopLimit: 64, SrcIP: net.IPv6loopback, DstIP: net.IPv6loopback},
				&layers.TCP{SrcPort: 179, DstPort: 179})
		default:
			ihl := uint8(5 + rng.IntN(3))
			ip := &layers.IPv4{Version: 4, IHL: ihl, TTL: 64, Protocol: protos[rng.IntN(len(protos))],
				SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 0, 0, 2}}
			if ihl > 5 {
				ip.Options = []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 1}}
				if ihl == 7 {
					ip.Options = append(ip.Options, ip.Options...)
				}
			}
			if rng.IntN(6) == 0 {
				ip.FragOffset = uint16(1 + rng.IntN(100))
			}
			sp, dp := ports[rng.IntN(len(ports))], ports[rng.IntN(len(ports))]
			switch ip.Protocol {
			case 6:
				f = frameOf(t, tag, ip, &layers.TCP{SrcPort: layers.TCPPort(sp), DstPort: layers.TCPPort(dp)})
			case 17:
				f = frameOf(t, tag, ip, &layers.UDP{SrcPort: layers.UDPPort(sp), DstPort: layers.UDPPort(dp)})
			default:
				f = frameOf(t, tag, ip, gopacket.Payload(make([]byte, 20)))
			}
		}
		want := isControl(f)
		if ip, ok := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default).Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok && ip.FragOffset != 0 {
			want = ip.Protocol == 2 || ip.Protocol == 89 || ip.Protocol == 103 || ip.Protocol == 112
		}
		c, err := ctl.Run(f)
		if err != nil {
			t.Fatal(err)
		}
		d, err := data.Run(f)
		if err != nil {
			t.Fatal(err)
		}
		if (c > 0) != want || (d > 0) == want {
			t.Fatalf("frame %d (%x): control %d data %d, want control %v", i, f, c, d, want)
		}
		seen[want]++
	}
	if seen[true] < 500 || seen[false] < 500 {
		t.Fatalf("too few of one kind: %v", seen)
	}
}

func disassemble(t *testing.T, raw []bpf.RawInstruction) []bpf.Instruction {
	ins, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("filter does not disassemble")
	}
	return ins
}
