package hostpath

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/wire"
)

// The twin's header for an Offload, as read back by the code that reads
// headers.
func TestTwinVnetHdr(t *testing.T) {
	var b [wire.VirtioNetHdrLen]byte
	pktio.Offload{}.VirtioNetHdr(14).Encode(b[:])
	if b != [wire.VirtioNetHdrLen]byte{} {
		t.Fatalf("plain frame: header %x, want zeros", b)
	}
	pktio.Offload{GSOType: pktio.GSOUDPL4, NeedsCsum: true, GSOSize: 100, L4Off: 20, CsumOffset: 6}.VirtioNetHdr(14).Encode(b[:])
	want := wire.VirtioNetHdr{Flags: wire.VirtioNetFlagNeedsCsum, GSOType: pktio.GSOUDPL4, GSOSize: 100, CsumStart: 34, CsumOffset: 6, HdrLen: 42}
	if h := wire.DecodeVirtioNetHdr(b[:]); h != want {
		t.Fatalf("header %+v, want %+v", h, want)
	}
}

// partial replaces a frame's L4 checksum (at l4+off) with the pseudo-header
// sum, as a sender with checksum offload leaves it.
func partial(frame []byte, l4, off int, proto byte) []byte {
	f := bytes.Clone(frame)
	var pseudo [12]byte
	copy(pseudo[:8], f[14+12:14+20])
	pseudo[9] = proto
	// L4 length from the IP header: gopacket pads frames to 60 bytes.
	binary.BigEndian.PutUint16(pseudo[10:], binary.BigEndian.Uint16(f[14+2:])-uint16(l4-14))
	binary.BigEndian.PutUint16(f[l4+off:], wire.Fold(wire.Sum(0, pseudo[:])))
	return f
}

// TestFinishVnetFrame completes partial checksums and compares with the
// checksums gopacket computes; a UDP sum of zero is sent as 0xffff.
func TestFinishVnetFrame(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	m := [6]byte{2, 0, 0, 0, 0, 1}
	hdr := func(start, off int) []byte {
		h := make([]byte, wire.VirtioNetHdrLen)
		wire.VirtioNetHdr{Flags: wire.VirtioNetFlagNeedsCsum, CsumStart: uint16(start), CsumOffset: uint16(off)}.Encode(h)
		return h
	}
	frames := [][]byte{udpFrame(t, m, m, 0, a, b, 1, 2, []byte("odd length payload!")), tcpFrame(t, a, b, 179, 40000)}
	// A payload whose UDP checksum comes out as zero, which is sent as
	// 0xffff (gopacket writes 0: "no checksum").
	for v := range 1 << 16 {
		f := udpFrame(t, m, m, 0, a, b, 1, 2, []byte{byte(v >> 8), byte(v)})
		if binary.BigEndian.Uint16(f[40:]) == 0 {
			binary.BigEndian.PutUint16(f[40:], 0xffff)
			frames = append(frames, f)
			break
		}
	}
	if len(frames) != 3 {
		t.Fatal("no payload gives a zero UDP checksum")
	}
	for i, want := range frames {
		proto, off := want[14+9], 6
		if proto == wire.ProtoTCP {
			off = 16
		}
		got := partial(want, 34, off, proto)
		if bytes.Equal(got, want) {
			t.Fatalf("frame %d: the partial checksum equals the full one", i)
		}
		if !finishVnetFrame(hdr(34, off), got) || !bytes.Equal(got, want) {
			t.Errorf("frame %d: completed checksum %x, want %x", i, got[34+off:36+off], want[34+off:36+off])
		}
	}
	plain := bytes.Clone(frames[0])
	if !finishVnetFrame(make([]byte, wire.VirtioNetHdrLen), plain) || !bytes.Equal(plain, frames[0]) {
		t.Error("a frame without NEEDS_CSUM was changed")
	}
	if finishVnetFrame(hdr(34, 1000), bytes.Clone(frames[0])) {
		t.Error("a checksum offset past the end was accepted")
	}
	gso := make([]byte, wire.VirtioNetHdrLen)
	wire.VirtioNetHdr{GSOType: pktio.GSOTCPv4}.Encode(gso)
	if finishVnetFrame(gso, bytes.Clone(frames[1])) {
		t.Error("a GSO frame was accepted")
	}
}
