package wire

// The TCP and UDP fields the router reads or writes: ports (flow hashing),
// TCP's sequence numbers and flags (resets), lengths (segmentation offload)
// and the checksum fields with their pseudo-header.

import "encoding/binary"

// Header sizes and checksum field offsets.
const (
	UDPHeaderLen      = 8
	TCPMinHeaderLen   = 20
	UDPChecksumOffset = 6
	TCPChecksumOffset = 16
)

// TCP flags.
const (
	TCPFlagFIN = 0x01
	TCPFlagSYN = 0x02
	TCPFlagRST = 0x04
	TCPFlagACK = 0x10
)

// Ports reads the source and destination ports that TCP and UDP headers
// both start with; p needs 4 bytes.
func Ports(p []byte) (src, dst uint16) {
	return binary.BigEndian.Uint16(p[0:2]), binary.BigEndian.Uint16(p[2:4])
}

// TCP is a view of a TCP header.
type TCP []byte

func (t TCP) Seq() uint32          { return binary.BigEndian.Uint32(t[4:]) }
func (t TCP) Ack() uint32          { return binary.BigEndian.Uint32(t[8:]) }
func (t TCP) DataOffset() int      { return int(t[12]>>4) * 4 }
func (t TCP) Flags() uint8         { return t[13] }
func (t TCP) Checksum() uint16     { return binary.BigEndian.Uint16(t[TCPChecksumOffset:]) }
func (t TCP) SetChecksum(c uint16) { binary.BigEndian.PutUint16(t[TCPChecksumOffset:], c) }

// PseudoHeaderSum is the unfolded sum (see Sum) of the IPv4 pseudo-header
// that TCP and UDP checksums cover: addresses, protocol and segment length.
func PseudoHeaderSum(src, dst Addr4, proto uint8, length int) uint64 {
	return uint64(src>>16) + uint64(src&0xffff) + uint64(dst>>16) + uint64(dst&0xffff) +
		uint64(proto) + uint64(length)
}
