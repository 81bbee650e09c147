package fib

// Route attributes with iproute2's names: route types, protocols, scopes and
// table ids, parsed from and printed as `ip route` does.

import (
	"fmt"
	"strconv"
)

// Type is a route type (rtm_type).
type Type uint8

const (
	Unicast Type = iota
	Local
	Broadcast
	Blackhole
	Unreachable
	Prohibit
	Throw
)

var typeNames = [...]string{"unicast", "local", "broadcast", "blackhole", "unreachable", "prohibit", "throw"}

func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", t)
}

// ParseType parses a route type name.
func ParseType(s string) (Type, bool) {
	for i, n := range typeNames {
		if n == s {
			return Type(i), true
		}
	}
	return 0, false
}

// hasNexthop reports whether routes of this type forward or deliver through
// a device (unicast, local, broadcast) rather than just answering an error.
func (t Type) hasNexthop() bool { return t <= Broadcast }

// Proto is the routing protocol that installed a route (rtm_protocol).
type Proto uint8

const (
	ProtoUnspec Proto = 0
	ProtoKernel Proto = 2
	ProtoBoot   Proto = 3
	ProtoStatic Proto = 4
	ProtoBGP    Proto = 186
)

// protoNames is /etc/iproute2/rt_protos.
var protoNames = map[Proto]string{
	0: "unspec", 1: "redirect", 2: "kernel", 3: "boot", 4: "static", 8: "gated", 9: "ra",
	10: "mrt", 11: "zebra", 12: "bird", 13: "dnrouted", 14: "xorp", 15: "ntk", 16: "dhcp",
	18: "keepalived", 42: "babel", 99: "openr", 186: "bgp", 187: "isis", 188: "ospf",
	189: "rip", 192: "eigrp",
}

func (p Proto) String() string {
	if n, ok := protoNames[p]; ok {
		return n
	}
	return strconv.Itoa(int(p))
}

// ParseProto parses a protocol name or number.
func ParseProto(s string) (Proto, bool) {
	for p, n := range protoNames {
		if n == s {
			return p, true
		}
	}
	v, err := strconv.ParseUint(s, 0, 8)
	return Proto(v), err == nil
}

// Scope is a route's scope (rtm_scope).
type Scope uint8

const (
	ScopeUniverse Scope = 0
	ScopeSite     Scope = 200
	ScopeLink     Scope = 253
	ScopeHost     Scope = 254
	ScopeNowhere  Scope = 255
)

func (s Scope) String() string {
	switch s {
	case ScopeUniverse:
		return "global"
	case ScopeSite:
		return "site"
	case ScopeLink:
		return "link"
	case ScopeHost:
		return "host"
	case ScopeNowhere:
		return "nowhere"
	}
	return strconv.Itoa(int(s))
}

// ParseScope parses a scope name or number.
func ParseScope(s string) (Scope, bool) {
	switch s {
	case "global", "universe":
		return ScopeUniverse, true
	case "site":
		return ScopeSite, true
	case "link":
		return ScopeLink, true
	case "host":
		return ScopeHost, true
	case "nowhere":
		return ScopeNowhere, true
	}
	v, err := strconv.ParseUint(s, 0, 8)
	return Scope(v), err == nil
}

// Table ids as in /etc/iproute2/rt_tables.
const (
	TableUnspec  uint32 = 0
	TableDefault uint32 = 253
	TableMain    uint32 = 254
	TableLocal   uint32 = 255
)

// TableName prints a table id as iproute2 does.
func TableName(id uint32) string {
	switch id {
	case TableDefault:
		return "default"
	case TableMain:
		return "main"
	case TableLocal:
		return "local"
	}
	return strconv.FormatUint(uint64(id), 10)
}

// ParseTable parses a table name or number (1..2^32-1).
func ParseTable(s string) (uint32, bool) {
	switch s {
	case "default":
		return TableDefault, true
	case "main":
		return TableMain, true
	case "local":
		return TableLocal, true
	}
	v, err := strconv.ParseUint(s, 0, 32)
	return uint32(v), err == nil && v != 0
}
