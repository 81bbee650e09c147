package fpm

// The translation of rtnetlink route and nexthop messages into FIB
// operations, shared by the FPM server and the kernel mirror (both receive
// the kernel's message formats; zebra writes them as it would for the
// kernel).
//
// Flow: a Translator belongs to one source session (owner + mark). Nexthop
// objects (RTM_NEWNEXTHOP) become the registry's shared nexthops, keyed by
// content, not by the source's id: the ids differ between zebra instances
// (and between a zebra and the kernel), so a replay after a restart, which
// names the same nexthops by new ids, finds the same objects and changes
// nothing. The translator keeps the source's id -> object map and one
// reference per entry. Routes name their nexthop by id (RTA_NH_ID), inline
// (RTA_GATEWAY + RTA_OIF) or as RTA_MULTIPATH; the interface index is the
// source's and maps to a netfwd device through the Iface hook.
//
// Every table is translated, as the kernel keeps every table: a route goes
// into the table its RTA_TABLE names (which beats the header's rtm_table,
// 252 "compat" for ids past 255; 0 means main, as in a kernel request);
// the rules (fib.Rule) decide which tables lookups see. MainLocalOnly
// restricts a session to main and local.
//
// What is not translated is counted by reason and skipped (Skipped): other
// families, route types and features an IPv4 forwarder does not have,
// unknown nexthop ids or interfaces, other tables under MainLocalOnly.
//
// Locking: a Translator is used by one goroutine, inside FIB transactions;
// its counters are atomic (Stats).

import (
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/rtnl"
	"github.com/netfwd/netfwd/nexthop"
)

// IfaceFunc maps a source's interface index to the netfwd device that
// routes through it use (by name in the daemon's namespace; the host path
// maps a port's twin interface to the port).
type IfaceFunc func(ifindex uint32) (dev string, ok bool)

// Skip reasons (metric labels).
const (
	SkipFamily      = "family"           // not IPv4 (IPv6 routes and nexthops)
	SkipTable       = "table"            // a table other than main and local (MainLocalOnly)
	SkipKernelProto = "proto_kernel"     // zebra's copies of connected routes
	SkipType        = "route_type"       // anycast, multicast, nat, ...
	SkipUnsupported = "unsupported"      // tunnels, MPLS, source or TOS routing
	SkipPrefix      = "invalid_prefix"   // host bits set
	SkipNexthopID   = "unknown_nhid"     // RTA_NH_ID or a group member not known
	SkipIface       = "unknown_iface"    // an interface index the hook cannot map
	SkipNexthop     = "invalid_nexthop"  // a nexthop object netfwd cannot use
	SkipNoRoute     = "delete_not_found" // RTM_DELROUTE of a route we do not have
	SkipMessage     = "message_type"     // a netlink message type not handled
	SkipRegistry    = "nexthop_table"    // the nexthop table is full
)

// Counters are a source's message counters. All fields are atomic.
type Counters struct {
	RoutesAdded     atomic.Uint64
	RoutesReplaced  atomic.Uint64
	RoutesUnchanged atomic.Uint64 // identical replays: only the mark refreshed
	RoutesDeleted   atomic.Uint64
	// RoutesSeeded are routes read from the kernel's copy of zebra's at
	// start (seed.go), not from a message: a restarted netfwd forwards them
	// until zebra's replay confirms them or a sweep removes them.
	RoutesSeeded    atomic.Uint64
	NexthopsSet     atomic.Uint64
	NexthopsDeleted atomic.Uint64
	// Lag is the delay of each batch from its first message read to its
	// commit (lag.go).
	Lag Lag

	mu      sync.Mutex
	skipped map[string]uint64 // guarded by mu
}

func (c *Counters) skip(reason string) {
	c.mu.Lock()
	if c.skipped == nil {
		c.skipped = map[string]uint64{}
	}
	c.skipped[reason]++
	c.mu.Unlock()
}

// Skipped returns a copy of the skip counts by reason.
func (c *Counters) Skipped() map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]uint64, len(c.skipped))
	for k, v := range c.skipped {
		out[k] = v
	}
	return out
}

// nhEntry is one source nexthop id.
type nhEntry struct {
	obj *nexthop.Nexthop
	// members of a group (source ids); nil for a single nexthop
	members []rtnl.GroupMember
	mark    uint8
}

