package config

// `address add|del A[/L] dev D` (iproute2's `brd +`, `broadcast ADDR`,
// `label L` and `scope S` are accepted; the broadcast is always the
// subnet's last address, as the kernel derives it), and the `address show`
// query, with ipaddress.c's keyword tables.

import (
	"errors"
	"fmt"
	"net/netip"
)

// AddrCmd is a parsed address line.
type AddrCmd struct {
	Op     string // add, delete
	Dev    string
	Prefix netip.Prefix
}

// addrCommands is do_ipaddr's chain.
var addrCommands = table("address command",
	kw("add"), unsupported(kw("change"), exact("chg"), kw("replace")), kw("delete"), kw("list", "show"),
	kw("show"), kw("lst", "show"), unsupported(kw("flush"), kw("save"), kw("showdump"), kw("restore"), kw("help")),
)

// addrArgs is ipaddr_modify's chain (the address flags, compared exactly,
// follow preferred_lft in iproute2; netfwd has none of them).
var addrArgs = table("address argument",
	unsupported(exact("peer"), exact("remote")), kw("broadcast"), exact("brd", "broadcast"),
	unsupported(exact("anycast")), exact("scope"), exact("dev"), exact("label"),
	unsupported(kw("metric"), kw("priority"), kw("preference"), kw("valid_lft"), kw("preferred_lft"),
		exact("home"), exact("nodad"), exact("optimistic"), exact("noprefixroute"), exact("mngtmpaddr"),
		exact("autojoin"), exact("proto")),
)

func parseAddr(cmd *Command, w *words) error {
	op, err := verb(w, addrCommands, "show")
	if err != nil {
		return err
	}
	if op == "show" {
		f, err := parseListFilter(w)
		if err != nil {
			return err
		}
		cmd.Query = AddrShow{ListFilter: f}
		return nil
	}
	c := &AddrCmd{Op: op}
	have := false
	for w.More() {
		a := w.Next()
		means, ok, err := addrArgs.lookup(a)
		if err != nil {
			return err
		}
		if !ok { // the default branch: [local] A[/L]
			if a == "local" {
				if a, err = w.Value(a); err != nil {
					return err
				}
			}
			if !prefixLike(a) && (have || suggest(a, w.cfg, addrArgs) != "") {
				return errUnknownKeyword(a, w.cfg, addrArgs)
			}
			if err := c.setPrefix(a, &have); err != nil {
				return err
			}
			continue
		}
		v, err := w.Value(a)
		if err != nil {
			return err
		}
		switch means {
		case "dev":
			if err := setDev(&c.Dev, v); err != nil {
				return err
			}
		case "broadcast":
			if v != "+" && v != "-" {
				if _, err := addr4(v); err != nil {
					return err
				}
			}
		}
	}
	if !have {
		return errors.New("missing address")
	}
	if c.Dev == "" {
		return errors.New("missing \"dev DEVICE\"")
	}
	cmd.Addr = c
	return nil
}

func (c *AddrCmd) setPrefix(s string, have *bool) error {
	if *have {
		return fmt.Errorf("unexpected %s (the address is given twice)", Quote(s))
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		a, err := addr4(s)
		if err != nil {
			return fmt.Errorf("invalid address %s", Quote(s))
		}
		p = netip.PrefixFrom(a, 32)
	}
	if !p.Addr().Is4() {
		return fmt.Errorf("%s is not an IPv4 address", Quote(s))
	}
	c.Prefix, *have = p, true
	return nil
}
