package wire

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// The layout of struct virtio_net_hdr: flags, gso_type, then hdr_len,
// gso_size, csum_start, csum_offset as host-order 16-bit words.
func TestVirtioNetHdrLayout(t *testing.T) {
	h := VirtioNetHdr{Flags: VirtioNetFlagNeedsCsum, GSOType: VirtioNetGSOUDPL4, HdrLen: 0x0102, GSOSize: 0x0304, CsumStart: 0x0506, CsumOffset: 0x0708}
	b := make([]byte, VirtioNetHdrLen)
	h.Encode(b)
	want := []byte{1, 5, 0, 0, 0, 0, 0, 0, 0, 0}
	for i, v := range []uint16{0x0102, 0x0304, 0x0506, 0x0708} {
		binary.NativeEndian.PutUint16(want[2+2*i:], v)
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("encoded %x, want %x", b, want)
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 1000 {
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		c := make([]byte, VirtioNetHdrLen)
		DecodeVirtioNetHdr(b).Encode(c)
		if !bytes.Equal(b, c) {
			t.Fatalf("%x decoded and encoded is %x", b, c)
		}
	}
}

// refCompletePartial is the completion written plainly: the 16-bit words
// from start to the end (the field holds the pseudo-header sum), folded
// and complemented, 0 sent as 0xffff.
func refCompletePartial(frame []byte, start, offset int) bool {
	if start < 0 || offset < 0 || start+offset+2 > len(frame) {
		return false
	}
	c := refChecksum(0, frame[start:])
	if c == 0 {
		c = 0xffff
	}
	frame[start+offset], frame[start+offset+1] = byte(c>>8), byte(c)
	return true
}

// Random frames, offsets in and out of range, and data whose sum comes to
// 0 or 0xffff: CompletePartialChecksum does what the model does, and what
// it completed verifies.
func TestCompletePartialChecksumMatchesModel(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for i := range 20000 {
		f := testBytes(r, r.IntN(200), i%6)
		start, offset := r.IntN(len(f)+3)-1, r.IntN(24)-1
		got, want := bytes.Clone(f), bytes.Clone(f)
		gok, wok := CompletePartialChecksum(got, start, offset), refCompletePartial(want, start, offset)
		if gok != wok || !bytes.Equal(got, want) {
			t.Fatalf("len %d start %d offset %d: %v %x, model %v %x", len(f), start, offset, gok, got, wok, want)
		}
		// Verified as a receiver does: the pseudo-header sum (what the
		// field held) plus the data with the checksum in is 0xffff (for a
		// field on a word boundary, as TCP and UDP have it).
		if gok && offset%2 == 0 {
			p := uint64(binary.BigEndian.Uint16(f[start+offset:]))
			if s := Fold(Sum(p, got[start:])); s != 0xffff {
				t.Fatalf("len %d start %d offset %d: completed data sums to %04x", len(f), start, offset, s)
			}
		}
	}
}
