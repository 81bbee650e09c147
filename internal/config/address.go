package config

// `address add|del A[/L] dev D` (iproute2's `brd +`, `broadcast +`, `label`
// and `scope` are accepted; the broadcast is always the subnet's last
// address, as the kernel derives it).

import (
	"errors"
	"fmt"
	"net/netip"
)

// AddrCmd is a parsed address line.
type AddrCmd struct {
	Op     string // add, delete, show
	Dev    string
	Prefix netip.Prefix
}

func parseAddr(args []string) (*AddrCmd, error) {
	op, err := command("address", args, "add", "delete", "del", "show", "list")
	if err != nil {
		return nil, err
	}
	c := &AddrCmd{Op: op}
	args = args[1:]
	have := false
	for w := NewWords(args); w.More(); {
		a := w.Next()
		switch a {
		case "dev", "brd", "broadcast", "label", "scope", "local":
			v, err := w.Value(a)
			if err != nil {
				return nil, err
			}
			switch a {
			case "dev":
				c.Dev = v
			case "local":
				if err := c.setPrefix(v, &have); err != nil {
					return nil, err
				}
			}
		default:
			if op == "show" && c.Dev == "" {
				c.Dev = a
				continue
			}
			if err := c.setPrefix(a, &have); err != nil {
				return nil, err
			}
		}
	}
	if op == "show" {
		return c, nil
	}
	if !have {
		return nil, errors.New("missing address")
	}
	if c.Dev == "" {
		return nil, errors.New("missing \"dev DEVICE\"")
	}
	return c, nil
}

func (c *AddrCmd) setPrefix(s string, have *bool) error {
	if *have {
		return fmt.Errorf("unexpected %q", s)
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		a, err := parseAddr4(s)
		if err != nil {
			return fmt.Errorf("invalid address %q", s)
		}
		p = netip.PrefixFrom(a, 32)
	}
	if !p.Addr().Is4() {
		return fmt.Errorf("%q is not an IPv4 address", s)
	}
	c.Prefix, *have = p, true
	return nil
}
