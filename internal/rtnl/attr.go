package rtnl

// Attributes (struct rtattr / struct nlattr: 2 bytes length including the
// 4-byte header, 2 bytes type, value, padding to 4): iteration over a body
// without allocation, and the append helpers that build them.

import (
	"encoding/binary"
	"net/netip"
)

// attrTypeMask drops NLA_F_NESTED and NLA_F_NET_BYTEORDER from a type.
const attrTypeMask = 0x3fff

// nextAttr splits the first attribute off b.
func nextAttr(b []byte) (typ uint16, val, rest []byte, err error) {
	if len(b) < 4 {
		return 0, nil, nil, ErrAttrLength
	}
	n := int(binary.NativeEndian.Uint16(b))
	if n < 4 || n > len(b) {
		return 0, nil, nil, ErrAttrLength
	}
	typ = binary.NativeEndian.Uint16(b[2:]) & attrTypeMask
	val = b[4:n]
	next := align4(n)
	if next > len(b) {
		next = len(b)
	}
	return typ, val, b[next:], nil
}

func u32(v []byte) (uint32, error) {
	if len(v) != 4 {
		return 0, ErrValueLength
	}
	return binary.NativeEndian.Uint32(v), nil
}

func u16(v []byte) (uint16, error) {
	if len(v) != 2 {
		return 0, ErrValueLength
	}
	return binary.NativeEndian.Uint16(v), nil
}

// addr decodes an address attribute of the message's family (an AF_UNSPEC
// message takes either length).
func addr(family uint8, v []byte) (netip.Addr, error) {
	switch {
	case len(v) == 4 && family != AF_INET6:
		return netip.AddrFrom4([4]byte(v)), nil
	case len(v) == 16 && family != AF_INET:
		return netip.AddrFrom16([16]byte(v)), nil
	}
	return netip.Addr{}, ErrAddrLength
}

// AppendAttr appends one attribute.
func AppendAttr(b []byte, typ uint16, val []byte) []byte {
	b = binary.NativeEndian.AppendUint16(b, uint16(4+len(val)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, val...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// AppendAttrU32 appends a 32-bit attribute.
func AppendAttrU32(b []byte, typ uint16, v uint32) []byte {
	b = binary.NativeEndian.AppendUint16(b, 8)
	b = binary.NativeEndian.AppendUint16(b, typ)
	return binary.NativeEndian.AppendUint32(b, v)
}

// AppendAttrAddr appends an address attribute (4 or 16 bytes).
func AppendAttrAddr(b []byte, typ uint16, a netip.Addr) []byte {
	if a.Is4() {
		v := a.As4()
		return AppendAttr(b, typ, v[:])
	}
	v := a.As16()
	return AppendAttr(b, typ, v[:])
}

// beginNested appends the header of a nested attribute; endNested fixes its
// length once the contents are appended.
func beginNested(b []byte, typ uint16) ([]byte, int) {
	start := len(b)
	b = binary.NativeEndian.AppendUint16(b, 0)
	return binary.NativeEndian.AppendUint16(b, typ), start
}

func endNested(b []byte, start int) []byte {
	binary.NativeEndian.PutUint16(b[start:], uint16(len(b)-start))
	return b
}
