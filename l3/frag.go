package l3

// IPv4 fragmentation (RFC 791, Linux ip_do_fragment) for packets that do
// not fit the egress MTU and may be fragmented (DF clear): every fragment
// but the last carries a multiple of 8 data bytes; options that must not be
// copied are replaced by NOPs after the first fragment, keeping the header
// length, as Linux's ip_options_fragment does; a packet that was itself a
// fragment keeps its offset base and its MF flag on the last piece.
//
// Flow: newFragmenter checks the MTU can carry a fragment; then, while
// more(), the caller takes a buffer of size() bytes and next() writes the
// fragment into it. No allocation; the caller owns the buffers.
//
// Locking: none.

import (
	"encoding/binary"

	"github.com/netfwd/netfwd/wire"
)

const (
	optEnd  = 0
	optNOP  = 1
	optCopy = 0x80
)

// fragmenter cuts one packet into fragments.
type fragmenter struct {
	pkt    wire.IPv4
	hl     int  // header length, the same in every fragment
	room   int  // data bytes per fragment but the last: a multiple of 8
	off    int  // data bytes cut so far
	base   int  // the packet's own fragment offset
	lastMF bool // the packet was itself a fragment with more to follow
}

// newFragmenter prepares to cut pkt for mtu; ok is false when the MTU
// cannot carry even 8 data bytes with pkt's header.
func newFragmenter(pkt wire.IPv4, mtu int) (f fragmenter, ok bool) {
	hl := pkt.IHL()
	room := (mtu - hl) &^ 7
	if room < 8 {
		return f, false
	}
	return fragmenter{pkt: pkt, hl: hl, room: room, base: pkt.FragOffset(), lastMF: pkt.MF()}, true
}

func (f *fragmenter) more() bool { return f.off < len(f.pkt)-f.hl }

// size is the length of the next fragment.
func (f *fragmenter) size() int { return f.hl + min(f.room, len(f.pkt)-f.hl-f.off) }

// next writes the next fragment into dst[:size()].
func (f *fragmenter) next(dst []byte) {
	data := f.pkt[f.hl:]
	size := min(f.room, len(data)-f.off)
	last := f.off+size == len(data)
	copy(dst, f.pkt[:f.hl])
	if f.off > 0 {
		stripUncopiedOptions(dst[wire.IPv4MinHeaderLen:f.hl])
	}
	copy(dst[f.hl:], data[f.off:f.off+size])
	flags := f.pkt.FlagsFrag() &^ (wire.IPv4FlagMF | wire.IPv4OffsetMask)
	if !last || f.lastMF {
		flags |= wire.IPv4FlagMF
	}
	flags |= uint16((f.base + f.off) / 8)
	binary.BigEndian.PutUint16(dst[2:], uint16(f.hl+size))
	binary.BigEndian.PutUint16(dst[6:], flags)
	h := wire.IPv4(dst)
	h.SetChecksum(0)
	h.SetChecksum(wire.HeaderChecksum(dst[:f.hl]))
	f.off += size
}

// stripUncopiedOptions replaces options without the copy flag by NOPs.
func stripUncopiedOptions(opts []byte) {
	for i := 0; i < len(opts); {
		switch opts[i] {
		case optEnd:
			return
		case optNOP:
			i++
			continue
		}
		l := 2
		if i+1 < len(opts) {
			l = int(opts[i+1])
		}
		if l < 2 || i+l > len(opts) {
			l = len(opts) - i // malformed: blank the rest
		}
		if opts[i]&optCopy == 0 {
			for j := i; j < i+l; j++ {
				opts[j] = optNOP
			}
		}
		i += l
	}
}
