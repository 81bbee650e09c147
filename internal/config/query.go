package config

// Queries: lines that ask instead of change (`route show`, `ip -j neigh
// show dev eth0`, `bridge fdb show br br0`, `stats`, `reload`), parsed by
// the same reader as configuration lines into one typed value each. A
// configuration file refuses them (the applier); the control socket answers
// them (internal/show) after the request's configuration committed.
//
// Locking: none (values).

import (
	"fmt"
	"net/netip"
	"strconv"

	"github.com/netfwd/netfwd/fib"
)

// Query is one parsed query line: one of the types below.
type Query interface {
	// Name is the query as iproute2 names it (`route show`), for messages.
	Name() string
}

// RouteShow is `ip route show [SELECTOR]` (iproute_list_flush_or_save):
// `[table main|local|all|N] [dev D] [proto P] [type T] [scope S]
// [root|match|exact PREFIX | PREFIX]`.
type RouteShow struct {
	RouteFilter
}

// RouteFilter is iproute2's route SELECTOR, shared by `route show` and
// `route flush`. Zero fields select everything.
type RouteFilter struct {
	Table uint32 // fib.TableAll for `table all`
	Dev   string
	Proto fib.Proto // 0: any
	Type  fib.Type
	Scope fib.Scope
	// TypeSet and ScopeSet say Type and Scope filter.
	TypeSet, ScopeSet bool
	// Root selects routes inside the prefix (`root P`), Match routes
	// containing it (`match P`); a bare prefix or `exact P` sets both
	// (that one prefix). Invalid: not set.
	Root, Match netip.Prefix
	// VRF is `vrf NAME`: the VRF's table without its local and broadcast
	// routes, as iproute2 sets filter.tb and filter.typemask. The table is
	// the VRF's at the time of the query (InVRF), not of the parse.
	VRF string
	// NoLocal hides local and broadcast routes (set by InVRF).
	NoLocal bool
}

// InVRF is the selector with its VRF resolved to table (the VRF's).
func (f RouteFilter) InVRF(table uint32) RouteFilter {
	f.Table, f.NoLocal = table, true
	return f
}

// RouteFlush is `ip route flush SELECTOR`: delete the configured routes
// the selector names (a configuration change, done by the control socket
// as one batch).
type RouteFlush struct {
	RouteFilter
}

// NeighFlush is `ip neigh flush [dev D] [nud STATE]...`: delete the
// matching entries (iproute2's default: all but permanent and noarp).
type NeighFlush struct {
	Dev string
	NUD uint16 // as NeighShow; 0: iproute2's flush default
}

// Monitor is `ip monitor [all | OBJECT...]`: stream changes until the
// client goes.
type Monitor struct {
	Objects MonitorObjects
	All     bool // `monitor all`: lines carry [ROUTE]-style prefixes
}

// MonitorObjects is a set of monitored objects.
type MonitorObjects uint8

// The objects `monitor` follows.
const (
	MonitorRoute MonitorObjects = 1 << iota
	MonitorNeigh
	MonitorLink
	MonitorFDB
	MonitorAll = MonitorRoute | MonitorNeigh | MonitorLink | MonitorFDB
)

// Help is `help` at any level (`help`, `route help`, `route show help`,
// `bridge fdb help`, or `?` in place of `help`): what that level takes,
// generated from the parser's keyword tables (help.go).
type Help struct {
	Text string
}

// RouteGet is `ip route get [to] ADDR [from A] [iif D] [oif D] [mark M]
// [tos T] [ipproto P] [sport N] [dport N]`: the flow the rule walk selects
// on (fib.FlowQuery). Dst is kept as written: an address that does not
// parse is answered with an error object, as `netfwd route get` answers it.
type RouteGet struct {
	Dst string
	// From is the flow's source; IIf makes it an input lookup (the
	// packet came in on IIf), without it the router's own (iif lo); OIf
	// restricts the lookup to routes through OIf (flowi4_oif).
	From     netip.Addr
	IIf, OIf string
	// Mark, TOS, IPProto, SPort and DPort are the flow's fwmark, TOS,
	// IP protocol and ports (0: none).
	Mark         uint32
	TOS, IPProto uint8
	SPort, DPort uint16
	// VRF is `vrf NAME`: the lookup in that VRF, as the kernel's with the
	// VRF device as the flow's output interface.
	VRF string
}

