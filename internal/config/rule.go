package config

// `rule add|delete SELECTOR ACTION`, `rule flush [SELECTOR]` and the
// `rule show|list [SELECTOR]` query: `ip rule` as iproute2 6.1's iprule.c
// reads it, with its keyword tables in its order (iprule_modify's chain for
// add and delete, iprule_list_flush_or_save's for show and flush), its
// value syntax (tos in hex or an rt_dsfield name, fwmark MARK[/MASK],
// ipproto by number or /etc/protocols name, sport/dport N or N-M) and the
// defaults it and the kernel's fib_nl2rule give: no table and no action
// means `lookup main` on add; a non-zero fwmark without a mask compares all
// bits; an address with prefix length 0 selects nothing (`from all`).
//
// A rule line is configuration, `rule flush` included (it changes the
// rule list, so a hot restart's journal carries it); `rule show` is a
// query. Rules go to the FIB's rule list (fib/rule.go) through
// internal/apply; netfwd has no link groups, uid ranges or tunnel ids, so
// suppress_ifgroup, uidrange and tun_id are refused by name.
//
// Locking: none (values and read-only tables).

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/netfwd/netfwd/fib"
)

// RuleCmd is a parsed rule line.
type RuleCmd struct {
	Op string // add, delete, flush; reset (a reload's: Linux's default rules)
	// Spec is the rule of add and delete: on delete, the fields given
	// select (fib.Txn.DelRule).
	Spec fib.RuleSpec
	// Filter selects the rules of a flush (zero: every rule but those of
	// priority 0).
	Filter RuleFilter
	// Exact, on delete, removes the first rule equal to Spec.Rule in every
	// field instead of the first that matches what is given: the reload
	// diff's inverse of a file's `rule add` (never set by the parser).
	Exact bool
}

// RuleShow is `ip rule show [SELECTOR]`.
type RuleShow struct {
	RuleFilter
}

// Name implements Query.
func (RuleShow) Name() string { return "rule show" }

// RuleFilter is the SELECTOR of `ip rule show` and `ip rule flush`
// (iprule.c's filter): zero fields select everything.
type RuleFilter struct {
	Priority    uint32
	PrioritySet bool
	Not         bool // only rules with `not`
	// Src and Dst (valid: set) select rules whose prefix lies inside them.
	Src, Dst netip.Prefix
	TOS      uint8
	TOSSet   bool
	// Mark and Mask select by exact value when non-zero.
	Mark, Mask uint32
	IIF, OIF   string
	L3mdev     bool
	Table      uint32 // 0: any
	// Proto selects by protocol on flush only: iproute2's list ignores it.
	Proto    fib.Proto
	ProtoSet bool
	IPProto  uint8
	// SPort and DPort select the rules with exactly this range.
	SPort, DPort fib.PortRange
}

// ruleCommands is do_iprule's chain.
var ruleCommands = table("rule command",
	kw("list", "show"), kw("lst", "show"), kw("show"), unsupported(kw("save"), kw("restore")),
	kw("add"), kw("delete"), kw("flush"), kw("help"),
)

// ruleArgs is iprule_modify's chain (add, delete), up to its last branch
// (ruleActions).
var ruleArgs = table("rule argument",
	exact("not"), exact("from"), exact("to"), kw("preference", "priority"), kw("order", "priority"),
	kw("priority"), exact("tos"), kw("dsfield", "tos"), exact("fwmark"), unsupported(kw("realms")),
	kw("protocol"), unsupported(kw("tun_id")), kw("table"), exact("lookup", "table"),
	kw("suppress_prefixlength"), exact("sup_pl", "suppress_prefixlength"),
	unsupported(kw("suppress_ifgroup"), exact("sup_group")), exact("dev", "iif"), exact("iif"), exact("oif"),
	exact("l3mdev"), unsupported(exact("uidrange"), exact("nat"), kw("map-to")), exact("ipproto"),
	exact("sport"), exact("dport"),
	// newer iproute2's, after 6.1's chain
	unsupported(exact("dscp")),
)

