package config

// `route add|append|replace|change|del [TYPE] PREFIX [via GW] [dev D]
//  [nhid N] [nexthop via GW dev D weight W ...] [table T] [metric M]
//  [proto P] [scope S] [src A] [onlink]`, and `route get|show` for queries.

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"

	"github.com/netfwd/netfwd/fib"
)

// RouteCmd is a parsed route line.
type RouteCmd struct {
	Op   string // add, append, replace, change, delete, get, show
	Spec fib.RouteSpec
	// Show and get arguments.
	ShowTable uint32 // show: fib.TableAll for "table all"
	GetAddr   netip.Addr
}

func parseRoute(args []string) (*RouteCmd, error) {
	op, err := command("route", args, "add", "append", "replace", "change", "delete", "del", "get", "show", "list")
	if err != nil {
		return nil, err
	}
	c := &RouteCmd{Op: op}
	args = args[1:]
	switch op {
	case "get":
		if len(args) > 0 && args[0] == "to" {
			args = args[1:]
		}
		if len(args) != 1 {
			return nil, errors.New("route get: want one address")
		}
		a, err := parseAddr4(args[0])
		if err != nil {
			return nil, err
		}
		c.GetAddr = a
		return c, nil
	case "show":
		c.ShowTable = fib.TableMain
		for len(args) > 0 {
			if args[0] != "table" || len(args) < 2 {
				return nil, fmt.Errorf("route show: unexpected %q (want: table local|main|all|N)", args[0])
			}
			if args[1] == "all" {
				c.ShowTable = fib.TableAll
			} else if t, ok := fib.ParseTable(args[1]); ok {
				c.ShowTable = t
			} else {
				return nil, fmt.Errorf("invalid table %q", args[1])
			}
			args = args[2:]
		}
		return c, nil
	}
	if err := parseRouteSpec(args, &c.Spec); err != nil {
		return nil, err
	}
	return c, nil
}

func parseRouteSpec(args []string, s *fib.RouteSpec) error {
	havePrefix := false
	next := func(i *int, what string) (string, error) {
		if *i+1 >= len(args) {
			return "", fmt.Errorf("%q needs %s", args[*i], what)
		}
		*i++
		return args[*i], nil
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		var v string
		var err error
		switch a {
		case "via":
			if v, err = next(&i, "an address"); err != nil {
				return err
			}
			if v == "inet" {
				if v, err = next(&i, "an address"); err != nil {
					return err
				}
			}
			if s.Gateway, err = parseAddr4(v); err != nil {
				return err
			}
		case "dev", "oif":
			if s.Dev, err = next(&i, "a device name"); err != nil {
				return err
			}
		case "table", "tb":
			if v, err = next(&i, "a table"); err != nil {
				return err
			}
			t, ok := fib.ParseTable(v)
			if !ok {
				return fmt.Errorf("invalid table %q", v)
			}
			s.Table = t
		case "metric", "priority", "preference":
			if v, err = next(&i, "a number"); err != nil {
				return err
			}
			m, err := strconv.ParseUint(v, 0, 32)
			if err != nil {
				return fmt.Errorf("invalid metric %q", v)
			}
			s.Metric, s.MetricSet = uint32(m), true
		case "proto", "protocol":
			if v, err = next(&i, "a protocol"); err != nil {
				return err
			}
			p, ok := fib.ParseProto(v)
			if !ok || p == 0 {
				return fmt.Errorf("invalid protocol %q", v)
			}
			s.Proto = p
		case "scope":
			if v, err = next(&i, "a scope"); err != nil {
				return err
			}
			sc, ok := fib.ParseScope(v)
			if !ok {
				return fmt.Errorf("invalid scope %q", v)
			}
			s.Scope, s.ScopeSet = sc, true
		case "src":
			if v, err = next(&i, "an address"); err != nil {
				return err
			}
			if s.Src, err = parseAddr4(v); err != nil {
				return err
			}
		case "nhid":
			if v, err = next(&i, "a nexthop id"); err != nil {
				return err
			}
			id, err := strconv.ParseUint(v, 0, 32)
			if err != nil || id == 0 {
				return fmt.Errorf("invalid nexthop id %q", v)
			}
			s.NhID = uint32(id)
		case "onlink":
			s.OnLink = true
		case "nexthop":
			p, n, err := parsePath(args[i+1:])
			if err != nil {
				return err
			}
			s.Multipath = append(s.Multipath, p)
			i += n
		case "to":
			continue
		default:
			if t, ok := fib.ParseType(a); ok && !havePrefix {
				s.Type, s.TypeSet = t, true
				continue
			}
			if havePrefix {
				return fmt.Errorf("unexpected %q", a)
			}
			p, err := parsePrefix(a)
			if err != nil {
				return err
			}
			s.Prefix, havePrefix = p, true
		}
	}
	if !havePrefix {
		return errors.New("missing destination prefix")
	}
	return nil
}

// parsePath reads the attributes of one `nexthop` of a multipath route and
// returns how many arguments it used.
func parsePath(args []string) (fib.Path, int, error) {
	var p fib.Path
	i := 0
	for i < len(args) {
		switch args[i] {
		case "via", "dev", "weight":
			if i+1 >= len(args) {
				return p, 0, fmt.Errorf("%q needs a value", args[i])
			}
			v := args[i+1]
			switch args[i] {
			case "via":
				a, err := parseAddr4(v)
				if err != nil {
					return p, 0, err
				}
				p.Gateway = a
			case "dev":
				p.Dev = v
			case "weight":
				w, err := strconv.ParseUint(v, 10, 16)
				if err != nil || w == 0 || w > 256 {
					return p, 0, fmt.Errorf("invalid weight %q (1-256)", v)
				}
				p.Weight = uint16(w)
			}
			i += 2
		case "onlink":
			p.OnLink = true
			i++
		default:
			if !p.Gateway.IsValid() && p.Dev == "" {
				return p, 0, errors.New("nexthop needs via or dev")
			}
			return p, i, nil
		}
	}
	if !p.Gateway.IsValid() && p.Dev == "" {
		return p, 0, errors.New("nexthop needs via or dev")
	}
	return p, i, nil
}

// parsePrefix accepts "default", A.B.C.D/L and a bare address (/32).
func parsePrefix(s string) (netip.Prefix, error) {
	if s == "default" || s == "all" || s == "any" {
		return netip.PrefixFrom(netip.IPv4Unspecified(), 0), nil
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		if !p.Addr().Is4() {
			return netip.Prefix{}, fmt.Errorf("%q is not an IPv4 prefix", s)
		}
		return p, nil
	}
	a, err := parseAddr4(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("invalid prefix %q", s)
	}
	return netip.PrefixFrom(a, 32), nil
}

func parseAddr4(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return netip.Addr{}, fmt.Errorf("invalid IPv4 address %q", s)
	}
	return a, nil
}