// AddrShow is `ip address show [up] [[dev] D]`.
type AddrShow struct {
	ListFilter
	Brief bool // `ip -br address show`
}

// LinkShow is `ip link show [up] [[dev] D]`.
type LinkShow struct {
	ListFilter
	Stats bool // `ip -s link show`: the counters under each interface
	Brief bool // `ip -br link show`: one line per interface
}

// NexthopShow is `ip nexthop show [id N]`.
type NexthopShow struct {
	ID uint32 // 0: all
}

// NeighShow is `ip neigh show [dev D] [nud STATE]...`.
type NeighShow struct {
	Dev string
	// NUD is the state mask of the filter: neigh.State bits plus NUDNone (0: iproute2's default,
	// everything but NOARP and NONE).
	NUD uint16
}

// FDBShow is `bridge fdb show [br BR] [brport|dev PORT]`.
type FDBShow struct {
	Bridge string
	Port   string // a port, or the bridge device for its own entries
}

// VLANShow is `bridge [-compressvlans] vlan show [dev D]`.
type VLANShow struct {
	Dev      string
	Compress bool // ranges of VLANs with equal flags on one line
}

// Stats is `stats`: the engine's counters.
type Stats struct{}

// Reload is `reload`: the daemon re-reads its config file.
type Reload struct{}

func (RouteShow) Name() string   { return "route show" }
func (RouteGet) Name() string    { return "route get" }
func (AddrShow) Name() string    { return "address show" }
func (LinkShow) Name() string    { return "link show" }
func (NexthopShow) Name() string { return "nexthop show" }
func (NeighShow) Name() string   { return "neigh show" }
func (FDBShow) Name() string     { return "bridge fdb show" }
func (VLANShow) Name() string    { return "bridge vlan show" }
func (Stats) Name() string       { return "stats" }
func (Reload) Name() string      { return "reload" }
func (RouteFlush) Name() string  { return "route flush" }
func (NeighFlush) Name() string  { return "neigh flush" }
func (Monitor) Name() string     { return "monitor" }
func (Help) Name() string        { return "help" }

// ipstats.c's commands.
var statsCommands = table("stats command", kw("show"), unsupported(kw("set"), kw("help")))

func parseStats(w *words) (Query, error) {
	if w.More() {
		if _, err := statsCommands.must(w.Next()); err != nil {
			return nil, err
		}
		if w.More() {
			return nil, fmt.Errorf("stats: unexpected %s", Quote(w.Next()))
		}
	}
	return Stats{}, nil
}

// listFilters is the argument table of ipaddr_list_flush_or_save (`ip
// address show`, and `ip link show`, which is the same function).
var listFilters = table("address/link show argument",
	unsupported(exact("to"), exact("scope")), exact("up"),
	unsupported(exact("down"), exact("label"), exact("group")), exact("master"), exact("vrf"),
	unsupported(exact("nomaster"), exact("type"), exact("proto"), exact("novf")),
	exact("dev"),
)

// ListFilter is the selector of `ip link show` and `ip address show`:
// `[up] [master DEV | vrf NAME] [[dev] D]`.
type ListFilter struct {
	Dev string
	Up  bool
	// Master selects the devices enslaved to it (a bridge's ports, a VRF's
	// devices); VRF says it was given as `vrf NAME`, which must name a VRF.
	Master string
	VRF    bool
}

// parseListFilter reads a ListFilter.
func parseListFilter(w *words) (ListFilter, error) {
	var f ListFilter
	for w.More() {
		a := w.Next()
		means, ok, err := listFilters.lookup(a)
		if err != nil {
			return f, err
		}
		switch {
		case ok && means == "up":
			f.Up = true
			continue
		case ok && (means == "master" || means == "vrf"):
			v, err := w.Value(a)
			if err != nil {
				return f, err
			}
			if err := setDev(&f.Master, v); err != nil {
				return f, err
			}
			f.VRF = means == "vrf"
			continue
		case ok && means == "dev":
			if a, err = w.Value(a); err != nil {
				return f, err
			}
		}
		if f.Dev != "" {
			return f, fmt.Errorf("either \"dev\" is duplicate, or %s is garbage", Quote(a))
		}
		if err := checkDevName(a); err != nil {
			return f, err
		}
		f.Dev = a
	}
	return f, nil
}

