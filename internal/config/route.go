package config

// `route add|append|replace|change|delete [TYPE] PREFIX [via GW] [dev D]
//  [nhid N] [nexthop via GW dev D weight W ...] [table T | vrf NAME]
//  [metric M] [proto P] [scope S] [src A] [onlink]`, and the `route
// show|get` queries, with iproute.c's keyword tables.
//
// `vrf NAME` names a table through a VRF, as iproute2 does (the last of
// `table` and `vrf` wins); the name is resolved when the line is applied
// (apply.FIBCommand: the VRF's table at that point), not here, where no
// VRF is known.

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"

	"github.com/netfwd/netfwd/fib"
)

// RouteCmd is a parsed route line.
type RouteCmd struct {
	Op   string // add, append, replace, change, delete
	Spec fib.RouteSpec
	// VRF is `vrf NAME`: the route goes in (or is deleted from) NAME's
	// table, Spec.Table being 0. Empty: Spec.Table says.
	VRF string
}

const (
	tableMain = fib.TableMain
	tableAll  = fib.TableAll
)

// routeCommands is do_iproute's chain.
var routeCommands = table("route command",
	kw("add"), kw("change"), exact("chg", "change"), kw("replace"), unsupported(kw("prepend")), kw("append"),
	unsupported(kw("test")), kw("delete"), kw("list", "show"), kw("show"), kw("lst", "show"), kw("get"),
	kw("flush"), unsupported(kw("save"), kw("restore"), kw("showdump")), kw("help"),
)

// routeArgs is iproute_modify's chain.
var routeArgs = table("route argument",
	exact("src"), unsupported(exact("as")), exact("via"), unsupported(exact("from"), exact("tos"), kw("dsfield"),
		exact("expires")),
	kw("metric"), kw("priority", "metric"), exact("preference", "metric"), exact("scope"),
	unsupported(exact("mtu"), exact("hoplimit"), exact("advmss"), kw("reordering"), exact("rtt"), exact("rto_min"),
		kw("window"), kw("cwnd"), kw("initcwnd"), kw("initrwnd"), kw("features"), kw("quickack"), kw("congctl"),
		kw("rttvar"), kw("ssthresh"), kw("realms")),
	exact("onlink"), exact("nexthop"), exact("nhid"), kw("protocol"), kw("table"), kw("vrf"),
	exact("dev"), exact("oif", "dev"),
	unsupported(kw("pref"), exact("encap"), exact("ttl-propagate"), kw("fastopen_no_cookie")),
)

// routeTypes is rtnl_rtntype_a2n's chain.
var routeTypes = table("route type",
	exact("local"), unsupported(exact("nat")), kw("broadcast"), exact("brd", "broadcast"),
	unsupported(kw("anycast"), kw("multicast")), kw("prohibit"), kw("unreachable"), kw("blackhole"),
	unsupported(kw("xresolve")), kw("unicast"), exact("throw"),
)

// pathArgs is parse_one_nh's chain (one `nexthop` of a multipath route).
var pathArgs = table("nexthop argument",
	exact("via"), exact("dev"), exact("weight"), exact("onlink"), unsupported(kw("realms"), exact("encap"), exact("as")),
)

func parseRoute(cmd *Command, w *words) error {
	op, err := verb(w, routeCommands, "show")
	if err != nil {
		return err
	}
	switch op {
	case "show":
		cmd.Query, err = parseRouteShow(w)
		return err
	case "get":
		cmd.Query, err = parseRouteGet(w)
		return err
	case "flush":
		if !w.More() {
			return errors.New(`"route flush" requires arguments`)
		}
		f, err := parseRouteFilter(w, tableMain)
		cmd.Query = RouteFlush{f}
		return err
	}
	c := &RouteCmd{Op: op}
	if err := parseRouteSpec(w, &c.Spec, &c.VRF); err != nil {
		return err
	}
	cmd.Route = c
	return nil
}

