package wire

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

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

func TestParseIPv4(t *testing.T) {
	good := udpPacket(t, "192.0.2.1", "198.51.100.1", 64, 10)
	padded := append(append([]byte(nil), good...), 0, 0, 0, 0)
	if h, r := ParseIPv4(padded); r != IPv4OK || len(h) != len(good) {
		t.Fatalf("padded frame: %v len %d", r, len(h))
	}
	cases := map[string]struct {
		b    []byte
		want IPv4Error
	}{
		"short":      {good[:19], IPv4TooShort},
		"version":    {mutate(good, 0, 0x65), IPv4BadVersion},
		"ihl small":  {mutate(good, 0, 0x44), IPv4BadHeaderLen},
		"ihl big":    {mutate(good, 0, 0x4f), IPv4BadHeaderLen},
		"total long": {mutate16(good, 2, uint16(len(good)+1)), IPv4BadTotalLen},
		"total tiny": {mutate16(good, 2, 12), IPv4BadTotalLen},
		"checksum":   {mutate(good, 10, good[10]^1), IPv4BadChecksum},
	}
	for name, c := range cases {
		if _, r := ParseIPv4(c.b); r != c.want {
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
		h.SetChecksum(Checksum(h))
		h.DecTTL()
		if Checksum(h) != 0 {
			t.Fatalf("after DecTTL the checksum does not verify: % x", []byte(h))
		}
		want := h.Checksum()
		h.SetChecksum(0)
		if full := Checksum(h); full != want && !(full == 0 && want == 0xffff) && !(full == 0xffff && want == 0) {
			t.Fatalf("incremental %04x, full %04x", want, full)
		}
	}
}

func TestChecksumMatchesGopacket(t *testing.T) {
	p := udpPacket(t, "10.1.2.3", "10.4.5.6", 17, 33)
	if Checksum(p[:20]) != 0 {
		t.Fatal("gopacket header does not verify")
	}
}

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
			c := Checksum(h)
			h[10], h[11] = byte(c>>8), byte(c)
		}
		if HeaderChecksum(h) != Checksum(h) {
			t.Fatalf("% x: fast %04x, generic %04x", h, HeaderChecksum(h), Checksum(h))
		}
		if checksumValid20(h) != (Checksum(h) == 0) {
			t.Fatalf("% x: checksumValid20 %v, generic checksum %04x", h, checksumValid20(h), Checksum(h))
		}
	}
}

// checkIPv4Ref is ip_rcv_core's order of checks written plainly: the model
// for ParseIPv4's fast path.
func checkIPv4Ref(b []byte) (int, IPv4Error) {
	switch {
	case len(b) < 20:
		return 0, IPv4TooShort
	case b[0]>>4 != 4:
		return 0, IPv4BadVersion
	}
	ihl := int(b[0]&0xf) * 4
	if ihl < 20 || ihl > len(b) {
		return 0, IPv4BadHeaderLen
	}
	total := int(binary.BigEndian.Uint16(b[2:]))
	if total < ihl || total > len(b) {
		return 0, IPv4BadTotalLen
	}
	if Checksum(b[:ihl]) != 0 {
		return 0, IPv4BadChecksum
	}
	return total, IPv4OK
}

// Random headers (with and without options, valid checksums or not) get
// the model's verdict and length.
func TestParseIPv4MatchesModel(t *testing.T) {
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
				c := Checksum(b[:ihl])
				b[10], b[11] = byte(c>>8), byte(c)
			}
		}
		wantLen, want := checkIPv4Ref(b)
		h, got := ParseIPv4(b)
		if got != want || got == IPv4OK && len(h) != wantLen {
			t.Fatalf("case %d % x: got %v len %d, model %v len %d", i, b, got, len(h), want, wantLen)
		}
	}
}