// routeGetArgs is iproute_get's argument table.
var routeGetArgs = table("route get argument",
	exact("tos"), kw("dsfield", "tos"), kw("from"), kw("iif"), kw("mark"), kw("oif"), exact("dev", "oif"),
	unsupported(kw("notify"), kw("connected")), kw("vrf"), unsupported(kw("uid"), kw("fibmatch"), exact("as")), kw("sport"),
	kw("dport"), kw("ipproto"), unsupported(exact("flowlabel")),
)

// parseRouteGet reads `[to] ADDR` and the flow's selectors.
func parseRouteGet(w *words) (Query, error) {
	var q RouteGet
	for w.More() {
		a := w.Next()
		means, ok, err := routeGetArgs.lookup(a)
		if err != nil {
			return nil, err
		}
		if ok {
			v, err := w.Value(a)
			if err != nil {
				return nil, err
			}
			switch means {
			case "from":
				p, err := parsePrefix(v)
				if err != nil {
					return nil, err
				}
				q.From = p.Addr()
			case "iif":
				if err := setDev(&q.IIf, v); err != nil {
					return nil, err
				}
			case "oif":
				if err := setDev(&q.OIf, v); err != nil {
					return nil, err
				}
			case "vrf":
				if err := setDev(&q.VRF, v); err != nil {
					return nil, err
				}
			default:
				if err := setRouteGetFlow(&q, means, v); err != nil {
					return nil, err
				}
			}
			continue
		}
		if a == "to" {
			if a, err = w.Value(a); err != nil {
				return nil, err
			}
		}
		if q.Dst != "" {
			return nil, fmt.Errorf("route get: want one address, got %s and %s", Quote(q.Dst), Quote(a))
		}
		q.Dst = a
	}
	if q.Dst == "" {
		return nil, fmt.Errorf("route get: missing address")
	}
	return q, nil
}

// setRouteGetFlow sets one of route get's flow selectors.
func setRouteGetFlow(q *RouteGet, means, v string) error {
	var err error
	switch means {
	case "tos":
		q.TOS, err = parseDSField(v)
	case "mark":
		q.Mark, err = ruleU32(v, "mark")
	case "ipproto":
		q.IPProto, err = ParseIPProto(v)
	case "sport", "dport":
		n, perr := strconv.ParseUint(v, 0, 16)
		if perr != nil {
			return fmt.Errorf("invalid %s %s", means, Quote(v))
		}
		if means == "sport" {
			q.SPort = uint16(n)
		} else {
			q.DPort = uint16(n)
		}
	}
	return err
}

// routeShowArgs is iproute_list_flush_or_save's argument table.
var routeShowArgs = table("route show argument",
	kw("table"),
	kw("vrf"), unsupported(kw("cached"), kw("cloned"), exact("tos"), kw("dsfield")), kw("protocol"), kw("scope"),
	kw("type"), exact("dev"), exact("oif", "dev"),
	unsupported(exact("iif"), exact("mark"), kw("metric"), kw("priority"),
		exact("preference"), exact("via"), exact("src"), kw("realms"), kw("from")), exact("to"),
)

// routePrefixArgs is the selector's default branch: `[to] [root|match|exact] PREFIX`.
var routePrefixArgs = table("route prefix selector", kw("root"), kw("match"), kw("exact"))

func parseRouteShow(w *words) (Query, error) {
	f, err := parseRouteFilter(w, tableMain)
	return RouteShow{f}, err
}

