package wire

// IPv4 header view and validation. The forwarding path validates a header
// once at ingress (ParseIPv4) and then reads fields in place.

import (
	"encoding/binary"
	"math/bits"
)

// IPv4 is a view of an IPv4 header (and what follows) in a packet buffer.
type IPv4 []byte

// Sizes and flag bits.
const (
	IPv4MinHeaderLen = 20
	IPv4FlagDF       = 0x4000
	IPv4FlagMF       = 0x2000
	IPv4OffsetMask   = 0x1fff
)

// Protocol numbers the router looks at.
const (
	ProtoICMP = 1
	ProtoIGMP = 2
	ProtoTCP  = 6
	ProtoUDP  = 17
)

func (h IPv4) IHL() int             { return int(h[0]&0x0f) * 4 }
func (h IPv4) TOS() uint8           { return h[1] }
func (h IPv4) TotalLen() int        { return int(binary.BigEndian.Uint16(h[2:])) }
func (h IPv4) ID() uint16           { return binary.BigEndian.Uint16(h[4:]) }
func (h IPv4) FlagsFrag() uint16    { return binary.BigEndian.Uint16(h[6:]) }
func (h IPv4) DF() bool             { return h.FlagsFrag()&IPv4FlagDF != 0 }
func (h IPv4) MF() bool             { return h.FlagsFrag()&IPv4FlagMF != 0 }
func (h IPv4) FragOffset() int      { return int(h.FlagsFrag()&IPv4OffsetMask) * 8 }
func (h IPv4) IsFragment() bool     { return h.FlagsFrag()&(IPv4FlagMF|IPv4OffsetMask) != 0 }
func (h IPv4) TTL() uint8           { return h[8] }
func (h IPv4) Protocol() uint8      { return h[9] }
func (h IPv4) Checksum() uint16     { return binary.BigEndian.Uint16(h[10:]) }
func (h IPv4) Src() Addr4           { return Addr4FromBytes(h[12:]) }
func (h IPv4) Dst() Addr4           { return Addr4FromBytes(h[16:]) }
func (h IPv4) Payload() []byte      { return h[h.IHL():h.TotalLen()] }
func (h IPv4) SetChecksum(c uint16) { binary.BigEndian.PutUint16(h[10:], c) }

// IPv4Error says why ParseIPv4 refused a header.
type IPv4Error uint8

const (
	IPv4OK           IPv4Error = iota
	IPv4TooShort               // shorter than 20 bytes
	IPv4BadVersion             // version is not 4
	IPv4BadHeaderLen           // IHL below 5 or beyond the buffer
	IPv4BadTotalLen            // total length below IHL or beyond the buffer
	IPv4BadChecksum            // header checksum does not verify
)

// ParseIPv4 validates the header at the start of b (the frame after the
// link-layer header, possibly padded) as Linux's ip_rcv_core does and returns
// the packet trimmed to its total length.
func ParseIPv4(b []byte) (IPv4, IPv4Error) {
	// The common header, version 4 without options, passes the version and
	// header length checks in one compare.
	if len(b) >= IPv4MinHeaderLen && b[0] == 0x45 {
		total := int(binary.BigEndian.Uint16(b[2:4]))
		if total < IPv4MinHeaderLen || total > len(b) {
			return nil, IPv4BadTotalLen
		}
		if !checksumValid20(b[:IPv4MinHeaderLen]) {
			return nil, IPv4BadChecksum
		}
		return IPv4(b[:total]), IPv4OK
	}
	if len(b) < IPv4MinHeaderLen {
		return nil, IPv4TooShort
	}
	if b[0]>>4 != 4 {
		return nil, IPv4BadVersion
	}
	ihl := int(b[0]&0x0f) * 4
	if ihl < IPv4MinHeaderLen || ihl > len(b) {
		return nil, IPv4BadHeaderLen
	}
	total := int(binary.BigEndian.Uint16(b[2:]))
	if total < ihl || total > len(b) {
		return nil, IPv4BadTotalLen
	}
	if HeaderChecksum(b[:ihl]) != 0 {
		return nil, IPv4BadChecksum
	}
	return IPv4(b[:total]), IPv4OK
}

// HeaderChecksum is Checksum for an IPv4 header. The common 20-byte header
// is summed in the CPU's byte order, as three loads and no loop: the one's
// complement sum is the same in either order up to a final byte swap
// (RFC 1071, "byte order independence").
func HeaderChecksum(h []byte) uint16 {
	if len(h) != IPv4MinHeaderLen {
		return Checksum(h)
	}
	s := sum20(h)
	s = (s >> 32) + (s & 0xffffffff) // <= 2^32 + 4
	s = (s >> 16) + (s & 0xffff)
	s = (s >> 16) + (s & 0xffff)
	s = (s >> 16) + (s & 0xffff)
	return ^bits.ReverseBytes16(uint16(s))
}

// checksumValid20 reports whether a 20-byte header carries a valid
// checksum, without folding: the one's complement sum of its 16-bit words is
// 0xffff exactly when their plain sum is a non-zero multiple of 0xffff (the
// end-around carry is reduction modulo 0xffff, and 2^16 is 1 modulo 0xffff,
// so wider words and either byte order give the same answer). An all-zero
// header sums to 0: its one's complement sum is 0, not 0xffff, so invalid.
func checksumValid20(h []byte) bool {
	s := sum20(h)
	return s%0xffff == 0 && s != 0
}

// sum20 adds a 20-byte header as 32-bit words in the CPU's byte order,
// unfolded (five words fit in 64 bits with room to spare).
func sum20(h []byte) uint64 {
	a, b := binary.LittleEndian.Uint64(h[0:8]), binary.LittleEndian.Uint64(h[8:16])
	return a&0xffffffff + a>>32 + b&0xffffffff + b>>32 + uint64(binary.LittleEndian.Uint32(h[16:20]))
}

// DecTTL decrements the TTL and patches the checksum incrementally, as the
// kernel's ip_decrease_ttl does (RFC 1141/1624): the TTL is the high byte of
// its 16-bit word, so the word drops by 0x0100 and the one's complement sum
// rises by as much, with an end-around carry.
func (h IPv4) DecTTL() {
	c := uint32(h[10])<<8 | uint32(h[11])
	c += 0x0100
	if c >= 0xffff {
		c++
	}
	h[10], h[11] = byte(c>>8), byte(c)
	h[8]--
}