// ruleActions is iprule_modify's last branch: `[type] help | goto N | nop
// | TYPE` (ruleTypes).
var ruleActions = table("rule action", exact("type"), kw("help"), kw("goto"), kw("nop"))

// ruleTypes is rtnl_rtntype_a2n's chain read as a rule action: the kernel
// takes the route type's number as FR_ACT_*, so unicast is a lookup and
// broadcast a nop (local, a goto without target, is refused as the kernel
// refuses it).
var ruleTypes = table("rule type",
	unsupported(exact("local"), exact("nat")), kw("broadcast", "nop"), exact("brd", "nop"),
	unsupported(kw("anycast"), kw("multicast")), kw("prohibit"), kw("unreachable"), kw("blackhole"),
	unsupported(kw("xresolve")), kw("unicast", "lookup"), unsupported(exact("throw")),
)

// ruleShowArgs is iprule_list_flush_or_save's chain; a word it does not
// name is a destination (`[dst|to] PREFIX`).
var ruleShowArgs = table("rule show argument",
	kw("preference", "priority"), kw("order", "priority"), kw("priority"), exact("not"), exact("tos"),
	exact("dsfield", "tos"), exact("fwmark"), exact("dev", "iif"), exact("iif"), exact("oif"), exact("l3mdev"),
	unsupported(exact("uidrange"), kw("tun_id")), kw("lookup", "table"), kw("table"), kw("from"),
	kw("src", "from"), kw("protocol"), exact("ipproto"), exact("sport"), exact("dport"), kw("dst", "to"), kw("to"),
)

func parseRule(cmd *Command, w *words) error {
	op, err := verb(w, ruleCommands, "show")
	if err != nil {
		return err
	}
	switch op {
	case "help":
		return errHelp
	case "show":
		f, err := parseRuleFilter(w, false)
		cmd.Query = RuleShow{f}
		return err
	case "flush":
		f, err := parseRuleFilter(w, true)
		cmd.Rule = &RuleCmd{Op: op, Filter: f}
		return err
	}
	if !w.More() {
		return fmt.Errorf("\"rule %s\" requires arguments", op)
	}
	c := &RuleCmd{Op: op}
	if err := parseRuleSpec(w, &c.Spec); err != nil {
		return err
	}
	cmd.Rule = c
	return nil
}

// parseRuleSpec reads iprule_modify's arguments.
func parseRuleSpec(w *words, s *fib.RuleSpec) error {
	s.SuppressPrefixLen = -1
	for w.More() {
		a := w.Next()
		means, ok, err := ruleArgs.lookup(a)
		if err != nil {
			return err
		}
		if !ok {
			if err := parseRuleAction(w, a, s); err != nil {
				return err
			}
			continue
		}
		switch means {
		case "not":
			s.Invert = true
			continue
		case "l3mdev":
			s.L3mdev = true
			continue
		}
		v, err := w.Value(a)
		if err != nil {
			return err
		}
		if err := setRuleArg(s, means, v); err != nil {
			return err
		}
	}
	if s.L3mdev && s.TableSet {
		return errors.New("table can not be specified for l3mdev rules")
	}
	if s.MarkSet && !s.MaskSet && s.Mark != 0 {
		// fib_nl2rule's compatibility default: a non-zero mark without
		// a mask compares every bit (on delete too).
		s.Mask, s.MaskSet = 0xffffffff, true
	}
	return nil
}

