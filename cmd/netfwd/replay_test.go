package main

import (
	"flag"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

var update = flag.Bool("update", false, "rewrite docs/examples/*.pcap")

var (
	macA      = net.HardwareAddr{2, 0, 0, 0, 0x10, 5}
	macB      = net.HardwareAddr{2, 0, 0, 0, 0x20, 5}
	macUp     = net.HardwareAddr{2, 0, 0, 0, 0xe0, 0xfe}
	macBridge = net.HardwareAddr{2, 0, 0, 0, 0x0b, 1}
	macEth0   = net.HardwareAddr{2, 0, 0, 0, 0xe0, 1}
	bcast     = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
)

type exFrame struct {
	at     time.Duration
	layers []gopacket.SerializableLayer
}

func ether(src, dst net.HardwareAddr, vid uint16, t layers.EthernetType) []gopacket.SerializableLayer {
	e := &layers.Ethernet{SrcMAC: src, DstMAC: dst, EthernetType: t}
	if vid == 0 {
		return []gopacket.SerializableLayer{e}
	}
	e.EthernetType = layers.EthernetTypeDot1Q
	return []gopacket.SerializableLayer{e, &layers.Dot1Q{VLANIdentifier: vid, Type: t}}
}

func arpL(op uint16, sha net.HardwareAddr, spa string, tha net.HardwareAddr, tpa string) *layers.ARP {
	return &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
		Operation: op, SourceHwAddress: sha, SourceProtAddress: net.ParseIP(spa).To4(), DstHwAddress: tha, DstProtAddress: net.ParseIP(tpa).To4()}
}

func ipL(src, dst string, ttl uint8, p layers.IPProtocol) *layers.IPv4 {
	return &layers.IPv4{Version: 4, IHL: 5, TTL: ttl, Protocol: p, Id: 7, SrcIP: net.ParseIP(src).To4(), DstIP: net.ParseIP(dst).To4()}
}

func echo(typ uint8, seq uint16) []gopacket.SerializableLayer {
	return []gopacket.SerializableLayer{&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(typ, 0), Id: 1, Seq: seq}, gopacket.Payload("netfwd replay example....")}
}

func cat(ls ...[]gopacket.SerializableLayer) []gopacket.SerializableLayer {
	var out []gopacket.SerializableLayer
	for _, l := range ls {
		out = append(out, l...)
	}
	return out
}

func one(l gopacket.SerializableLayer) []gopacket.SerializableLayer {
	return []gopacket.SerializableLayer{l}
}

func udp(ip *layers.IPv4) []gopacket.SerializableLayer {
	u := &layers.UDP{SrcPort: 33434, DstPort: 33435}
	u.SetNetworkLayerForChecksum(ip)
	return []gopacket.SerializableLayer{u, gopacket.Payload("traceroute probe")}
}

// exampleInputs is the scripted traffic of docs/examples: what each host
// sends, with the answers to the router's ARP requests where they come.
func exampleInputs() map[string][]exFrame {
	ms := time.Millisecond
	up := ipL("10.0.10.5", "198.18.8.8", 1, layers.IPProtocolUDP)
	return map[string][]exFrame{
		"eth1": {
			{0, cat(ether(macA, bcast, 0, layers.EthernetTypeARP), one(arpL(1, macA, "10.0.10.5", net.HardwareAddr{0, 0, 0, 0, 0, 0}, "10.0.10.1")))},
			{10 * ms, cat(ether(macA, macBridge, 0, layers.EthernetTypeIPv4), one(ipL("10.0.10.5", "10.0.10.1", 64, layers.IPProtocolICMPv4)), echo(8, 1))},
			{20 * ms, cat(ether(macA, macBridge, 0, layers.EthernetTypeIPv4), one(ipL("10.0.10.5", "10.0.20.5", 64, layers.IPProtocolICMPv4)), echo(8, 2))},
			{50 * ms, cat(ether(macA, macBridge, 0, layers.EthernetTypeIPv4), one(up), udp(up))},
			{60 * ms, cat(ether(macA, macBridge, 0, layers.EthernetTypeIPv4), one(ipL("10.0.10.5", "198.18.8.8", 64, layers.IPProtocolICMPv4)), echo(8, 3))},
			{80 * ms, cat(ether(macA, macBridge, 0, layers.EthernetTypeIPv4), one(ipL("10.0.10.5", "10.66.1.1", 64, layers.IPProtocolICMPv4)), echo(8, 4))},
		},
		"eth2": {
			{30 * ms, cat(ether(macB, macBridge, 20, layers.EthernetTypeARP), one(arpL(2, macB, "10.0.20.5", macBridge, "10.0.20.1")))},
			{40 * ms, cat(ether(macB, macBridge, 20, layers.EthernetTypeIPv4), one(ipL("10.0.20.5", "10.0.10.5", 64, layers.IPProtocolICMPv4)), echo(0, 2))},
		},
		"eth0": {
			{70 * ms, cat(ether(macUp, macEth0, 0, layers.EthernetTypeARP), one(arpL(2, macUp, "203.0.113.1", macEth0, "203.0.113.2")))},
		},
	}
}

