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
)

// Query is one parsed query line: one of the types below.
type Query interface {
	// Name is the query as iproute2 names it (`route show`), for messages.
	Name() string
}

// RouteShow is `ip route show [table main|local|all|N]`.
type RouteShow struct {
	Table uint32 // fib.TableAll for `table all`
}

// RouteGet is `ip route get [to] ADDR`. Dst is kept as written: an address
// that does not parse is answered with an error object, as `netfwd route
// get` answers it.
type RouteGet struct {
	Dst string
}

// AddrShow is `ip address show [up] [[dev] D]`.
type AddrShow struct {
	Dev string
	Up  bool // only interfaces that are up
}

// LinkShow is `ip link show [up] [[dev] D]`.
type LinkShow struct {
	Dev string
	Up  bool
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
	unsupported(exact("down"), exact("label"), exact("group"), exact("master"), exact("vrf"),
		exact("nomaster"), exact("type"), exact("proto"), exact("novf")),
	exact("dev"),
)

// parseListFilter reads `[up] [[dev] D]`.
func parseListFilter(w *words) (dev string, up bool, err error) {
	for w.More() {
		a := w.Next()
		means, ok, err := listFilters.lookup(a)
		if err != nil {
			return "", false, err
		}
		switch {
		case ok && means == "up":
			up = true
			continue
		case ok && means == "dev":
			if a, err = w.Value(a); err != nil {
				return "", false, err
			}
		}
		if dev != "" {
			return "", false, fmt.Errorf("either \"dev\" is duplicate, or %s is garbage", Quote(a))
		}
		if err := checkDevName(a); err != nil {
			return "", false, err
		}
		dev = a
	}
	return dev, up, nil
}

// parseRouteGet reads the arguments of `ip route get` (iproute_get).
var routeGetArgs = table("route get argument",
	unsupported(exact("tos"), kw("dsfield"), kw("from"), kw("iif"), kw("mark"), kw("oif"), exact("dev"),
		kw("notify"), kw("connected"), kw("vrf"), kw("uid"), kw("fibmatch"), exact("as"), kw("sport"),
		kw("dport"), kw("ipproto"), exact("flowlabel")),
)

func parseRouteGet(w *words) (Query, error) {
	var q RouteGet
	for w.More() {
		a := w.Next()
		if _, ok, err := routeGetArgs.lookup(a); ok {
			return nil, err
		}
		if a == "to" {
			var err error
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

// routeShowArgs is iproute_list_flush_or_save's argument table.
var routeShowArgs = table("route show argument",
	kw("table"),
	unsupported(kw("vrf"), kw("cached"), kw("cloned"), exact("tos"), kw("dsfield"), kw("protocol"), kw("scope"),
		kw("type"), exact("dev"), exact("oif"), exact("iif"), exact("mark"), kw("metric"), kw("priority"),
		exact("preference"), exact("via"), exact("src"), kw("realms"), kw("from"), exact("to"), kw("root"),
		kw("match"), kw("exact")),
)

func parseRouteShow(w *words) (Query, error) {
	q := RouteShow{Table: tableMain}
	for w.More() {
		a := w.Next()
		means, ok, err := routeShowArgs.lookup(a)
		if err != nil {
			return nil, err
		}
		if !ok || means != "table" {
			// A prefix selector (`ip route show 10.0.0.0/8`).
			return nil, fmt.Errorf("route show: selecting routes by prefix (%s) is not supported by netfwd", Quote(a))
		}
		v, err := w.Value(a)
		if err != nil {
			return nil, err
		}
		if v == "all" {
			q.Table = tableAll
			continue
		}
		if q.Table, err = parseTable(v); err != nil {
			return nil, err
		}
	}
	return q, nil
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