// Translator applies one source session's messages.
type Translator struct {
	Owner fib.Owner
	// Mark stamps every route the session installs (mark-and-sweep).
	Mark  uint8
	Iface IfaceFunc
	// KeepKernelProto installs routes of protocol kernel too (zebra sends
	// its connected routes; netfwd derives its own from its addresses).
	KeepKernelProto bool
	// MainLocalOnly skips tables other than main and local (by default
	// every table is installed, as the kernel does).
	MainLocalOnly bool
	// Skip, if set, may refuse a route about to be installed (with its
	// nexthop resolved): it returns the reason to count, or "".
	Skip func(tx *fib.Txn, r *fib.LearnedRoute) string
	C    *Counters
	// Seen records the protocols of the routes the session installed or
	// confirmed (the sweep waits for each protocol it would sweep).
	Seen [256]bool

	nhs map[uint32]*nhEntry

	// one-entry caches for the hot paths
	lastIf    uint32
	lastDev   string
	lastSpec  nexthop.Spec
	lastNH    *nexthop.Nexthop
	lastNHReg *nexthop.Registry

	paths   []nexthop.Spec
	weights []uint16

	// tables the session installed routes into (Tables); lastTable
	// short-cuts the map on the hot path
	tables    map[uint32]bool
	lastTable uint32
}

// NewTranslator returns a translator for a session of owner.
func NewTranslator(owner fib.Owner, mark uint8, iface IfaceFunc, c *Counters) *Translator {
	if c == nil {
		c = new(Counters)
	}
	return &Translator{Owner: owner, Mark: mark, Iface: iface, C: c, nhs: map[uint32]*nhEntry{}}
}

// dev maps an interface index to a device name.
func (t *Translator) dev(ifindex uint32) (string, bool) {
	if ifindex == t.lastIf && t.lastDev != "" {
		return t.lastDev, true
	}
	if t.Iface == nil || ifindex == 0 {
		return "", false
	}
	d, ok := t.Iface(ifindex)
	if ok {
		t.lastIf, t.lastDev = ifindex, d
	}
	return d, ok
}

// ForgetIfaces drops the cached interface name (a link changed).
func (t *Translator) ForgetIfaces() { t.lastIf, t.lastDev = 0, "" }

// implicit returns a held reference to the shared nexthop of spec.
func (t *Translator) implicit(tx *fib.Txn, s nexthop.Spec) (*nexthop.Nexthop, error) {
	reg := tx.Nexthops()
	if t.lastNH != nil && t.lastNHReg == reg && s == t.lastSpec && t.lastNH.Refs() > 0 {
		reg.Hold(t.lastNH)
		return t.lastNH, nil
	}
	nh, err := reg.Implicit(s)
	if err == nil {
		t.lastSpec, t.lastNH, t.lastNHReg = s, nh, reg
	}
	return nh, err
}

var routeTypes = [...]fib.Type{
	rtnl.RTN_UNICAST: fib.Unicast, rtnl.RTN_LOCAL: fib.Local, rtnl.RTN_BROADCAST: fib.Broadcast,
	rtnl.RTN_BLACKHOLE: fib.Blackhole, rtnl.RTN_UNREACHABLE: fib.Unreachable, rtnl.RTN_PROHIBIT: fib.Prohibit,
	rtnl.RTN_THROW: fib.Throw,
}

var specialKinds = map[fib.Type]nexthop.Kind{
	fib.Local: nexthop.Local, fib.Broadcast: nexthop.Broadcast, fib.Blackhole: nexthop.Blackhole,
	fib.Unreachable: nexthop.Unreachable, fib.Prohibit: nexthop.Prohibit,
}

// Mode maps a RTM_NEWROUTE's flags to the FIB's insertion mode.
func Mode(flags uint16) fib.LearnedMode {
	switch {
	case flags&rtnl.NLM_F_REPLACE != 0:
		return fib.LearnedReplace
	case flags&rtnl.NLM_F_APPEND != 0 || flags&rtnl.NLM_F_CREATE == 0:
		return fib.LearnedAppend // appends, and a dump's routes in order
	}
	return fib.LearnedPrepend
}

// table resolves and filters a route's table (rtnl.Route.Table is
// RTA_TABLE when present, else rtm_table).
func (t *Translator) table(r *rtnl.Route) (uint32, bool) {
	switch r.Table {
	case fib.TableUnspec:
		return fib.TableMain, true // the kernel's fib_get_table(0)
	case fib.TableMain, fib.TableLocal:
		return r.Table, true
	}
	return r.Table, !t.MainLocalOnly
}