// parseRouteFilter reads iproute2's route SELECTOR.
func parseRouteFilter(w *words, dflt uint32) (RouteFilter, error) {
	f := RouteFilter{Table: dflt}
	for w.More() {
		a := w.Next()
		means, ok, err := routeShowArgs.lookup(a)
		if err != nil {
			return f, err
		}
		if !ok || means == "to" {
			if ok {
				if a, err = w.Value(a); err != nil {
					return f, err
				}
			}
			sel, ok, err := routePrefixArgs.lookup(a)
			if err != nil {
				return f, err
			}
			if ok {
				if a, err = w.Value(a); err != nil {
					return f, err
				}
			}
			if a == "all" || a == "any" { // get_prefix's AF_UNSPEC: every route
				continue
			}
			p, err := parsePrefix(a)
			if err != nil {
				return f, err
			}
			p = p.Masked()
			switch sel {
			case "root":
				f.Root = p
			case "match":
				f.Match = p
			default:
				f.Root, f.Match = p, p
			}
			continue
		}
		v, err := w.Value(a)
		if err != nil {
			return f, err
		}
		switch means {
		case "table":
			if v == "all" {
				f.Table = tableAll
			} else if f.Table, err = parseTable(v); err != nil {
				return f, err
			}
		case "protocol":
			p, ok := fib.ParseProto(v)
			if !ok || p == 0 {
				return f, fmt.Errorf("invalid protocol %s", Quote(v))
			}
			f.Proto = p
		case "scope":
			sc, ok := fib.ParseScope(v)
			if !ok {
				return f, fmt.Errorf("invalid scope %s", Quote(v))
			}
			f.Scope, f.ScopeSet = sc, true
		case "type":
			t, err := routeTypes.must(v)
			if err != nil {
				return f, err
			}
			f.Type, _ = fib.ParseType(t)
			f.TypeSet = true
		case "dev":
			if err := setDev(&f.Dev, v); err != nil {
				return f, err
			}
		case "vrf":
			if err := setDev(&f.VRF, v); err != nil {
				return f, err
			}
		}
	}
	return f, nil
}

// Selects reports whether the selector takes r (filter_nlmsg).
func (f *RouteFilter) Selects(r *fib.Route) bool {
	if f.Table != tableAll && r.Table != f.Table {
		return false
	}
	if f.Proto != 0 && r.Proto != f.Proto || f.TypeSet && r.Type != f.Type || f.ScopeSet && r.Scope != f.Scope {
		return false
	}
	if f.NoLocal && (r.Type == fib.Local || r.Type == fib.Broadcast) {
		return false
	}
	if f.Root.IsValid() && (r.Prefix.Bits() < f.Root.Bits() || !f.Root.Contains(r.Prefix.Addr())) {
		return false
	}
	if f.Match.IsValid() && (r.Prefix.Bits() > f.Match.Bits() || !r.Prefix.Contains(f.Match.Addr())) {
		return false
	}
	if f.Dev != "" {
		if r.NH == nil || r.NH.Group != nil || r.NH.Dev != f.Dev {
			return false
		}
	}
	return true
}

// neighShowArgs is do_show_or_flush's argument table (ipneigh.c).
var neighShowArgs = table("neigh show argument",
	exact("dev"), unsupported(exact("master"), exact("vrf"), exact("nomaster"), exact("unused")), exact("nud"),
	unsupported(exact("proxy"), kw("protocol")),
)

func parseNeighShow(w *words) (Query, error) {
	var q NeighShow
	for w.More() {
		a := w.Next()
		means, ok, err := neighShowArgs.lookup(a)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("neigh show: selecting entries by address (%s) is not supported by netfwd", Quote(a))
		}
		v, err := w.Value(a)
		if err != nil {
			return nil, err
		}
		switch means {
		case "dev":
			if q.Dev != "" {
				return nil, fmt.Errorf("duplicate \"dev\": %s", Quote(v))
			}
			if err := checkDevName(v); err != nil {
				return nil, err
			}
			q.Dev = v
		case "nud":
			st, err := parseNUDFilter(v)
			if err != nil {
				return nil, err
			}
			q.NUD |= st
		}
	}
	return q, nil
}

// addr4 reads an IPv4 address.
func addr4(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return netip.Addr{}, fmt.Errorf("invalid IPv4 address %s", Quote(s))
	}
	return a, nil
}
