package pktio_test

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/pktio/pktiotest"
	"github.com/netfwd/netfwd/wire"
)

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
		want := pktiotest.RefSum(b)
		if got != want && !(got == 0xffff && want == 0) && !(got == 0 && want == 0xffff) {
			t.Fatalf("len %d: csum %#x, want %#x", len(b), got, want)
		}
	}
}

func TestCompleteChecksumsAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for i := range 3000 {
		f := pktiotest.RandomIPv4L4(rng)
		l3, _ := pktio.L3Offset(f)
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
			if !pktio.CompletePartial(f, l3+20, csumOff) {
				t.Fatal("CompletePartial refused a valid frame")
			}
		} else if !pktio.CompleteIPv4L4(f) {
			t.Fatal("CompleteIPv4L4 refused a valid frame")
		}
		if !pktiotest.RefL4Valid(t, f) {
			t.Fatalf("frame %d: checksum invalid after completion", i)
		}
	}
	// Frames it must refuse: fragments, other protocols, short lengths.
	f := pktiotest.RandomIPv4L4(rng)
	l3, _ := pktio.L3Offset(f)
	binary.BigEndian.PutUint16(f[l3+6:], 0x2000) // MF
	if pktio.CompleteIPv4L4(f) {
		t.Error("completed a fragment")
	}
	if pktio.CompletePartial(f, len(f)-1, 0) || pktio.CompleteIPv4L4(f[:20]) {
		t.Error("accepted impossible offsets")
	}
}
