package l3

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/netfwd/netfwd/wire"
)

// buildIPv4 serialises an IPv4 packet with gopacket (the independent
// implementation the tests check against).
func buildIPv4(t testing.TB, ip *layers.IPv4, payload []byte) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, ip, gopacket.Payload(payload)); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

func udpPacket(t testing.TB, src, dst string, ttl uint8, payload int) []byte {
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: ttl, Protocol: layers.IPProtocolUDP, Id: 0x1234,
		SrcIP: net.ParseIP(src).To4(), DstIP: net.ParseIP(dst).To4()}
	udp := &layers.UDP{SrcPort: 4000, DstPort: 53}
	udp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, ip, udp, gopacket.Payload(make([]byte, payload))); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

func TestFragment(t *testing.T) {
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 9, Protocol: layers.IPProtocolUDP, Id: 77,
		SrcIP: net.IP{192, 0, 2, 1}, DstIP: net.IP{198, 51, 100, 7},
		Options: []layers.IPv4Option{
			{OptionType: 7, OptionLength: 7, OptionData: []byte{4, 0, 0, 0, 0}}, // record route: not copied
			{OptionType: 0x94, OptionLength: 4, OptionData: []byte{0, 0}},       // router alert: copied
			{OptionType: 0},
		}}
	payload := make([]byte, 1000)
	for i := range payload {
		payload[i] = byte(i)
	}
	pkt := buildIPv4(t, ip, payload)
	h, e := wire.ParseIPv4(pkt)
	if e != wire.IPv4OK {
		t.Fatal(e)
	}
	frags := fragments(t, h, 300)
	if len(frags) < 4 {
		t.Fatalf("%d fragments", len(frags))
	}
	var got []byte
	for i, f := range frags {
		if len(f) > 300 {
			t.Fatalf("fragment %d is %d bytes", i, len(f))
		}
		p := gopacket.NewPacket(f, layers.LayerTypeIPv4, gopacket.Default)
		fip := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		if wire.Checksum(f[:fip.IHL*4]) != 0 || fip.Id != 77 || fip.TTL != 9 {
			t.Fatalf("fragment %d header: %+v", i, fip)
		}
		if int(fip.FragOffset)*8 != len(got) {
			t.Fatalf("fragment %d offset %d, have %d bytes", i, fip.FragOffset*8, len(got))
		}
		last := i == len(frags)-1
		if (fip.Flags&layers.IPv4MoreFragments != 0) == last {
			t.Fatalf("fragment %d MF wrong", i)
		}
		if !last && len(fip.Payload)%8 != 0 {
			t.Fatalf("fragment %d carries %d bytes", i, len(fip.Payload))
		}
		if i > 0 && bytes.Contains(f[20:fip.IHL*4], []byte{7, 7}) {
			t.Fatalf("fragment %d still has record route", i)
		}
		if i > 0 && !bytes.Contains(f[20:fip.IHL*4], []byte{0x94, 4}) {
			t.Fatalf("fragment %d lost router alert", i)
		}
		got = append(got, fip.Payload...)
	}
	if !bytes.Equal(got, h[h.IHL():]) {
		t.Fatal("reassembled data differs")
	}
	if _, ok := newFragmenter(h, 30); ok {
		t.Fatal("fragmented below the minimum")
	}
}

// fragments cuts pkt for mtu into fresh buffers.
func fragments(t *testing.T, pkt wire.IPv4, mtu int) [][]byte {
	fr, ok := newFragmenter(pkt, mtu)
	if !ok {
		t.Fatalf("MTU %d refused", mtu)
	}
	var out [][]byte
	for fr.more() {
		b := make([]byte, fr.size())
		fr.next(b)
		out = append(out, b)
	}
	return out
}

func mutate16(b []byte, i int, v uint16) []byte {
	c := append([]byte(nil), b...)
	binary.BigEndian.PutUint16(c[i:], v)
	return c
}
