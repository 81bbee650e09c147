package l3

// IPv4 fragmentation (RFC 791, Linux ip_do_fragment) for packets that do
// not fit the egress MTU and may be fragmented (DF clear): every fragment
// but the last carries a multiple of 8 data bytes; options that must not be
// copied are replaced by NOPs after the first fragment, keeping the header
// length, as Linux's ip_options_fragment does; a packet that was itself a
// fragment keeps its offset base and its MF flag on the last piece.
//
// Locking: none (pure function; the caller provides the buffers).

import (
	"encoding/binary"

	"github.com/netfwd/netfwd/wire"
)

const (
	optEnd  = 0
	optNOP  = 1
	optCopy = 0x80
)

// FragSink receives fragments: Alloc returns a buffer for one, Emit takes
// it once filled. (An interface rather than closures: no allocation.)
type FragSink interface {
	Alloc(n int) []byte
	Emit(frag []byte)
}

// Fragment splits pkt to fit mtu, writing each fragment into a buffer from
// the sink and handing it back. It returns the number of fragments, or 0 if
// the MTU cannot carry even 8 data bytes with this header.
func Fragment(pkt wire.IPv4, mtu int, sink FragSink) int {
	hl := pkt.IHL()
	room := (mtu - hl) &^ 7
	if room < 8 {
		return 0
	}
	data := pkt[hl:]
	base := pkt.FragOffset()
	lastMF := pkt.MF()
	n := 0
	for off := 0; off < len(data); off += room {
		size := min(room, len(data)-off)
		last := off+size == len(data)
		f := sink.Alloc(hl + size)
		copy(f, pkt[:hl])
		if n > 0 {
			stripUncopiedOptions(f[wire.IPv4MinHeaderLen:hl])
		}
		copy(f[hl:], data[off:off+size])
		flags := pkt.FlagsFrag() &^ (wire.IPv4FlagMF | wire.IPv4OffsetMask)
		if !last || lastMF {
			flags |= wire.IPv4FlagMF
		}
		flags |= uint16((base + off) / 8)
		binary.BigEndian.PutUint16(f[2:], uint16(hl+size))
		binary.BigEndian.PutUint16(f[6:], flags)
		wire.IPv4(f).SetChecksum(0)
		wire.IPv4(f).SetChecksum(wire.Checksum(f[:hl]))
		sink.Emit(f)
		n++
	}
	return n
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