func writeExamplePcaps(t *testing.T, dir string) {
	base := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for port, frames := range exampleInputs() {
		f, err := os.Create(filepath.Join(dir, port+".pcap"))
		if err != nil {
			t.Fatal(err)
		}
		w := pcapgo.NewWriter(f)
		w.WriteFileHeader(65535, layers.LinkTypeEthernet)
		for _, fr := range frames {
			buf := gopacket.NewSerializeBuffer()
			if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, fr.layers...); err != nil {
				t.Fatal(err)
			}
			b := buf.Bytes()
			w.WritePacket(gopacket.CaptureInfo{Timestamp: base.Add(fr.at), CaptureLength: len(b), Length: len(b)}, b)
		}
		f.Close()
	}
}

func readPackets(t *testing.T, file string) []gopacket.Packet {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out []gopacket.Packet
	for {
		data, _, err := r.ReadPacketData()
		if err != nil {
			return out
		}
		out = append(out, gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default))
	}
}

// The committed example replays to what a Linux router would send: ARP
// replies, echo replies, ARP requests and the released packets, a time
// exceeded, nothing for the blackhole.
func TestReplayExample(t *testing.T) {
	src := "../../docs/examples"
	if *update {
		writeExamplePcaps(t, src)
	}
	out := t.TempDir()
	sum, err := replay(filepath.Join(src, "replay.conf"), []string{
		"eth0=" + filepath.Join(src, "eth0.pcap"),
		"eth1=" + filepath.Join(src, "eth1.pcap"),
		"eth2=" + filepath.Join(src, "eth2.pcap"),
	}, out)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + sum)
	describe := func(p gopacket.Packet) string {
		switch {
		case p.Layer(layers.LayerTypeARP) != nil:
			a := p.Layer(layers.LayerTypeARP).(*layers.ARP)
			if a.Operation == 1 {
				return "arp-request " + net.IP(a.DstProtAddress).String()
			}
			return "arp-reply " + net.IP(a.SourceProtAddress).String()
		case p.Layer(layers.LayerTypeICMPv4) != nil:
			ip := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
			return p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4).TypeCode.String() + " " + ip.SrcIP.String() + ">" + ip.DstIP.String()
		}
		return "other"
	}
	want := map[string][]string{
		"eth1": {"arp-reply 10.0.10.1", "EchoReply 10.0.10.1>10.0.10.5", "EchoReply 10.0.20.5>10.0.10.5",
			"TimeExceeded(TTLExceeded) 10.0.10.1>10.0.10.5"},
		"eth2": {"arp-request 10.0.20.5", "EchoRequest 10.0.10.5>10.0.20.5"},
		"eth0": {"arp-request 203.0.113.1", "EchoRequest 10.0.10.5>198.18.8.8"},
	}
	for port, w := range want {
		var got []string
		for _, p := range readPackets(t, filepath.Join(out, port+".pcap")) {
			got = append(got, describe(p))
		}
		if strings.Join(got, "\n") != strings.Join(w, "\n") {
			t.Errorf("%s sent:\n%s\nwant:\n%s", port, strings.Join(got, "\n"), strings.Join(w, "\n"))
		}
	}
	if !strings.Contains(sum, "blackhole=1") {
		t.Errorf("summary does not count the blackhole drop:\n%s", sum)
	}
}

// The summary's forwarded counts every routed frame in the output pcaps,
// those that waited for ARP included (released at the ARP reply), and
// shows the held packets: two queued, both released.
func TestReplayForwardedMatchesOutput(t *testing.T) {
	src := "../../docs/examples"
	out := t.TempDir()
	sum, err := replay(filepath.Join(src, "replay.conf"), []string{
		"eth0=" + filepath.Join(src, "eth0.pcap"),
		"eth1=" + filepath.Join(src, "eth1.pcap"),
		"eth2=" + filepath.Join(src, "eth2.pcap"),
	}, out)
	if err != nil {
		t.Fatal(err)
	}
	own := map[string]bool{"10.0.10.1": true, "10.0.20.1": true, "203.0.113.2": true} // the router's addresses
	routed := 0
	for _, port := range []string{"eth0", "eth1", "eth2"} {
		for _, p := range readPackets(t, filepath.Join(out, port+".pcap")) {
			if ip, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok && !own[ip.SrcIP.String()] {
				routed++
			}
		}
	}
	if routed != 3 {
		t.Fatalf("%d routed frames in the output, the example has 3\n%s", routed, sum)
	}
	if want := "router: forwarded 3,"; !strings.Contains(sum, want) {
		t.Errorf("summary lacks %q:\n%s", want, sum)
	}
	if want := "held for arp: queued 2, released 2, expired 0"; !strings.Contains(sum, want) {
		t.Errorf("summary lacks %q:\n%s", want, sum)
	}
}