// noteTable records a table the session installed a route into.
func (t *Translator) noteTable(id uint32) {
	if id == t.lastTable {
		return
	}
	if t.tables == nil {
		t.tables = map[uint32]bool{}
	}
	t.tables[id], t.lastTable = true, id
}

// Replayed reports whether the session's sweep covers table id: main and
// local always, another table once the session installed a route into it.
// zebra's replay after a (re)connect walks only each VRF's own table (FRR
// 8.4.4's dplane_fpm_nl: a route staticd put into table 100 reaches the
// FPM when it changes, never in a replay), so a table the session did not
// deliver keeps its routes (from an earlier session, or seeded from the
// kernel) rather than lose them all: a route deleted from such a table
// while zebra was away stays until the table's next delivery (or the
// stale timeout without a session).
func (t *Translator) Replayed(id uint32) bool {
	return id == fib.TableMain || id == fib.TableLocal || t.tables[id]
}

// Tables returns the tables the session installed routes into, main
// always included (the tables worth preparing for an in-place batch).
func (t *Translator) Tables() []uint32 {
	out := []uint32{fib.TableMain}
	for id := range t.tables {
		if id != fib.TableMain {
			out = append(out, id)
		}
	}
	return out
}

// filter applies the skip rules common to new and deleted routes.
func (t *Translator) filter(r *rtnl.Route) (netip.Prefix, uint32, bool) {
	if r.Family != rtnl.AF_INET {
		t.C.skip(SkipFamily)
		return netip.Prefix{}, 0, false
	}
	table, ok := t.table(r)
	if !ok {
		t.C.skip(SkipTable)
		return netip.Prefix{}, 0, false
	}
	if r.Protocol == uint8(fib.ProtoKernel) && !t.KeepKernelProto {
		t.C.skip(SkipKernelProto)
		return netip.Prefix{}, 0, false
	}
	p, ok := r.Prefix()
	if !ok {
		t.C.skip(SkipPrefix)
		return netip.Prefix{}, 0, false
	}
	return p, table, true
}

// NewRoute applies one RTM_NEWROUTE.
func (t *Translator) NewRoute(tx *fib.Txn, flags uint16, r *rtnl.Route) {
	p, table, ok := t.filter(r)
	if !ok {
		return
	}
	if int(r.Type) >= len(routeTypes) || r.Type != rtnl.RTN_UNICAST && routeTypes[r.Type] == fib.Unicast {
		t.C.skip(SkipType)
		return
	}
	if r.Unsupported != 0 {
		t.C.skip(SkipUnsupported)
		return
	}
	lr := fib.LearnedRoute{Table: table, Prefix: p, Type: routeTypes[r.Type], Proto: fib.Proto(r.Protocol),
		Scope: fib.Scope(r.Scope), Metric: r.Priority, Src: r.Prefsrc}
	nh, reason := t.routeNexthop(tx, lr.Type, r)
	if reason != "" {
		t.C.skip(reason)
		return
	}
	lr.NH = nh
	if lr.Type == fib.Unicast && nh != nil && nh.Group == nil && nh.Kind == nexthop.Blackhole {
		lr.Type = fib.Blackhole // a route through a blackhole nexthop object, as the kernel shows it
	}
	if t.Skip != nil {
		if reason := t.Skip(tx, &lr); reason != "" {
			if nh != nil {
				tx.Nexthops().Release(nh)
			}
			t.C.skip(reason)
			return
		}
	}
	res, err := tx.SetLearned(t.Owner, t.Mark, Mode(flags), &lr)
	if err != nil {
		t.C.skip(SkipPrefix)
		return
	}
	t.Seen[r.Protocol] = true
	t.noteTable(table)
	switch res {
	case fib.Added:
		t.C.RoutesAdded.Add(1)
	case fib.Replaced:
		t.C.RoutesReplaced.Add(1)
	default:
		t.C.RoutesUnchanged.Add(1)
	}
}

