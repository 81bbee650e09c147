package config

// `nexthop add|replace id N (via GW dev D [onlink] | dev D | blackhole |
//  group A[,W]/B[,W]...)`, `nexthop del id N`, and the `nexthop show`
// query, with ipnexthop.c's keyword tables.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/netfwd/netfwd/nexthop"
)

// NexthopCmd is a parsed nexthop line.
type NexthopCmd struct {
	Op   string // add, replace, delete
	Spec nexthop.UserSpec
}

// nexthopCommands is do_ipnh's chain.
var nexthopCommands = table("nexthop command",
	kw("add"), kw("replace"), kw("delete"), kw("list", "show"), kw("show"), kw("lst", "show"),
	unsupported(kw("get"), kw("flush"), kw("bucket"), kw("help")),
)

// nexthopArgs is ipnh_modify's chain.
var nexthopArgs = table("nexthop argument",
	exact("id"), exact("dev"), exact("via"), unsupported(exact("encap")), exact("blackhole"),
	unsupported(exact("fdb")), exact("onlink"), exact("group"),
	unsupported(exact("type"), kw("protocol"), exact("hw_stats"), exact("help")),
)

// nexthopShowArgs is ipnh_list_flush's chain.
var nexthopShowArgs = table("nexthop show argument",
	unsupported(kw("dev"), kw("groups"), kw("master"), kw("vrf")), exact("id"),
	unsupported(kw("protocol"), kw("fdb"), kw("help")),
)

func parseNexthop(cmd *Command, w *words) error {
	op, err := verb(w, nexthopCommands, "show")
	if err != nil {
		return err
	}
	if op == "show" {
		var q NexthopShow
		for w.More() {
			a := w.Next()
			if _, err := nexthopShowArgs.must(a); err != nil {
				return err
			}
			if q.ID, err = nexthopID(w, a); err != nil {
				return err
			}
		}
		cmd.Query = q
		return nil
	}
	c := &NexthopCmd{Op: op}
	s := &c.Spec
	for w.More() {
		a := w.Next()
		means, err := nexthopArgs.must(a)
		if err != nil {
			return err
		}
		switch means {
		case "id":
			if s.ID, err = nexthopID(w, a); err != nil {
				return err
			}
		case "via":
			v, err := w.Value(a)
			if err != nil {
				return err
			}
			if s.Single.Gateway, err = addr4(v); err != nil {
				return err
			}
		case "dev":
			v, err := w.Value(a)
			if err != nil {
				return err
			}
			if err := setDev(&s.Single.Dev, v); err != nil {
				return err
			}
		case "onlink":
			s.Single.OnLink = true
		case "blackhole":
			s.Single.Kind = nexthop.Blackhole
		case "group":
			v, err := w.Value(a)
			if err != nil {
				return err
			}
			if s.Group, err = parseGroup(v); err != nil {
				return err
			}
		}
	}
	if s.ID == 0 {
		return errors.New("missing \"id N\"")
	}
	cmd.Nexthop = c
	if op == "delete" {
		if s.Single.Dev != "" || s.Single.Gateway.IsValid() || len(s.Group) > 0 || s.Single.Kind != nexthop.Unicast {
			return errors.New("nexthop del takes only \"id N\"")
		}
		return nil
	}
	if len(s.Group) > 0 && (s.Single.Dev != "" || s.Single.Gateway.IsValid() || s.Single.Kind == nexthop.Blackhole) {
		return errors.New("a group takes no via, dev or blackhole")
	}
	if len(s.Group) == 0 && s.Single.Kind == nexthop.Unicast && s.Single.Dev == "" {
		return errors.New("missing \"dev DEVICE\" (or blackhole, or group)")
	}
	return nil
}

func nexthopID(w *words, key string) (uint32, error) {
	v, err := w.Value(key)
	if err != nil {
		return 0, err
	}
	id, err := strconv.ParseUint(v, 0, 32)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("invalid nexthop id %s", Quote(v))
	}
	return uint32(id), nil
}

// parseGroup parses "A[,W]/B[,W]...".
func parseGroup(v string) ([]nexthop.GroupMemberSpec, error) {
	var out []nexthop.GroupMemberSpec
	for part := range strings.SplitSeq(v, "/") {
		idS, wS, hasW := strings.Cut(part, ",")
		id, err := strconv.ParseUint(idS, 0, 32)
		if err != nil || id == 0 {
			return nil, fmt.Errorf("invalid nexthop id %s in group", Quote(idS))
		}
		m := nexthop.GroupMemberSpec{ID: uint32(id), Weight: 1}
		if hasW {
			w, err := strconv.ParseUint(wS, 10, 16)
			if err != nil || w == 0 || w > nexthop.MaxWeight {
				return nil, fmt.Errorf("invalid weight %s (1-%d)", Quote(wS), nexthop.MaxWeight)
			}
			m.Weight = uint16(w)
		}
		out = append(out, m)
	}
	return out, nil
}
