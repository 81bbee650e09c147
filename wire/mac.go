package l2

// MAC addresses and the packed FDB key.
//
// A MAC is a value type ([6]byte) so it can be a map key and be compared
// without allocation. The FDB and the multicast filter key frames by
// {MAC, VID} packed into one uint64: MAC in the high 48 bits, VID in the low
// 16 bits (only 12 are used). Key 0 (zero MAC, VID 0) never names a valid
// entry because the zero MAC is rejected everywhere, so hash tables use 0 as
// "empty".

import (
	"encoding/binary"
	"fmt"
	"net"
)

// MAC is an Ethernet address.
type MAC [6]byte

// Broadcast is ff:ff:ff:ff:ff:ff.
var Broadcast = MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// ParseMAC parses the colon (or dash) separated hex form.
func ParseMAC(s string) (MAC, error) {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		return MAC{}, fmt.Errorf("invalid MAC address %q", s)
	}
	var m MAC
	copy(m[:], hw)
	return m, nil
}

// MustParseMAC is ParseMAC for constants in tests and examples.
func MustParseMAC(s string) MAC {
	m, err := ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

func (m MAC) String() string {
	const hexdig = "0123456789abcdef"
	var b [17]byte
	for i, v := range m {
		if i > 0 {
			b[i*3-1] = ':'
		}
		b[i*3] = hexdig[v>>4]
		b[i*3+1] = hexdig[v&15]
	}
	return string(b[:])
}

// IsMulticast reports whether the I/G bit is set (broadcast included).
func (m MAC) IsMulticast() bool { return m[0]&1 != 0 }

// IsBroadcast reports ff:ff:ff:ff:ff:ff.
func (m MAC) IsBroadcast() bool { return m == Broadcast }

// IsZero reports 00:00:00:00:00:00.
func (m MAC) IsZero() bool { return m == MAC{} }

// IsValidUnicast is the kernel's is_valid_ether_addr: not multicast, not zero.
// Only such addresses are learned and accepted as frame sources.
func (m MAC) IsValidUnicast() bool { return !m.IsMulticast() && !m.IsZero() }

// fdbKey packs {MAC, VID} into the 8-byte FDB key.
func fdbKey(m MAC, vid uint16) uint64 {
	return uint64(binary.BigEndian.Uint16(m[0:2]))<<48 |
		uint64(binary.BigEndian.Uint32(m[2:6]))<<16 | uint64(vid)
}

// fdbKeyAt reads the MAC at b[0:6] (a frame's destination at 0, source at 6)
// and packs it with vid, without building a MAC value.
// b must have at least 8 bytes (true for both MACs of a frame that passed
// parseFrame): one 8-byte load, the 2 bytes after the MAC masked off.
func fdbKeyAt(b []byte, vid uint16) uint64 {
	return binary.BigEndian.Uint64(b[0:8])&^0xffff | uint64(vid)
}

// keyMAC and keyVID unpack a key.
func keyMAC(k uint64) MAC {
	var m MAC
	binary.BigEndian.PutUint16(m[0:2], uint16(k>>48))
	binary.BigEndian.PutUint32(m[2:6], uint32(k>>16))
	return m
}

func keyVID(k uint64) uint16 { return uint16(k) }
