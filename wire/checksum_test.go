package wire

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

// refChecksum is RFC 1071 written plainly: add the 16-bit big-endian words
// (an odd last byte padded with zero), fold the carries, complement.
func refChecksum(initial uint32, b []byte) uint16 {
	s := uint64(initial)
	for i := 0; i < len(b); i += 2 {
		w := uint64(b[i]) << 8
		if i+1 < len(b) {
			w |= uint64(b[i+1])
		}
		s += w
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}

// testBytes is n bytes for case k: 0 all zeros, 1 all ones, otherwise
// random with a third of them 0xff (to exercise the carries).
func testBytes(r *rand.Rand, n, k int) []byte {
	b := make([]byte, n)
	for j := range b {
		switch {
		case k == 0:
		case k == 1 || r.IntN(3) == 0:
			b[j] = 0xff
		default:
			b[j] = byte(r.Uint32())
		}
	}
	return b
}

// Random buffers of every length up to 2 KiB (byte values biased towards
// 0xff to exercise the carries), random initial sums, and the all-zero and
// all-ones corners: Checksum, and Sum continued in two pieces, agree with
// the model.
func TestChecksumMatchesModel(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for i := range 30000 {
		b := testBytes(r, r.IntN(2049), i)
		if got, want := Checksum(b), refChecksum(0, b); got != want {
			t.Fatalf("len %d: Checksum %04x, model %04x", len(b), got, want)
		}
		init := r.Uint32()
		cut := 0
		if len(b) > 0 {
			cut = r.IntN(len(b)/2+1) * 2 // pieces split at an even offset
		}
		got := ^Fold(Sum(Sum(uint64(init), b[:cut]), b[cut:]))
		if want := refChecksum(init, b); got != want {
			t.Fatalf("len %d, initial %#x, split at %d: %04x, model %04x", len(b), init, cut, got, want)
		}
	}
}

func TestPseudoHeaderSum(t *testing.T) {
	src, dst := Addr4(0xc0000201), Addr4(0xc6336407)
	var ph [12]byte
	src.Put(ph[0:])
	dst.Put(ph[4:])
	ph[9] = ProtoTCP
	binary.BigEndian.PutUint16(ph[10:], 40)
	if got, want := Fold(PseudoHeaderSum(src, dst, ProtoTCP, 40)), Fold(Sum(0, ph[:])); got != want {
		t.Fatalf("pseudo-header sum %04x, bytes %04x", got, want)
	}
}

var sinkSum uint16

// go test -bench Checksum ./wire: the sizes of a header, a minimum frame, an
// ICMP error, a full frame and a jumbo frame.
func BenchmarkChecksum(b *testing.B) {
	for _, n := range []int{20, 64, 576, 1500, 9000} {
		buf := make([]byte, n)
		for i := range buf {
			buf[i] = byte(i * 7)
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				sinkSum += Checksum(buf)
			}
		})
	}
}
