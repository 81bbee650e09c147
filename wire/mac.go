package wire

// MAC addresses: a value type ([6]byte), so it can be a map key and be
// compared without allocation.

import (
	"fmt"
	"net"
)

// MAC is an Ethernet address.
type MAC [6]byte

// BroadcastMAC is ff:ff:ff:ff:ff:ff.
var BroadcastMAC = MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

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

// String is the lower-case colon-separated form iproute2 prints.
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
func (m MAC) IsBroadcast() bool { return m == BroadcastMAC }

// IsZero reports 00:00:00:00:00:00.
func (m MAC) IsZero() bool { return m == MAC{} }

// IsValidUnicast is the kernel's is_valid_ether_addr: not multicast, not zero.
// Only such addresses are learned and accepted as frame sources.
func (m MAC) IsValidUnicast() bool { return !m.IsMulticast() && !m.IsZero() }
