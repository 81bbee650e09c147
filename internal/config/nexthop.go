package config

// `nexthop add|replace id N (via GW dev D [onlink] | dev D | blackhole |
//  group A[,W]/B[,W]...)`, `nexthop del id N`, `nexthop show`.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/netfwd/netfwd/nexthop"
)

// NexthopCmd is a parsed nexthop line.
type NexthopCmd struct {
	Op   string // add, replace, delete, show
	Spec nexthop.UserSpec
}

func parseNexthop(args []string) (*NexthopCmd, error) {
	op, err := command("nexthop", args, "add", "replace", "delete", "del", "show", "list")
	if err != nil {
		return nil, err
	}
	c := &NexthopCmd{Op: op}
	s := &c.Spec
	args = args[1:]
	if op == "show" {
		if len(args) > 0 {
			return nil, fmt.Errorf("nexthop show: unexpected %q", args[0])
		}
		return c, nil
	}
	for w := NewWords(args); w.More(); {
		a := w.Next()
		switch a {
		case "id":
			v, err := w.Value(a)
			if err != nil {
				return nil, err
			}
			id, err := strconv.ParseUint(v, 0, 32)
			if err != nil || id == 0 {
				return nil, fmt.Errorf("invalid nexthop id %q", v)
			}
			s.ID = uint32(id)
		case "via":
			v, err := w.Value(a)
			if err != nil {
				return nil, err
			}
			if s.Single.Gateway, err = parseAddr4(v); err != nil {
				return nil, err
			}
		case "dev":
			v, err := w.Value(a)
			if err != nil {
				return nil, err
			}
			s.Single.Dev = v
		case "onlink":
			s.Single.OnLink = true
		case "blackhole":
			s.Single.Kind = nexthop.Blackhole
		case "group":
			v, err := w.Value(a)
			if err != nil {
				return nil, err
			}
			if s.Group, err = parseGroup(v); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("unexpected %q", a)
		}
	}
	if s.ID == 0 {
		return nil, errors.New("missing \"id N\"")
	}
	if op == "delete" {
		if s.Single.Dev != "" || s.Single.Gateway.IsValid() || len(s.Group) > 0 || s.Single.Kind != nexthop.Unicast {
			return nil, errors.New("nexthop del takes only \"id N\"")
		}
		return c, nil
	}
	if len(s.Group) > 0 && (s.Single.Dev != "" || s.Single.Gateway.IsValid() || s.Single.Kind == nexthop.Blackhole) {
		return nil, errors.New("a group takes no via, dev or blackhole")
	}
	if len(s.Group) == 0 && s.Single.Kind == nexthop.Unicast && s.Single.Dev == "" {
		return nil, errors.New("missing \"dev DEVICE\" (or blackhole, or group)")
	}
	return c, nil
}

// parseGroup parses "A[,W]/B[,W]...".
func parseGroup(v string) ([]nexthop.GroupMemberSpec, error) {
	var out []nexthop.GroupMemberSpec
	for _, part := range strings.Split(v, "/") {
		idS, wS, hasW := strings.Cut(part, ",")
		id, err := strconv.ParseUint(idS, 0, 32)
		if err != nil || id == 0 {
			return nil, fmt.Errorf("invalid nexthop id %q in group", idS)
		}
		m := nexthop.GroupMemberSpec{ID: uint32(id), Weight: 1}
		if hasW {
			w, err := strconv.ParseUint(wS, 10, 16)
			if err != nil || w == 0 || w > nexthop.MaxWeight {
				return nil, fmt.Errorf("invalid weight %q (1-%d)", wS, nexthop.MaxWeight)
			}
			m.Weight = uint16(w)
		}
		out = append(out, m)
	}
	return out, nil
}
