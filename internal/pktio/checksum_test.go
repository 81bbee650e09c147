package pktio

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/netfwd/netfwd/wire"
)

// refSum is the obviously correct ones' complement sum of 16-bit words.
func refSum(b []byte) uint32 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return s
}

// refL4Valid checks the TCP/UDP checksum of an IPv4 frame the slow way.
func refL4Valid(t *testing.T, f []byte) bool {
	t.Helper()
	l3, et, ok := l3OffsetType(f)
	if !ok || et != wire.EtherTypeIPv4 {
		t.Fatalf("not IPv4: %x", f)
	}
	ip := f[l3:]
	ihl := int(ip[0]&15) * 4
	total := int(binary.BigEndian.Uint16(ip[2:]))
	l4 := ip[ihl:total]
	pseudo := append(append([]byte{}, ip[12:20]...), 0, ip[9], byte(len(l4)>>8), byte(len(l4)))
	s := refSum(append(pseudo, l4...))
	return s == 0xffff
}

func TestCsumAddMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for range 2000 {
		b := make([]byte, rng.IntN(1600))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		if rng.IntN(4) == 0 { // runs of 0xff stress the carries
			for i := range b {
				b[i] = 0xff
			}
		}
		got := uint32(wire.Fold(wire.Sum(0, b)))
		want := refSum(b)
		if got != want && !(got == 0xffff && want == 0) && !(got == 0 && want == 0xffff) {
			t.Fatalf("len %d: csum %#x, want %#x", len(b), got, want)
		}
	}
}

// randomIPv4L4 builds a random IPv4 TCP or UDP frame, optionally tagged.
func randomIPv4L4(rng *rand.Rand) []byte {
	proto := []byte{wire.ProtoTCP, wire.ProtoUDP}[rng.IntN(2)]
	hdr := 8
	if proto == wire.ProtoTCP {
		hdr = 20
	}
	payload := rng.IntN(1400)
	var f []byte
	f = append(f, make([]byte, 12)...)
	for range rng.IntN(3) {
		f = binary.BigEndian.AppendUint32(f, uint32(wire.EtherTypeVLAN)<<16|uint32(rng.IntN(4096)))
	}
	f = binary.BigEndian.AppendUint16(f, wire.EtherTypeIPv4)
	ip := make([]byte, 20+hdr+payload)
	for i := range ip {
		ip[i] = byte(rng.Uint32())
	}
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
	binary.BigEndian.PutUint16(ip[6:], 0x4000)
	ip[9] = proto
	if proto == wire.ProtoUDP {
		binary.BigEndian.PutUint16(ip[24:], uint16(hdr+payload))
	}
	return append(f, ip...)
}

func TestCompleteChecksumsAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for i := range 3000 {
		f := randomIPv4L4(rng)
		l3, _ := l3Offset(f)
		ip := f[l3:]
		csumOff := wire.TCPChecksumOffset
		if ip[9] == wire.ProtoUDP {
			csumOff = wire.UDPChecksumOffset
		}
		if i%2 == 0 {
			// As the kernel leaves CHECKSUM_PARTIAL: the field holds the
			// folded pseudo-header sum.
			l4len := len(ip) - 20
			ps := wire.Sum(0, ip[12:20]) + uint64(ip[9]) + uint64(l4len)
			binary.BigEndian.PutUint16(ip[20+csumOff:], wire.Fold(ps))
			if !completePartial(f, l3+20, csumOff) {
				t.Fatal("completePartial refused a valid frame")
			}
		} else if !completeIPv4L4(f) {
			t.Fatal("completeIPv4L4 refused a valid frame")
		}
		if !refL4Valid(t, f) {
			t.Fatalf("frame %d: checksum invalid after completion", i)
		}
	}
	// Frames it must refuse: fragments, other protocols, short lengths.
	f := randomIPv4L4(rng)
	l3, _ := l3Offset(f)
	binary.BigEndian.PutUint16(f[l3+6:], 0x2000) // MF
	if completeIPv4L4(f) {
		t.Error("completed a fragment")
	}
	if completePartial(f, len(f)-1, 0) || completeIPv4L4(f[:20]) {
		t.Error("accepted impossible offsets")
	}
}

// TestRecvCompletesPartialChecksums: UDP and TCP from a host namespace leave
// with CHECKSUM_PARTIAL (veth checksum offload); Recv hands them over valid.
func TestRecvCompletesPartialChecksums(t *testing.T) {
	for _, cfg := range []Config{{}, {NoOffload: true}} {
		name := "vnet"
		if cfg.NoOffload {
			name = "parse"
		}
		t.Run(name, func(t *testing.T) {
			p := newPair(t)
			port := openIn(t, p.nsB, p.b, cfg)
			ipIn(t, p.nsA, "addr", "add", "10.77.0.1/24", "dev", p.a)
			ipIn(t, p.nsA, "neigh", "add", "10.77.0.2", "lladdr", port.MAC.String(), "dev", p.a, "nud", "permanent")
			err := InNetns(p.nsA, func() error {
				c, err := net.Dial("udp", "10.77.0.2:9999")
				if err != nil {
					return err
				}
				defer c.Close()
				for _, n := range []int{1, 100, 1000} {
					if _, err := c.Write(make([]byte, n)); err != nil {
						return err
					}
				}
				d := net.Dialer{Timeout: 200 * time.Millisecond}
				if c, err := d.Dial("tcp", "10.77.0.2:80"); err == nil {
					c.Close()
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			got, meta := recvN(t, port.Queue(0), 4, 2*time.Second)
			if len(got) < 4 {
				t.Fatalf("received %d frames, want 4", len(got))
			}
			for i, f := range got {
				if !refL4Valid(t, f) {
					t.Errorf("frame %d: invalid L4 checksum: %x", i, f)
				}
				if meta[i].Flags&FlagChecksumCompleted == 0 || meta[i].Flags&FlagChecksumPartial != 0 {
					t.Errorf("frame %d flags %#x", i, meta[i].Flags)
				}
			}
			if st := port.Stats().Rx; st.ChecksumCompleted < 4 || st.ChecksumUnfixed != 0 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}
