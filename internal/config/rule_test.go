package config

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/netfwd/netfwd/fib"
)

func TestRuleParse(t *testing.T) {
	pfx := netip.MustParsePrefix
	for line, want := range map[string]fib.RuleSpec{
		"rule add from 10.1.0.0/16 lookup 100": {Rule: fib.Rule{Src: pfx("10.1.0.0/16"), Table: 100, SuppressPrefixLen: -1}, TableSet: true},
		"ru a pref 10 not to 192.0.2.0/24 tos 10 iif eth0 oif eth1 goto 30": {Rule: fib.Rule{Priority: 10, Invert: true,
			Dst: pfx("192.0.2.0/24"), TOS: 0x10, IIF: "eth0", OIF: "eth1", Action: fib.RuleGoto, Goto: 30, SuppressPrefixLen: -1},
			PrioritySet: true, ActionSet: true},
		"ip rule add order 0x10 fwmark 5 table main sup_pl 0 proto static": {Rule: fib.Rule{Priority: 16, Mark: 5,
			Mask: 0xffffffff, Table: fib.TableMain, SuppressPrefixLen: 0, Proto: fib.ProtoStatic},
			PrioritySet: true, MarkSet: true, MaskSet: true, TableSet: true},
		"rule add fwmark 0/0xff d 8 ipproto tcp sport 1-100 dport 22 n": {Rule: fib.Rule{Mask: 0xff, TOS: 8, IPProto: 6,
			SPort: fib.PortRange{Lo: 1, Hi: 100}, DPort: fib.PortRange{Lo: 22, Hi: 22}, Action: fib.RuleNop, SuppressPrefixLen: -1},
			MarkSet: true, MaskSet: true, ActionSet: true},
		"rule add from 10.1.2.3/16 to all type blackhole": {Rule: fib.Rule{Src: pfx("10.1.2.3/16"), Action: fib.RuleBlackhole, SuppressPrefixLen: -1}, ActionSet: true},
		"rule add dev lo b":                        {Rule: fib.Rule{IIF: "lo", Action: fib.RuleNop, SuppressPrefixLen: -1}, ActionSet: true},
		"rule add unr":                             {Rule: fib.Rule{Action: fib.RuleUnreachable, SuppressPrefixLen: -1}, ActionSet: true},
		"rule add 8":                               {Rule: fib.Rule{Action: fib.RuleProhibit, SuppressPrefixLen: -1}, ActionSet: true},
		"rule add l3mdev pref 1000":                {Rule: fib.Rule{Priority: 1000, L3mdev: true, SuppressPrefixLen: -1}, PrioritySet: true},
		"rule add ipproto udp lookup default":      {Rule: fib.Rule{IPProto: 17, Table: fib.TableDefault, SuppressPrefixLen: -1}, TableSet: true},
		"rule del fwmark 7":                        {Rule: fib.Rule{Mark: 7, Mask: 0xffffffff, SuppressPrefixLen: -1}, MarkSet: true, MaskSet: true},
		"rule delete priority 5":                   {Rule: fib.Rule{Priority: 5, SuppressPrefixLen: -1}, PrioritySet: true},
		"rule d from 192.0.2.1 lookup 7 prohibit":  {Rule: fib.Rule{Src: pfx("192.0.2.1/32"), Table: 7, Action: fib.RuleProhibit, SuppressPrefixLen: -1}, TableSet: true, ActionSet: true},
		"rule add from 0.0.0.0/0 to default iif x": {Rule: fib.Rule{IIF: "x", SuppressPrefixLen: -1}},
	} {
		c, ok, err := ParseLine(Pos{"t", 1}, line)
		if err != nil || !ok || c.Rule == nil {
			t.Errorf("%q: %v %v %+v", line, ok, err, c)
			continue
		}
		if c.Rule.Spec != want {
			t.Errorf("%q:\n got %+v\nwant %+v", line, c.Rule.Spec, want)
		}
	}
}

