package wire

// The Internet checksum (RFC 1071): the one's complement of the one's
// complement sum of 16-bit big-endian words. Sum accumulates without folding
// (64 bits, end-around carries kept in the word), so partial sums (a
// pseudo-header, then a segment) combine by passing one as the other's
// accumulator.

import (
	"encoding/binary"
	"math/bits"
)

// Sum adds b to the running one's complement sum acc and returns the new
// sum, unfolded. An odd final byte is the high byte of its word.
func Sum(acc uint64, b []byte) uint64 {
	var carry uint64
	for len(b) >= 32 {
		acc, carry = bits.Add64(acc, binary.BigEndian.Uint64(b[0:]), 0)
		acc, carry = bits.Add64(acc, binary.BigEndian.Uint64(b[8:]), carry)
		acc, carry = bits.Add64(acc, binary.BigEndian.Uint64(b[16:]), carry)
		acc, carry = bits.Add64(acc, binary.BigEndian.Uint64(b[24:]), carry)
		acc += carry
		b = b[32:]
	}
	for len(b) >= 8 {
		acc, carry = bits.Add64(acc, binary.BigEndian.Uint64(b), 0)
		acc += carry
		b = b[8:]
	}
	if len(b) >= 4 {
		acc, carry = bits.Add64(acc, uint64(binary.BigEndian.Uint32(b)), 0)
		acc += carry
		b = b[4:]
	}
	if len(b) >= 2 {
		acc, carry = bits.Add64(acc, uint64(binary.BigEndian.Uint16(b)), 0)
		acc += carry
		b = b[2:]
	}
	if len(b) == 1 {
		acc, carry = bits.Add64(acc, uint64(b[0])<<8, 0)
		acc += carry
	}
	return acc
}

// Fold folds a sum from Sum to 16 bits (not complemented).
func Fold(sum uint64) uint16 {
	sum = (sum >> 32) + (sum & 0xffffffff)
	sum = (sum >> 32) + (sum & 0xffffffff)
	sum = (sum >> 16) + (sum & 0xffff)
	sum = (sum >> 16) + (sum & 0xffff)
	sum = (sum >> 16) + (sum & 0xffff)
	return uint16(sum)
}

// Checksum is the Internet checksum of b: the value to store in a zeroed
// checksum field, and 0 over data whose checksum field is filled in.
func Checksum(b []byte) uint16 { return ^Fold(Sum(0, b)) }