// setRuleArg sets one keyword's value of a rule.
func setRuleArg(s *fib.RuleSpec, means, v string) error {
	var err error
	switch means {
	case "from":
		s.Src, err = rulePrefix(v)
	case "to":
		s.Dst, err = rulePrefix(v)
	case "priority":
		s.Priority, err = ruleU32(v, "preference")
		s.PrioritySet = true
	case "tos":
		s.TOS, err = parseDSField(v)
	case "fwmark":
		s.Mark, s.Mask, s.MaskSet, err = parseFwmark(v)
		s.MarkSet = true
	case "protocol":
		p, ok := fib.ParseProto(v)
		if !ok {
			return fmt.Errorf("\"protocol\" value is invalid: %s", Quote(v))
		}
		s.Proto = p
	case "table":
		s.Table, err = parseTable(v)
		s.TableSet = true
	case "suppress_prefixlength":
		n, perr := strconv.ParseInt(v, 0, 32)
		if perr != nil || n < 0 {
			return fmt.Errorf("suppress_prefixlength value is invalid: %s", Quote(v))
		}
		s.SuppressPrefixLen = int(n)
	case "iif":
		err = setDev(&s.IIF, v)
	case "oif":
		err = setDev(&s.OIF, v)
	case "ipproto":
		s.IPProto, err = ParseIPProto(v)
	case "sport":
		s.SPort, err = parsePortRange(v, "sport")
	case "dport":
		s.DPort, err = parsePortRange(v, "dport")
	}
	return err
}

// parseRuleAction reads iprule_modify's last branch for word a.
func parseRuleAction(w *words, a string, s *fib.RuleSpec) error {
	var err error
	if a == "type" {
		if a, err = w.Value(a); err != nil {
			return err
		}
	}
	means, ok, _ := ruleActions.lookup(a)
	if ok && means == "type" { // `type type`: not a type
		ok = false
	}
	if !ok {
		if means, err = ruleType(a); err != nil {
			if _, known := ruleTypes.find(a); !known && suggest(a, w.cfg, ruleArgs, ruleActions, ruleTypes) != "" {
				return errUnknownKeyword(a, w.cfg, ruleArgs, ruleActions, ruleTypes)
			}
			return err
		}
	}
	switch means {
	case "help":
		return errHelp
	case "goto":
		v, err := w.Value(a)
		if err != nil {
			return err
		}
		if s.Goto, err = ruleU32(v, "target"); err != nil {
			return err
		}
		s.Action = fib.RuleGoto
	case "nop":
		s.Action = fib.RuleNop
	case "lookup":
		s.Action = fib.RuleLookup
	case "blackhole":
		s.Action = fib.RuleBlackhole
	case "unreachable":
		s.Action = fib.RuleUnreachable
	case "prohibit":
		s.Action = fib.RuleProhibit
	}
	s.ActionSet = true
	return nil
}

// ruleType reads a route type as a rule action (rtnl_rtntype_a2n, a
// number too: FR_ACT_*).
func ruleType(a string) (string, error) {
	if a == "local" {
		return "", errors.New("Missing goto target for action goto")
	}
	means, ok, err := ruleTypes.lookup(a)
	if err != nil {
		return "", fmt.Errorf("rule type %s is not supported by netfwd", Quote(a))
	}
	if ok {
		return means, nil
	}
	n, perr := strconv.ParseUint(a, 0, 8)
	if perr != nil {
		return "", fmt.Errorf("Failed to parse rule type %s", Quote(a))
	}
	switch n {
	case 1:
		return "lookup", nil
	case 2:
		return "", errors.New("Missing goto target for action goto")
	case 3:
		return "nop", nil
	case 6:
		return "blackhole", nil
	case 7:
		return "unreachable", nil
	case 8:
		return "prohibit", nil
	}
	return "", fmt.Errorf("rule type %s is not supported by netfwd", Quote(a))
}

// rulePrefix reads a rule's `from` or `to` (get_prefix): the address is
// kept as written (the kernel does not mask it: `from 10.1.2.3/16` stays
// so), and length 0 selects nothing.
func rulePrefix(v string) (netip.Prefix, error) {
	p, err := parsePrefix(v)
	if err != nil {
		return netip.Prefix{}, err
	}
	if p.Bits() == 0 {
		return netip.Prefix{}, nil
	}
	return p, nil
}

// ruleU32 reads get_u32's numbers (C's base 0).
func ruleU32(v, what string) (uint32, error) {
	n, err := strconv.ParseUint(v, 0, 32)
	if err != nil {
		return 0, fmt.Errorf("%s value is invalid: %s", what, Quote(v))
	}
	return uint32(n), nil
}

