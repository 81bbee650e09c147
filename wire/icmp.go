package wire

// ICMP (RFC 792, 1812): types, codes and the header view.

import "encoding/binary"

// ICMP types.
const (
	ICMPEchoReply      = 0
	ICMPDestUnreach    = 3
	ICMPSourceQuench   = 4
	ICMPRedirect       = 5
	ICMPEcho           = 8
	ICMPTimeExceeded   = 11
	ICMPParamProblem   = 12
	ICMPTimestamp      = 13
	ICMPTimestampReply = 14
)

// ICMP codes of destination unreachable and time exceeded.
const (
	ICMPCodeNetUnreach  = 0
	ICMPCodeHostUnreach = 1
	ICMPCodeProtUnreach = 2
	ICMPCodePortUnreach = 3
	ICMPCodeFragNeeded  = 4
	ICMPCodePktFiltered = 13 // communication administratively prohibited
	ICMPCodeTTLExceeded = 0
)

// Sizes.
const (
	ICMPHeaderLen    = 8
	ICMPErrorMaxSize = 576 // an error never exceeds the minimum MTU (RFC 1812 4.3.2.3)
)

// ICMP is a view of an ICMP message.
type ICMP []byte

func (m ICMP) Type() uint8          { return m[0] }
func (m ICMP) Code() uint8          { return m[1] }
func (m ICMP) Checksum() uint16     { return binary.BigEndian.Uint16(m[2:]) }
func (m ICMP) SetChecksum(c uint16) { binary.BigEndian.PutUint16(m[2:], c) }

// Rest is the 32-bit field after the checksum (identifier and sequence of
// echo messages, the next-hop MTU of fragmentation needed).
func (m ICMP) Rest() uint32 { return binary.BigEndian.Uint32(m[4:]) }

// ICMPIsError reports the types that are errors, which are never answered
// with an error (RFC 1122 3.2.2). Unknown types count as errors, as in
// Linux.
func ICMPIsError(typ uint8) bool {
	switch typ {
	case ICMPDestUnreach, ICMPSourceQuench, ICMPRedirect, ICMPTimeExceeded, ICMPParamProblem:
		return true
	}
	return typ > 18
}
