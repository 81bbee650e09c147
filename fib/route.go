package fib

// Routes as configured: what `ip route add` was given, after defaults, with
// the nexthop object it shares with other routes. A route is immutable once
// stored; changing one stores a new Route.

import (
	"net/netip"

	"github.com/netfwd/netfwd/nexthop"
)

// Route is one configured or learned route.
type Route struct {
	Table uint32
	// Owner is the source that installed the route (owner.go); Mark is a
	// learned route's resync generation, writer-side only (learned.go).
	// Both fill alignment padding: a Route is still 80 bytes.
	Owner  Owner
	Mark   uint8
	Prefix netip.Prefix
	Type   Type
	Proto  Proto
	Scope  Scope
	Metric uint32
	Src    netip.Addr // preferred source, may be invalid
	// NH is the nexthop: a user nexthop (NhID routes), an implicit shared one,
	// or the special nexthop of the route type. Nil only for throw routes.
	NH *nexthop.Nexthop
}

// dead reports whether the route cannot be used because its nexthop's device
// is down (writer side).
func (r *Route) dead() bool { return r.NH != nil && r.NH.Dead() }

// Path is one path of a multipath route (`nexthop via A dev D weight W`).
type Path struct {
	Gateway netip.Addr
	Dev     string
	OnLink  bool
	Weight  uint16
}

// RouteSpec is a route as given on a command line. On add it is completed
// with iproute2's defaults; on del, unset fields match any route.
type RouteSpec struct {
	Prefix netip.Prefix
	Table  uint32 // 0: main, or local for local and broadcast routes
	// Owner is whose route it is (add) or whose routes to match (del):
	// the zero value is the configuration.
	Owner Owner

	Type    Type
	TypeSet bool // del: match Type only if set (add: Type is used as is)

	Proto Proto // 0: boot on add, any on del

	Scope    Scope
	ScopeSet bool // add: otherwise derived from type and nexthop

	Metric    uint32
	MetricSet bool

	Src netip.Addr

	NhID      uint32
	Gateway   netip.Addr
	Dev       string
	OnLink    bool
	Multipath []Path
}

// table resolves the table id: iproute2 puts local and broadcast routes in
// table local when none is given, everything else in main.
func (s *RouteSpec) table() uint32 {
	if s.Table != 0 {
		return s.Table
	}
	if s.TypeSet && (s.Type == Local || s.Type == Broadcast) {
		return TableLocal
	}
	return TableMain
}

// defaultScope is iproute2's choice when no scope is given: host for local
// routes, link for broadcast and for unicast routes without a gateway,
// universe otherwise.
func (s *RouteSpec) defaultScope() Scope {
	switch s.Type {
	case Local:
		return ScopeHost
	case Broadcast:
		return ScopeLink
	case Unicast:
		if !s.Gateway.IsValid() && len(s.Multipath) == 0 && s.NhID == 0 {
			return ScopeLink
		}
	}
	return ScopeUniverse
}