// parseFwmark reads MARK[/MASK].
func parseFwmark(v string) (mark, mask uint32, maskSet bool, err error) {
	m, k, slash := strings.Cut(v, "/")
	if mark, err = ruleU32(m, "fwmark"); err != nil {
		return 0, 0, false, err
	}
	if slash {
		if mask, err = ruleU32(k, "fwmask"); err != nil {
			return 0, 0, false, err
		}
	}
	return mark, mask, slash, nil
}

// parsePortRange reads N or N-M, with the kernel's bounds
// (fib_rule_port_range_valid: 1-65534, start <= end).
func parsePortRange(v, what string) (fib.PortRange, error) {
	lo, hi, isRange := strings.Cut(v, "-")
	a, err1 := strconv.ParseUint(lo, 10, 16)
	b, err2 := a, error(nil)
	if isRange {
		b, err2 = strconv.ParseUint(hi, 10, 16)
	}
	if err1 != nil || err2 != nil {
		return fib.PortRange{}, fmt.Errorf("invalid %s range %s", what, Quote(v))
	}
	if a == 0 || b == 0 || b >= 0xffff || a > b {
		return fib.PortRange{}, fmt.Errorf("Invalid %s range", what)
	}
	return fib.PortRange{Lo: uint16(a), Hi: uint16(b)}, nil
}

// dsfieldNames is /etc/iproute2/rt_dsfield.
var dsfieldNames = map[uint8]string{
	0x00: "default", 0x28: "AF11", 0x30: "AF12", 0x38: "AF13", 0x48: "AF21", 0x50: "AF22", 0x58: "AF23",
	0x68: "AF31", 0x70: "AF32", 0x78: "AF33", 0x88: "AF41", 0x90: "AF42", 0x98: "AF43", 0x20: "CS1",
	0x40: "CS2", 0x60: "CS3", 0x80: "CS4", 0xa0: "CS5", 0xc0: "CS6", 0xe0: "CS7", 0xb8: "EF",
}

// parseDSField reads a TOS as rtnl_dsfield_a2n does: an rt_dsfield name,
// else a hexadecimal number (`tos 10` is 0x10).
func parseDSField(v string) (uint8, error) {
	for n, name := range dsfieldNames {
		if name == v {
			return n, nil
		}
	}
	h := v
	if len(h) > 2 && h[0] == '0' && (h[1] == 'x' || h[1] == 'X') {
		h = h[2:]
	}
	n, err := strconv.ParseUint(h, 16, 8)
	if err != nil {
		return 0, fmt.Errorf("TOS value is invalid: %s", Quote(v))
	}
	return uint8(n), nil
}

// DSFieldName is rtnl_dsfield_n2a: the rt_dsfield name, else 0x%02x.
func DSFieldName(tos uint8) string {
	if n, ok := dsfieldNames[tos]; ok {
		return n
	}
	return fmt.Sprintf("0x%02x", tos)
}

