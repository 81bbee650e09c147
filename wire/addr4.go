package wire

// Addr4 is the datapath's IPv4 address: a host-order uint32, as parsed from
// a header with one load, compared and hashed as an integer. netip.Addr is
// the control plane's type; the conversions are free of allocation.

import (
	"encoding/binary"
	"net/netip"
)

// Addr4 is an IPv4 address in host byte order (10.0.0.1 is 0x0a000001).
type Addr4 uint32

// Addr4From converts a netip.Addr, which must be IPv4 (or IPv4-mapped
// IPv6): the condition of netip.Addr.As4, which panics otherwise.
func Addr4From(a netip.Addr) Addr4 {
	b := a.As4()
	return Addr4(binary.BigEndian.Uint32(b[:]))
}

// Addr4FromBytes reads an address in network byte order from b[0:4].
func Addr4FromBytes(b []byte) Addr4 { return Addr4(binary.BigEndian.Uint32(b)) }

// Netip returns the address as a netip.Addr.
func (a Addr4) Netip() netip.Addr {
	return netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)})
}

// String is the dotted-quad form.
func (a Addr4) String() string { return a.Netip().String() }

// Put writes the address in network byte order into b[0:4].
func (a Addr4) Put(b []byte) { binary.BigEndian.PutUint32(b, uint32(a)) }

// IsMulticast reports 224.0.0.0/4.
func (a Addr4) IsMulticast() bool { return a>>28 == 0xe }

// IsLinkLocalMulticast reports 224.0.0.0/24 (routing protocols: never
// forwarded).
func (a Addr4) IsLinkLocalMulticast() bool { return a>>8 == 0xe00000 }

// IsLimitedBroadcast reports 255.255.255.255.
func (a Addr4) IsLimitedBroadcast() bool { return a == 0xffffffff }

// IsLoopback reports 127.0.0.0/8.
func (a Addr4) IsLoopback() bool { return a>>24 == 127 }

// IsZeroNet reports 0.0.0.0/8 ("this network", 0.0.0.0 included).
func (a Addr4) IsZeroNet() bool { return a>>24 == 0 }

// IsMartianSource reports addresses that are never a valid source of a
// received packet whatever the routes: multicast, limited broadcast,
// 0.0.0.0/8 and loopback (Linux ip_route_input_slow; the router's own and
// broadcast addresses need the FIB).
func (a Addr4) IsMartianSource() bool {
	return a.IsMulticast() || a.IsLimitedBroadcast() || a.IsZeroNet() || a.IsLoopback()
}