func parseRouteSpec(w *words, s *fib.RouteSpec, vrf *string) error {
	havePrefix := false
	for w.More() {
		a := w.Next()
		means, ok, err := routeArgs.lookup(a)
		if err != nil {
			return err
		}
		if !ok {
			if err := routeDst(w, a, s, &havePrefix); err != nil {
				return err
			}
			continue
		}
		if means == "onlink" {
			s.OnLink = true
			continue
		}
		if means == "nexthop" {
			p, err := parsePath(w)
			if err != nil {
				return err
			}
			s.Multipath = append(s.Multipath, p)
			continue
		}
		v, err := w.Value(a)
		if err != nil {
			return err
		}
		switch means {
		case "src":
			if s.Src, err = addr4(v); err != nil {
				return err
			}
		case "via":
			if v == "inet" { // `via inet ADDR`
				if v, err = w.Value("via inet"); err != nil {
					return err
				}
			}
			if s.Gateway, err = addr4(v); err != nil {
				return err
			}
		case "metric":
			m, err := strconv.ParseUint(v, 0, 32)
			if err != nil {
				return fmt.Errorf("invalid metric %s", Quote(v))
			}
			s.Metric, s.MetricSet = uint32(m), true
		case "scope":
			sc, ok := fib.ParseScope(v)
			if !ok {
				return fmt.Errorf("invalid scope %s", Quote(v))
			}
			s.Scope, s.ScopeSet = sc, true
		case "nhid":
			id, err := strconv.ParseUint(v, 0, 32)
			if err != nil || id == 0 {
				return fmt.Errorf("invalid nexthop id %s", Quote(v))
			}
			s.NhID = uint32(id)
		case "protocol":
			p, ok := fib.ParseProto(v)
			if !ok || p == 0 {
				return fmt.Errorf("invalid protocol %s", Quote(v))
			}
			s.Proto = p
		case "table":
			if s.Table, err = parseTable(v); err != nil {
				return err
			}
			*vrf = ""
		case "vrf":
			*vrf, s.Table = v, 0
		case "dev":
			if err := setDev(&s.Dev, v); err != nil {
				return err
			}
		}
	}
	if !havePrefix {
		return errors.New("missing destination prefix")
	}
	return nil
}

// routeDst reads iproute_modify's default branch: `[to] [TYPE] PREFIX`.
func routeDst(w *words, a string, s *fib.RouteSpec, havePrefix *bool) error {
	var err error
	if a == "to" {
		if a, err = w.Value(a); err != nil {
			return err
		}
	}
	if a != "" && (a[0] < '0' || a[0] > '9') {
		means, ok, err := routeTypes.lookup(a)
		if err != nil {
			return err
		}
		if ok {
			t, _ := fib.ParseType(means)
			s.Type, s.TypeSet = t, true
			if a, err = w.Value(a); err != nil {
				return fmt.Errorf("route type %s needs a destination prefix", Quote(means))
			}
		}
	}
	if !prefixLike(a) && (*havePrefix || suggest(a, w.cfg, routeArgs, routeTypes, pathArgs) != "") {
		// A word that is no keyword, where no destination can be: a
		// misspelt keyword (`metrc 5`), not a second destination.
		return errUnknownKeyword(a, w.cfg, routeArgs, routeTypes, pathArgs)
	}
	if *havePrefix {
		return fmt.Errorf("the destination is given twice (%s, then %s)", s.Prefix, Quote(a))
	}
	p, err := parsePrefix(a)
	if err != nil {
		return err
	}
	s.Prefix, *havePrefix = p, true
	return nil
}

// prefixLike reports whether s can only be meant as an address or prefix
// (a digit first, or one of get_prefix's names), not as a keyword.
func prefixLike(s string) bool {
	return s != "" && s[0] >= '0' && s[0] <= '9' || s == "default" || s == "all" || s == "any"
}

// parsePath reads the attributes of one `nexthop` of a multipath route, up
// to the next word that is not one of them.
func parsePath(w *words) (fib.Path, error) {
	var p fib.Path
	for w.More() {
		means, ok, err := pathArgs.lookup(w.Peek())
		if err != nil {
			return p, err
		}
		if !ok {
			break
		}
		a := w.Next()
		if means == "onlink" {
			p.OnLink = true
			continue
		}
		v, err := w.Value(a)
		if err != nil {
			return p, err
		}
		switch means {
		case "via":
			if p.Gateway, err = addr4(v); err != nil {
				return p, err
			}
		case "dev":
			if err := setDev(&p.Dev, v); err != nil {
				return p, err
			}
		case "weight":
			n, err := strconv.ParseUint(v, 10, 16)
			if err != nil || n == 0 || n > 256 {
				return p, fmt.Errorf("invalid weight %s (1-256)", Quote(v))
			}
			p.Weight = uint16(n)
		}
	}
	if !p.Gateway.IsValid() && p.Dev == "" {
		return p, errors.New("nexthop needs via or dev")
	}
	return p, nil
}

// parsePrefix accepts "default", "all", "any", A.B.C.D/L and a bare
// address (/32), as iproute2's get_prefix.
func parsePrefix(s string) (netip.Prefix, error) {
	if s == "default" || s == "all" || s == "any" {
		return netip.PrefixFrom(netip.IPv4Unspecified(), 0), nil
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		if !p.Addr().Is4() {
			return netip.Prefix{}, fmt.Errorf("%s is not an IPv4 prefix", Quote(s))
		}
		return p, nil
	}
	a, err := addr4(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("invalid prefix %s", Quote(s))
	}
	return netip.PrefixFrom(a, 32), nil
}

// parseTable reads a table name or number.
func parseTable(v string) (uint32, error) {
	t, ok := fib.ParseTable(v)
	if !ok {
		return 0, fmt.Errorf("invalid table %s", Quote(v))
	}
	return t, nil
}