// ipProtocols is Debian netbase's /etc/protocols (name and aliases), what
// iproute2 reads through getprotobyname and getprotobynumber.
var ipProtocols = []struct {
	n     uint8
	names []string
}{
	{0, []string{"ip", "IP"}}, {0, []string{"hopopt", "HOPOPT"}}, {1, []string{"icmp", "ICMP"}},
	{2, []string{"igmp", "IGMP"}}, {3, []string{"ggp", "GGP"}}, {4, []string{"ipencap", "IP-ENCAP"}},
	{5, []string{"st", "ST"}}, {6, []string{"tcp", "TCP"}}, {8, []string{"egp", "EGP"}},
	{9, []string{"igp", "IGP"}}, {12, []string{"pup", "PUP"}}, {17, []string{"udp", "UDP"}},
	{20, []string{"hmp", "HMP"}}, {22, []string{"xns-idp", "XNS-IDP"}}, {27, []string{"rdp", "RDP"}},
	{29, []string{"iso-tp4", "ISO-TP4"}}, {33, []string{"dccp", "DCCP"}}, {36, []string{"xtp", "XTP"}},
	{37, []string{"ddp", "DDP"}}, {38, []string{"idpr-cmtp", "IDPR-CMTP"}}, {41, []string{"ipv6", "IPv6"}},
	{43, []string{"ipv6-route", "IPv6-Route"}}, {44, []string{"ipv6-frag", "IPv6-Frag"}},
	{45, []string{"idrp", "IDRP"}}, {46, []string{"rsvp", "RSVP"}}, {47, []string{"gre", "GRE"}},
	{50, []string{"esp", "IPSEC-ESP"}}, {51, []string{"ah", "IPSEC-AH"}}, {57, []string{"skip", "SKIP"}},
	{58, []string{"ipv6-icmp", "IPv6-ICMP"}}, {59, []string{"ipv6-nonxt", "IPv6-NoNxt"}},
	{60, []string{"ipv6-opts", "IPv6-Opts"}}, {73, []string{"rspf", "RSPF", "CPHB"}},
	{81, []string{"vmtp", "VMTP"}}, {88, []string{"eigrp", "EIGRP"}}, {89, []string{"ospf", "OSPFIGP"}},
	{93, []string{"ax.25", "AX.25"}}, {94, []string{"ipip", "IPIP"}}, {97, []string{"etherip", "ETHERIP"}},
	{98, []string{"encap", "ENCAP"}}, {103, []string{"pim", "PIM"}}, {108, []string{"ipcomp", "IPCOMP"}},
	{112, []string{"vrrp", "VRRP"}}, {115, []string{"l2tp", "L2TP"}}, {124, []string{"isis", "ISIS"}},
	{132, []string{"sctp", "SCTP"}}, {133, []string{"fc", "FC"}},
	{135, []string{"mobility-header", "Mobility-Header"}}, {136, []string{"udplite", "UDPLite"}},
	{137, []string{"mpls-in-ip", "MPLS-in-IP"}}, {138, []string{"manet"}}, {139, []string{"hip", "HIP"}},
	{140, []string{"shim6", "Shim6"}}, {141, []string{"wesp", "WESP"}}, {142, []string{"rohc", "ROHC"}},
	{143, []string{"ethernet", "Ethernet"}},
}

// ParseIPProto reads an IP protocol as inet_proto_a2n does: a decimal
// number, else a name from /etc/protocols.
func ParseIPProto(v string) (uint8, error) {
	if n, err := strconv.ParseUint(v, 10, 8); err == nil {
		return uint8(n), nil
	}
	for _, p := range ipProtocols {
		for _, name := range p.names {
			if name == v {
				return p.n, nil
			}
		}
	}
	return 0, fmt.Errorf("Invalid \"ipproto\" value %s", Quote(v))
}

// IPProtoName is inet_proto_n2a: the protocol's name, else ipproto-N.
func IPProtoName(n uint8) string {
	for _, p := range ipProtocols {
		if p.n == n {
			return p.names[0]
		}
	}
	return "ipproto-" + strconv.Itoa(int(n))
}

// parseRuleFilter reads iprule_list_flush_or_save's SELECTOR; flush
// keeps `protocol` (list reads and ignores it, as iproute2 does).
func parseRuleFilter(w *words, flush bool) (RuleFilter, error) {
	var f RuleFilter
	for w.More() {
		a := w.Next()
		means, ok, err := ruleShowArgs.lookup(a)
		if err != nil {
			return f, err
		}
		switch {
		case !ok:
			if f.Dst, err = filterPrefix(a, "to"); err != nil {
				return f, err
			}
			continue
		case means == "not":
			f.Not = true
			continue
		case means == "l3mdev":
			f.L3mdev = true
			continue
		}
		v, err := w.Value(a)
		if err != nil {
			return f, err
		}
		if err := setFilterArg(&f, means, v, flush); err != nil {
			return f, err
		}
	}
	return f, nil
}

