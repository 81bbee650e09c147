// Package nexthop holds the objects a FIB lookup returns: nexthops with the
// semantics of Linux `ip nexthop` (id, via, dev, onlink, blackhole, groups),
// the implicit nexthops shared by routes written `via GW dev D` (one object per
// distinct gateway and device, like the kernel's fib_info), and the special
// nexthops that carry route kinds (local, broadcast, blackhole, unreachable,
// prohibit), so that a lookup result is always one pointer.
//
// The FIB's writer creates and releases nexthops through a Registry, one
// writer at a time (the Registry does not lock). Readers on the datapath see
// only published nexthops: their exported fields never change, and a
// group's member selection is published atomically.
package nexthop

import (
	"fmt"
	"net/netip"
	"strings"
	"sync/atomic"

	"github.com/netfwd/netfwd/wire"
)

// Kind is what a lookup that ends in this nexthop does with the packet.
type Kind uint8

const (
	// Unicast forwards: to Gateway on Dev, directly to the destination on Dev
	// (a connected route), or through one member of a Group.
	Unicast Kind = iota
	// Local delivers to the router itself.
	Local
	// Broadcast delivers locally as a link broadcast.
	Broadcast
	// Blackhole drops silently.
	Blackhole
	// Unreachable drops and answers ICMP host unreachable.
	Unreachable
	// Prohibit drops and answers ICMP administratively prohibited.
	Prohibit
)

var kindNames = [...]string{"unicast", "local", "broadcast", "blackhole", "unreachable", "prohibit"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// maxIndex is the largest nexthop index: compiled lookup structures keep
// 24 bits for it.
const maxIndex = 1<<24 - 1

// Nexthop is one nexthop object. The exported fields are immutable once the
// nexthop is published; a `nexthop replace` makes a new object.
type Nexthop struct {
	// Index is dense (1..2^24-1) and unique among live nexthops, so compiled
	// lookup tables can store 32-bit entries; Registry.ByIndex maps it back.
	Index uint32
	// ID is the user's `ip nexthop` id, 0 for implicit nexthops.
	ID   uint32
	Kind Kind
	// Gateway is the next router; invalid for connected routes and for the
	// special kinds.
	Gateway netip.Addr
	// Dev is the egress interface name ("" for blackhole, unreachable,
	// prohibit and for groups).
	Dev string
	// DevIndex is Dev's interface index in the router that owns the FIB
	// (0 when the FIB has no index function), so the forwarding path finds
	// the egress interface with an array index.
	DevIndex uint32
	OnLink   bool
	// LocalGateway: Gateway is one of the router's own addresses and is not
	// used; destinations are reached directly on Dev (the kernel's nexthop
	// scope host).
	LocalGateway bool
	// Group is non-nil for a nexthop group; then Kind is Unicast.
	Group *Group
	// Next4 is where packets go on Dev when the gateway is used: Gateway
	// in the datapath's form, 0 when packets go to their destination
	// (connected routes, local gateways). Precomputed for the forwarding path.
	Next4 wire.Addr4

	// Writer-side state, guarded by the FIB writer lock.
	refs int32       // routes and groups that reference this nexthop
	dead atomic.Bool // its device is down (a group: all members dead); atomic for dumps
}

func withDead(nh *Nexthop, dead bool) *Nexthop {
	nh.dead.Store(dead)
	if nh.UsesGateway() {
		nh.Next4 = wire.Addr4From(nh.Gateway)
	}
	return nh
}

// UsesGateway reports whether packets are sent to the gateway (rather than
// to their destination) on the link.
func (nh *Nexthop) UsesGateway() bool { return nh.Gateway.IsValid() && !nh.LocalGateway }

// IsGroup reports whether the nexthop is a group.
func (nh *Nexthop) IsGroup() bool { return nh.Group != nil }

// Implicit reports whether the nexthop was created for a route (no user id).
func (nh *Nexthop) Implicit() bool { return nh.ID == 0 }

// Dead reports whether the nexthop is unusable because its device is down.
// Writer-side: call it with the FIB writer lock held (or on a quiescent FIB).
func (nh *Nexthop) Dead() bool { return nh.dead.Load() }

// Refs returns the number of routes and groups using the nexthop (writer side).
func (nh *Nexthop) Refs() int { return int(nh.refs) }

// String formats the nexthop as `ip nexthop show` does, without the id.
func (nh *Nexthop) String() string {
	if nh == nil {
		return "<nil>"
	}
	var b strings.Builder
	switch {
	case nh.Group != nil:
		b.WriteString("group ")
		for i, m := range nh.Group.Members {
			if i > 0 {
				b.WriteByte('/')
			}
			if m.NH.ID != 0 {
				fmt.Fprintf(&b, "%d", m.NH.ID)
			} else {
				b.WriteString(m.NH.String())
			}
			if m.Weight != 1 {
				fmt.Fprintf(&b, ",%d", m.Weight)
			}
		}
	case nh.Kind == Unicast:
		if nh.Gateway.IsValid() {
			fmt.Fprintf(&b, "via %s ", nh.Gateway)
		}
		fmt.Fprintf(&b, "dev %s", nh.Dev)
		if nh.OnLink {
			b.WriteString(" onlink")
		}
	default:
		b.WriteString(nh.Kind.String())
		if nh.Dev != "" {
			fmt.Fprintf(&b, " dev %s", nh.Dev)
		}
	}
	return b.String()
}