func TestRuleParseErrors(t *testing.T) {
	for line, want := range map[string]string{
		"rule add":                          `"rule add" requires arguments`,
		"rule del":                          `"rule delete" requires arguments`,
		"rule add l3mdev lookup 5":          "table can not be specified for l3mdev rules",
		"rule add local":                    "Missing goto target",
		"rule add 2":                        "Missing goto target",
		"rule add throw":                    `rule type "throw" is not supported`,
		"rule add anycast":                  `rule type "anycast" is not supported`,
		"rule add frob":                     `unknown keyword "frob" (did you mean "from"?)`,
		"rule add 10.0.0.0/8":               `Failed to parse rule type "10.0.0.0/8"`,
		"rule add lokup 5":                  `unknown keyword "lokup" (did you mean "lookup"?)`,
		"rule add sport 0":                  "Invalid sport range",
		"rule add dport 65535":              "Invalid dport range",
		"rule add sport 10-5":               "Invalid sport range",
		"rule add sport x":                  `invalid sport range "x"`,
		"rule add tos zz":                   "TOS value is invalid",
		"rule add ipproto bogus":            `Invalid "ipproto" value`,
		"rule add suppress_prefixlength -1": "suppress_prefixlength value is invalid",
		"rule add uidrange 1-2":             `rule argument "uidrange" is not supported`,
		"rule add tun_id 5":                 `rule argument "tun_id" is not supported`,
		"rule add dscp 5":                   `rule argument "dscp" is not supported`,
		"rule add suppress_ifgroup 5":       `rule argument "suppress_ifgroup" is not supported`,
		"rule add iif a/b":                  "invalid device name",
		"rule add from 10.0.0.0/33":         `invalid prefix "10.0.0.0/33"`,
		"rule add pref":                     `"pref" needs a value`,
		"rule save":                         `rule command "save" is not supported`,
		"rule show frob":                    `to value is invalid: "frob"`,
	} {
		_, _, err := ParseLine(Pos{"t", 1}, line)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", line, err, want)
		}
	}
}

func TestRuleQueriesAndHelp(t *testing.T) {
	for line, want := range map[string]RuleFilter{
		"rule":              {},
		"ip rule show":      {},
		"rule s pref 5 not": {Priority: 5, PrioritySet: true, Not: true},
		"rule list from 10.0.0.0/8 to 192.0.2.0/24 table 100": {Src: netip.MustParsePrefix("10.0.0.0/8"),
			Dst: netip.MustParsePrefix("192.0.2.0/24"), Table: 100},
		"rule lst 10.0.0.0/8 fwmark 1/0xf iif eth0 protocol static": {Dst: netip.MustParsePrefix("10.0.0.0/8"), Mark: 1, Mask: 0xf, IIF: "eth0"},
	} {
		c, ok, err := ParseLine(Pos{"t", 1}, line)
		q, isShow := c.Query.(RuleShow)
		if err != nil || !ok || !isShow || q.RuleFilter != want {
			t.Errorf("%q: %v %v %#v", line, ok, err, c.Query)
		}
	}
	c, _, err := ParseLine(Pos{"t", 1}, "rule flush table 100 protocol static")
	if err != nil || c.Rule == nil || c.Rule.Op != "flush" || c.Rule.Filter != (RuleFilter{Table: 100, Proto: fib.ProtoStatic, ProtoSet: true}) {
		t.Errorf("rule flush: %v %+v", err, c.Rule)
	}
	if c, _, err := ParseLine(Pos{"t", 1}, "rule flush"); err != nil || c.Rule == nil || c.Rule.Filter != (RuleFilter{}) {
		t.Errorf("rule flush: %v %+v", err, c)
	}
	for _, line := range []string{"rule help", "rule add help", "rule add h", "rule ?"} {
		c, _, err := ParseLine(Pos{"t", 1}, line)
		h, ok := c.Query.(Help)
		if err != nil || !ok || !strings.Contains(h.Text, "Usage: rule") || !strings.Contains(h.Text, "fwmark") {
			t.Errorf("%q: %v %#v", line, err, c.Query)
		}
	}
}

func TestRuleFilterSelects(t *testing.T) {
	r := fib.Rule{Priority: 10, Src: netip.MustParsePrefix("10.1.2.3/16"), Table: 100, Mark: 5, Mask: 0xffffffff, Proto: fib.ProtoStatic}
	for _, c := range []struct {
		f    RuleFilter
		want bool
	}{
		{RuleFilter{}, true},
		{RuleFilter{Src: netip.MustParsePrefix("10.0.0.0/8")}, true},
		{RuleFilter{Src: netip.MustParsePrefix("10.1.0.0/16")}, true},
		{RuleFilter{Src: netip.MustParsePrefix("10.1.2.0/24")}, false}, // longer than the rule's
		{RuleFilter{Src: netip.MustParsePrefix("0.0.0.0/0")}, true},
		{RuleFilter{Dst: netip.MustParsePrefix("10.0.0.0/8")}, false},
		{RuleFilter{Mark: 5}, true},
		{RuleFilter{Mark: 5, Mask: 0xff}, false},
		{RuleFilter{Table: 100, Priority: 10, PrioritySet: true}, true},
		{RuleFilter{Not: true}, false},
		{RuleFilter{Proto: fib.ProtoBoot}, true}, // list ignores the protocol
	} {
		if got := c.f.Selects(&r); got != c.want {
			t.Errorf("%+v selects %v, want %v", c.f, got, c.want)
		}
	}
	f := RuleFilter{Proto: fib.ProtoBoot, ProtoSet: true}
	if f.FlushSelects(&r) {
		t.Error("flush protocol boot takes a static rule")
	}
}