// setFilterArg sets one keyword's value of a rule filter.
func setFilterArg(f *RuleFilter, means, v string, flush bool) error {
	var err error
	switch means {
	case "priority":
		f.Priority, err = ruleU32(v, "preference")
		f.PrioritySet = true
	case "tos":
		f.TOS, err = parseDSField(v)
		f.TOSSet = true
	case "fwmark":
		f.Mark, f.Mask, _, err = parseFwmark(v)
	case "iif":
		err = setDev(&f.IIF, v)
	case "oif":
		err = setDev(&f.OIF, v)
	case "table":
		f.Table, err = parseTable(v)
	case "from":
		f.Src, err = filterPrefix(v, "from")
	case "to":
		f.Dst, err = filterPrefix(v, "to")
	case "protocol":
		p, ok := fib.ParseProto(v)
		switch {
		case v == "all" && !ok:
			f.Proto, f.ProtoSet = 0, false
		case !ok:
			return fmt.Errorf("invalid \"protocol\": %s", Quote(v))
		case flush:
			f.Proto, f.ProtoSet = p, true
		}
	case "ipproto":
		f.IPProto, err = ParseIPProto(v)
	case "sport":
		f.SPort, err = filterPorts(v, "port")
	case "dport":
		f.DPort, err = filterPorts(v, "dport")
	}
	return err
}

// filterPrefix reads a filter's prefix; `all` selects every rule.
func filterPrefix(v, what string) (netip.Prefix, error) {
	p, err := parsePrefix(v)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%s value is invalid: %s", what, Quote(v))
	}
	return p, nil
}

// filterPorts reads a filter's N or N-M (sscanf "%hu-%hu", no bounds).
func filterPorts(v, what string) (fib.PortRange, error) {
	lo, hi, isRange := strings.Cut(v, "-")
	a, err1 := strconv.ParseUint(lo, 10, 16)
	b, err2 := a, error(nil)
	if isRange {
		b, err2 = strconv.ParseUint(hi, 10, 16)
	}
	if err1 != nil || err2 != nil {
		return fib.PortRange{}, fmt.Errorf("invalid %s range %s", what, Quote(v))
	}
	return fib.PortRange{Lo: uint16(a), Hi: uint16(b)}, nil
}

// Selects reports whether the filter takes r, as iprule.c's filter_nlmsg
// does on the kernel's dump of r.
func (f *RuleFilter) Selects(r *fib.Rule) bool {
	switch {
	case f.PrioritySet && f.Priority != r.Priority,
		f.Not && !r.Invert,
		f.Src.IsValid() && !prefixInside(r.Src, f.Src),
		f.Dst.IsValid() && !prefixInside(r.Dst, f.Dst),
		f.TOSSet && f.TOS != r.TOS,
		f.Mark != 0 && f.Mark != r.Mark,
		f.Mask != 0 && f.Mask != r.Mask,
		f.IIF != "" && f.IIF != r.IIF,
		f.OIF != "" && f.OIF != r.OIF,
		f.L3mdev && !r.L3mdev,
		f.IPProto != 0 && f.IPProto != r.IPProto,
		f.SPort.Lo != 0 && f.SPort != r.SPort,
		f.DPort.Lo != 0 && f.DPort != r.DPort,
		f.Table != 0 && f.Table != r.Table:
		return false
	}
	return true
}

// FlushSelects is Selects plus flush_rule's protocol check.
func (f *RuleFilter) FlushSelects(r *fib.Rule) bool {
	return f.Selects(r) && (!f.ProtoSet || f.Proto == r.Proto)
}

// prefixInside: the rule's prefix (invalid: all) is at least as long as
// the filter's and agrees with it on the filter's bits.
func prefixInside(rule, filter netip.Prefix) bool {
	if filter.Bits() == 0 {
		return true
	}
	if !rule.IsValid() || rule.Bits() < filter.Bits() {
		return false
	}
	p, _ := rule.Addr().Prefix(filter.Bits())
	return p == filter.Masked()
}
