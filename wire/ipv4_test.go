package l3

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
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

func TestCheckIPv4(t *testing.T) {
	good := udpPacket(t, "192.0.2.1", "198.51.100.1", 64, 10)
	padded := append(append([]byte(nil), good...), 0, 0, 0, 0)
	if h, r := CheckIPv4(padded); r != DropNone || len(h) != len(good) {
		t.Fatalf("padded frame: %v len %d", r, len(h))
	}
	cases := map[string]struct {
		b    []byte
		want DropReason
	}{
		"short":      {good[:19], DropIPTooShort},
		"version":    {mutate(good, 0, 0x65), DropIPVersion},
		"ihl small":  {mutate(good, 0, 0x44), DropIPHeaderLen},
		"ihl big":    {mutate(good, 0, 0x4f), DropIPHeaderLen},
		"total long": {mutate16(good, 2, uint16(len(good)+1)), DropIPTotalLen},
		"total tiny": {mutate16(good, 2, 12), DropIPTotalLen},
		"checksum":   {mutate(good, 10, good[10]^1), DropIPChecksum},
	}
	for name, c := range cases {
		if _, r := CheckIPv4(c.b); r != c.want {
			t.Errorf("%s: got %v want %v", name, r, c.want)
		}
	}
}

func mutate(b []byte, i int, v byte) []byte {
	c := append([]byte(nil), b...)
	c[i] = v
	return c
}

func mutate16(b []byte, i int, v uint16) []byte {
	c := append([]byte(nil), b...)
	binary.BigEndian.PutUint16(c[i:], v)
	return c
}

// The incremental TTL update equals a full recomputation for every TTL and
// random headers (RFC 1624's corner cases included).
func TestDecTTLIncremental(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200000 {
		h := make(IPv4, 20)
		for j := range h {
			h[j] = byte(r.Uint32())
		}
		h[0] = 0x45
		h[8] = byte(1 + i%255)
		h.SetChecksum(0)
		h.SetChecksum(Checksum(h, 0))
		h.DecTTL()
		if Checksum(h, 0) != 0 {
			t.Fatalf("after DecTTL the checksum does not verify: % x", []byte(h))
		}
		want := h.Checksum()
		h.SetChecksum(0)
		if full := Checksum(h, 0); full != want && !(full == 0 && want == 0xffff) && !(full == 0xffff && want == 0) {
			t.Fatalf("incremental %04x, full %04x", want, full)
		}
	}
}

func TestChecksumMatchesGopacket(t *testing.T) {
	p := udpPacket(t, "10.1.2.3", "10.4.5.6", 17, 33)
	if Checksum(p[:20], 0) != 0 {
		t.Fatal("gopacket header does not verify")
	}
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
	h, r := CheckIPv4(pkt)
	if r != DropNone {
		t.Fatal(r)
	}
	var frags [][]byte
	n := Fragment(h, 300, &sliceSink{out: &frags})
	if n != len(frags) || n < 4 {
		t.Fatalf("%d fragments", n)
	}
	var got []byte
	for i, f := range frags {
		if len(f) > 300 {
			t.Fatalf("fragment %d is %d bytes", i, len(f))
		}
		p := gopacket.NewPacket(f, layers.LayerTypeIPv4, gopacket.Default)
		fip := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		if Checksum(f[:fip.IHL*4], 0) != 0 || fip.Id != 77 || fip.TTL != 9 {
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
	if Fragment(h, 30, &sliceSink{out: &frags}) != 0 {
		t.Fatal("fragmented below the minimum")
	}
}

type sliceSink struct{ out *[][]byte }

func (s *sliceSink) Alloc(n int) []byte { return make([]byte, n) }
func (s *sliceSink) Emit(f []byte)      { *s.out = append(*s.out, f) }

func TestHeaderChecksumMatches(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 100000 {
		h := make([]byte, 20)
		for j := range h {
			switch i {
			case 0: // all zero: the sum folds to 0
			case 2: // all ones: every carry path
				h[j] = 0xff
			default:
				h[j] = byte(r.Uint32())
			}
		}
		if i%2 == 1 { // half of them with their checksum filled in
			h[10], h[11] = 0, 0
			c := Checksum(h, 0)
			h[10], h[11] = byte(c>>8), byte(c)
		}
		if headerChecksum(h) != Checksum(h, 0) {
			t.Fatalf("% x: fast %04x, generic %04x", h, headerChecksum(h), Checksum(h, 0))
		}
		if checksumValid20(h) != (Checksum(h, 0) == 0) {
			t.Fatalf("% x: checksumValid20 %v, generic checksum %04x", h, checksumValid20(h), Checksum(h, 0))
		}
	}
}

// checkIPv4Ref is ip_rcv_core's order of checks written plainly: the model
// for CheckIPv4's fast path.
func checkIPv4Ref(b []byte) (int, DropReason) {
	switch {
	case len(b) < 20:
		return 0, DropIPTooShort
	case b[0]>>4 != 4:
		return 0, DropIPVersion
	}
	ihl := int(b[0]&0xf) * 4
	if ihl < 20 || ihl > len(b) {
		return 0, DropIPHeaderLen
	}
	total := int(binary.BigEndian.Uint16(b[2:]))
	if total < ihl || total > len(b) {
		return 0, DropIPTotalLen
	}
	if Checksum(b[:ihl], 0) != 0 {
		return 0, DropIPChecksum
	}
	return total, DropNone
}

// Random headers (with and without options, valid checksums or not) get
// the model's verdict and length.
func TestCheckIPv4MatchesModel(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 200000 {
		b := make([]byte, r.IntN(80))
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		if len(b) > 0 && r.IntN(4) != 0 {
			b[0] = 0x45 + byte(r.IntN(3)) // mostly plausible versions and lengths
		}
		if len(b) >= 4 && r.IntN(2) == 0 {
			binary.BigEndian.PutUint16(b[2:], uint16(20+r.IntN(len(b))))
		}
		if len(b) >= 20 && r.IntN(2) == 0 {
			if ihl := int(b[0]&0xf) * 4; ihl >= 20 && ihl <= len(b) {
				b[10], b[11] = 0, 0
				c := Checksum(b[:ihl], 0)
				b[10], b[11] = byte(c>>8), byte(c)
			}
		}
		wantLen, want := checkIPv4Ref(b)
		h, got := CheckIPv4(b)
		if got != want || got == DropNone && len(h) != wantLen {
			t.Fatalf("case %d % x: got %v len %d, model %v len %d", i, b, got, len(h), want, wantLen)
		}
	}
}