// routeNexthop returns a held reference to a route's nexthop.
func (t *Translator) routeNexthop(tx *fib.Txn, typ fib.Type, r *rtnl.Route) (*nexthop.Nexthop, string) {
	reg := tx.Nexthops()
	onlink := r.Flags&rtnl.RTNH_F_ONLINK != 0
	switch {
	case typ == fib.Throw:
		return nil, ""
	case typ != fib.Unicast:
		s := nexthop.Spec{Kind: specialKinds[typ]}
		if typ == fib.Local || typ == fib.Broadcast {
			dev, ok := t.dev(r.OIF)
			if !ok {
				return nil, SkipIface
			}
			s.Dev = dev
		}
		nh, err := t.implicit(tx, s)
		if err != nil {
			return nil, SkipRegistry
		}
		return nh, ""
	case r.NHID != 0:
		e := t.nhs[r.NHID]
		if e == nil {
			return nil, SkipNexthopID
		}
		reg.Hold(e.obj)
		return e.obj, ""
	case len(r.Multipath) > 0:
		t.paths, t.weights = t.paths[:0], t.weights[:0]
		for _, m := range r.Multipath {
			dev, ok := t.dev(m.OIF)
			if !ok {
				return nil, SkipIface
			}
			if m.Gateway.IsValid() && !m.Gateway.Is4() {
				return nil, SkipUnsupported
			}
			t.paths = append(t.paths, nexthop.Spec{Kind: nexthop.Unicast, Gateway: m.Gateway, Dev: dev,
				OnLink: onlink || m.Flags&rtnl.RTNH_F_ONLINK != 0})
			t.weights = append(t.weights, m.Weight)
		}
		if len(t.paths) == 1 {
			nh, err := t.implicit(tx, t.paths[0])
			if err != nil {
				return nil, SkipRegistry
			}
			return nh, ""
		}
		nh, err := reg.ImplicitGroup(t.paths, t.weights)
		if err != nil {
			return nil, SkipRegistry
		}
		return nh, ""
	}
	dev, ok := t.dev(r.OIF)
	if !ok {
		return nil, SkipIface
	}
	nh, err := t.implicit(tx, nexthop.Spec{Kind: nexthop.Unicast, Gateway: r.Gateway, Dev: dev, OnLink: onlink})
	if err != nil {
		return nil, SkipRegistry
	}
	return nh, ""
}

// DelRoute applies one RTM_DELROUTE: the owner's first route at the prefix
// matching what the message gives (metric, type, protocol, nexthop).
func (t *Translator) DelRoute(tx *fib.Txn, r *rtnl.Route) {
	p, table, ok := t.filter(r)
	if !ok {
		return
	}
	m := fib.LearnedMatch{Table: table, Prefix: p, Metric: r.Priority, MetricSet: r.HasPriority,
		Proto: fib.Proto(r.Protocol)}
	if r.Type != rtnl.RTN_UNSPEC && int(r.Type) < len(routeTypes) {
		m.Type, m.TypeSet = routeTypes[r.Type], true
	}
	// A delete that names its nexthop (the kernel's notifications do)
	// removes only the route through it.
	if m.TypeSet && m.Type == fib.Unicast && (r.NHID != 0 || r.OIF != 0 || len(r.Multipath) > 0) {
		if nh, reason := t.routeNexthop(tx, m.Type, r); reason == "" && nh != nil {
			m.NH = nh
			defer tx.Nexthops().Release(nh)
		}
	}
	found := tx.DelLearned(t.Owner, &m)
	if !found && m.NH != nil {
		// Our copy went through another nexthop (a change we did not see
		// as such): the kernel deleted the route at this metric anyway.
		m.NH = nil
		found = tx.DelLearned(t.Owner, &m)
	}
	if found {
		t.C.RoutesDeleted.Add(1)
		return
	}
	t.C.skip(SkipNoRoute)
}

// ApplyFrame applies a decoded frame's messages in order.
func (t *Translator) ApplyFrame(tx *fib.Txn, f *Frame) {
	for i := range f.Msgs {
		m := &f.Msgs[i]
		switch m.Type {
		case rtnl.RTM_NEWROUTE:
			t.NewRoute(tx, m.Flags, &m.Route)
		case rtnl.RTM_DELROUTE:
			t.DelRoute(tx, &m.Route)
		case rtnl.RTM_NEWNEXTHOP:
			t.NewNexthop(tx, &m.Nexthop)
		case rtnl.RTM_DELNEXTHOP:
			t.DelNexthop(tx, &m.Nexthop)
		}
	}
	for range f.Unknown {
		t.C.skip(SkipMessage)
	}
}
