package hostpath

// Spec: what one twin should be, and its checks and defaults.
//
// Locking: none; values.

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
)

// Spec describes the twin of one dataplane L3 interface.
type Spec struct {
	// Port is the dataplane interface: a routed port or a VLAN interface
	// of a bridge. It identifies the twin.
	Port string
	// Name is the twin's interface name; "" means DefaultName(Port).
	Name string
	// MAC is the router's MAC of the interface (not the kernel port's):
	// frames the kernel sends carry it, and punted unicast frames are
	// addressed to it. Required, unicast.
	MAC [6]byte
	// MTU of the interface; 0 means 1500.
	MTU int
	// Addrs are the interface's IPv4 addresses in netfwd's order (the first
	// of each subnet is its primary). The twin gets exactly these.
	Addrs []netip.Prefix
	// Limits are the punt rate limits per class; a zero Limit means the
	// class's DefaultLimits entry.
	Limits Limits
	// DisableIPv6 sets net.ipv6.conf.TWIN.disable_ipv6: no link-local
	// address, no IPv6 chatter (MLD, DAD, router solicitations) from the
	// kernel on the twin.
	DisableIPv6 bool
}

// Limits holds one rate limit per punt class.
type Limits [NumClasses]Limit

// DefaultLimits are the punt rate limits of a twin whose Spec sets none:
// per class, frames per second and burst. In the range of SONiC's default
// control-plane policers (ARP 600/s, BGP and "ip2me" 6000/s): enough for
// a BGP full-table transfer and interactive use, far below what a
// forwarding worker can push into the kernel.
var DefaultLimits = Limits{
	ClassNeigh:   {Rate: 1000, Burst: 200},
	ClassRouting: {Rate: 10000, Burst: 2000},
	ClassOther:   {Rate: 5000, Burst: 1000},
}

// TAP MTU bounds (the kernel's ETH_MIN_MTU and tun's max_mtu).
const (
	minMTU     = 68
	maxMTU     = 65535 - 14
	defaultMTU = 1500
)

// normalized fills in the defaults and checks s.
func (s Spec) normalized() (Spec, error) {
	if s.Port == "" {
		return s, errors.New("no port given")
	}
	if s.Name == "" {
		s.Name = DefaultName(s.Port)
	}
	if err := checkName(s.Name); err != nil {
		return s, err
	}
	if s.MTU == 0 {
		s.MTU = defaultMTU
	}
	if s.MTU < minMTU || s.MTU > maxMTU {
		return s, fmt.Errorf("mtu %d out of range %d-%d", s.MTU, minMTU, maxMTU)
	}
	if s.MAC == [6]byte{} || s.MAC[0]&1 != 0 {
		return s, fmt.Errorf("mac %x: need a unicast address", s.MAC)
	}
	if err := checkAddrs(s.Addrs); err != nil {
		return s, err
	}
	s.Addrs = slices.Clone(s.Addrs)
	for c := range NumClasses {
		if s.Limits[c] == (Limit{}) {
			s.Limits[c] = DefaultLimits[c]
		}
		if err := s.Limits[c].check(); err != nil {
			return s, fmt.Errorf("%s rate limit: %w", c, err)
		}
	}
	return s, nil
}
