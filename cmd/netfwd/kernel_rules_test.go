package main

// Differential test of policy routing (`ip rule`) against the Linux kernel:
// a random config of addresses, routes in tables local, main, default, 100,
// 200 and 300, and rules (every selector and action netfwd has, partial
// deletes, duplicates, forward, backward and unresolved gotos, a table with
// no routes) is fed to a network namespace with `ip -batch` and to netfwd.
// Both must refuse the same lines and end with the same rule list, and
// `ip -j route get` with flow selectors (from, iif, oif, mark, tos, ipproto,
// sport, dport) must agree with fib.LookupRouteFlow on thousands of flows
// drawn to hit every rule: one `ip -batch` process answers all of a seed's
// queries.
//
// Until the config parser takes `rule` lines, each rule is generated both as
// the `ip rule` line and as the fib.RuleSpec that line means, given to
// Txn.AddRule/DelRule; once config.ParseLine accepts `rule add`, the lines
// are parsed instead (ruleParserLanded).
//
// Kernel behaviour outside the FIB lookup that `ip route get` shows, modelled
// here (modelRouteGet) rather than left out:
//   - An input lookup (iif) validates the source (fib_validate_source, with
//     rp_filter off as the namespace sets it): a reverse lookup of the source
//     whose answer is a local or broadcast route makes the lookup fail with
//     EINVAL.
//   - An output lookup with oif whose walk fails (no route, an error route
//     or rule) is answered "unicast dev OIF" with no table: the kernel
//     assumes the destination is on link (ip_route_output_key_hash_rcu).
//   - `ip route get` without ipproto asks for UDP (flowProto).
//
// Both the parsed path and the direct one passed 100+ seeds of 10,000
// flows each; kernel 6.18 with iproute2 6.1 when written. The rule lists
// are compared as `ip -d -j rule show` prints them (kernelRuleKey), which
// hides a suppress_prefixlength on a rule without a table.
//
// Flows left out, each for a kernel rule the probes avoid rather than model:
//   - output lookups `from` an address no device has (the kernel refuses
//     them, __ip_dev_find): output sources are the config's addresses;
//   - martian addresses (0/8, 127/8, multicast, limited broadcast) as source
//     or destination, and input lookups without a source;
//   - ports without tcp or udp: an input lookup takes its ports from the
//     packet it builds, which has none for other protocols, while an output
//     lookup takes them as given;
//   - `sport 0`/`dport 0` in rules: a RuleSpec's zero PortRange is "no
//     selector", so only the parser can refuse them as the kernel does;
//   - `lookup 0` (the kernel makes a new empty table for it) and flows
//     with iif lo or oif lo.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/apply"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/testenv"
)

// rulesProbesPerSeed is how many flows each seed compares.
const rulesProbesPerSeed = 10000

func TestKernelDifferentialRules(t *testing.T) {
	testenv.RequireRoot(t)
	waitingTest(t)
	seeds := 3
	if os.Getenv("NETFWD_KERNEL_SEEDS") != "" {
		seeds = kernelSeeds()
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { kernelRulesRound(t, uint64(seed)) })
	}
}

// ruleParserLanded reports whether config.ParseLine takes `rule` lines (then
// the test parses them as it does routes).
func ruleParserLanded() bool {
	_, ok, err := config.ParseLine(config.Pos{File: "probe", Line: 1}, "rule add pref 5 from 10.0.0.0/8 lookup 100")
	return ok && err == nil
}

// rline is one config line; spec is set for rule lines given to the FIB
// directly.
type rline struct {
	text string
	spec *fib.RuleSpec
	del  bool
}

// rulePart is one selector or action of a rule: its words and what they set.
type rulePart struct {
	text string
	set  func(*fib.RuleSpec)
}

type rgen struct {
	kgen
	adds [][]rulePart // the rule adds generated so far
	// ruleDevs and routeDevs, when set, are the devices rules and routes
	// name instead of kgen.dev's (kernel_vrf_test.go: the VRFs' ports too).
	ruleDevs, routeDevs []string
	prios               []uint32 // when set, the priorities instead of rulePrios
}

// prio is a rule's priority or goto target.
func (g *rgen) prio() uint32 {
	if len(g.prios) > 0 {
		return g.prios[g.r.IntN(len(g.prios))]
	}
	return rulePrios[g.r.IntN(len(rulePrios))]
}

var (
	ruleRouteTables = []string{"", "", " table main", " table local", " table default", " table 100", " table 200", " table 300"}
	ruleTableNames  = []string{"main", "local", "default", "100", "200", "300", "400"} // 400 has no routes
	rulePrios       = []uint32{0, 1, 5, 10, 20, 50, 100, 150, 200, 500, 1000, 10000, 32000, 32765, 32766, 32767, 40000}
	ruleTOS         = []uint8{0x04, 0x08, 0x0c, 0x10, 0x14, 0x18, 0x1c, 0x04, 0x10, 0x02, 0x20, 0x1e}
	ruleMarks       = []uint32{0, 1, 2, 3, 5, 0x10, 0xff, 0x105}
	ruleMasks       = []uint32{0, 0x1, 0x3, 0xf, 0xff, 0xffffffff}
	rulePorts       = []uint16{1, 2, 10, 20, 53, 80, 443, 1000, 2000, 65534, 65535}
	protoNames      = map[uint8]string{1: "icmp", 6: "tcp", 17: "udp"}
)

func (g *rgen) line() rline {
	switch k := g.r.IntN(100); {
	case k < 11:
		lens := []int{16, 22, 24, 24, 28, 30, 31, 32}
		p := netip.PrefixFrom(g.addr(), lens[g.r.IntN(len(lens))])
		a := fmt.Sprintf("%s dev %s", p, g.dev())
		g.addrs = append(g.addrs, a)
		return rline{text: "address add " + a}
	case k < 13 && len(g.addrs) > 0:
		return rline{text: "address del " + g.addrs[g.r.IntN(len(g.addrs))]}
	case k < 24:
		l := "route del " + g.routePrefix() + ruleRouteTables[g.r.IntN(len(ruleRouteTables))]
		if g.r.IntN(4) == 0 {
			l += fmt.Sprintf(" metric %d", g.r.IntN(2)*10)
		}
		return rline{text: l}
	case k < 40:
		return g.ruleLine()
	}
	verbs := []string{"add", "add", "add", "append", "replace"}
	types := []string{"", "", "", "", "local ", "broadcast ", "blackhole ", "unreachable ", "prohibit ", "throw ", "throw "}
	typ := types[g.r.IntN(len(types))]
	table := ruleRouteTables[g.r.IntN(len(ruleRouteTables))]
	prefix := g.routePrefix()
	toLocal := table == " table local" || table == "" && (typ == "local " || typ == "broadcast ")
	if toLocal && typ != "throw " {
		// Every walk starts in table local: keep its other routes long,
		// or rule 0 would answer nearly every flow.
		prefix = netip.PrefixFrom(g.addr(), 28+g.r.IntN(5)).Masked().String()
	}
	l := "route " + verbs[g.r.IntN(len(verbs))] + " " + typ + prefix
	switch typ {
	case "":
		switch g.r.IntN(5) {
		case 0:
			l += " dev " + g.routeDev()
		case 1:
			l += " via " + g.gateway() + " dev " + g.routeDev() + " onlink"
		default:
			l += " via " + g.gateway()
			if g.r.IntN(2) == 0 {
				l += " dev " + g.routeDev()
			}
		}
	case "local ", "broadcast ":
		l += " dev " + g.routeDev()
	}
	l += table
	if g.r.IntN(4) == 0 {
		l += fmt.Sprintf(" metric %d", g.r.IntN(3)*10)
	}
	return rline{text: l}
}

// routePrefix is kgen.prefix with fewer short prefixes: a default or /8
// route in a table answers every probe that reaches it, and rules after it
// would see none.
func (g *rgen) routePrefix() string {
	if g.r.IntN(4) == 0 {
		return g.prefix()
	}
	lens := []int{16, 20, 22, 24, 24, 25, 26, 28, 29, 30, 32, 32}
	p, _ := g.addr().Prefix(lens[g.r.IntN(len(lens))])
	if p.Bits() == 32 && g.r.IntN(2) == 0 {
		return p.Addr().String()
	}
	return p.String()
}

// rulePrefix is a rule's from or to: near the config's addresses or
// random, sometimes with host bits (the kernel keeps them).
func (g *rgen) rulePrefix() (string, netip.Prefix) {
	// Mostly long: the probes' addresses are 10.0-1.0-3.x, where a /16
	// already selects half of them.
	lens := []int{8, 16, 20, 22, 24, 24, 25, 26, 28, 28, 30, 32, 32}
	a := g.addr()
	if len(g.addrs) > 0 && g.r.IntN(3) == 0 {
		a = netip.MustParsePrefix(strings.Fields(g.addrs[g.r.IntN(len(g.addrs))])[0]).Addr()
	}
	p := netip.PrefixFrom(a, lens[g.r.IntN(len(lens))])
	if g.r.IntN(8) != 0 {
		p = p.Masked()
	}
	if p.Bits() == 32 && g.r.IntN(2) == 0 {
		return p.Addr().String(), p
	}
	return p.String(), p
}

func (g *rgen) portRange() (string, fib.PortRange) {
	lo := rulePorts[g.r.IntN(len(rulePorts))]
	if g.r.IntN(2) == 0 {
		return fmt.Sprint(lo), fib.PortRange{Lo: lo, Hi: lo}
	}
	hi := rulePorts[g.r.IntN(len(rulePorts))]
	if hi < lo {
		lo, hi = hi, lo
	}
	return fmt.Sprintf("%d-%d", lo, hi), fib.PortRange{Lo: lo, Hi: hi}
}

func (g *rgen) ruleDev() string {
	if g.r.IntN(5) == 0 {
		return "lo"
	}
	if len(g.ruleDevs) > 0 {
		return g.ruleDevs[g.r.IntN(len(g.ruleDevs))]
	}
	return g.dev()
}

// routeDev is the device of a route line.
func (g *rgen) routeDev() string {
	if len(g.routeDevs) > 0 {
		return g.routeDevs[g.r.IntN(len(g.routeDevs))]
	}
	return g.dev()
}

// selectorParts draws a rule's selectors.
func (g *rgen) selectorParts() []rulePart {
	var ps []rulePart
	add := func(text string, set func(*fib.RuleSpec)) { ps = append(ps, rulePart{text, set}) }
	if g.r.IntN(4) != 0 {
		p := g.prio()
		add(fmt.Sprint("pref ", p), func(s *fib.RuleSpec) { s.Priority, s.PrioritySet = p, true })
	}
	if g.r.IntN(12) == 0 {
		add("not", func(s *fib.RuleSpec) { s.Invert = true })
	}
	if g.r.IntN(10) < 3 {
		text, p := g.rulePrefix()
		add("from "+text, func(s *fib.RuleSpec) { s.Src = p })
	} else if g.r.IntN(30) == 0 {
		add("from all", func(*fib.RuleSpec) {})
	}
	if g.r.IntN(4) == 0 {
		text, p := g.rulePrefix()
		add("to "+text, func(s *fib.RuleSpec) { s.Dst = p })
	}
	if g.r.IntN(7) == 0 {
		d := g.ruleDev()
		add("iif "+d, func(s *fib.RuleSpec) { s.IIF = d })
	}
	if g.r.IntN(12) == 0 {
		d := g.ruleDev()
		add("oif "+d, func(s *fib.RuleSpec) { s.OIF = d })
	}
	if g.r.IntN(7) == 0 {
		m := ruleMarks[g.r.IntN(len(ruleMarks))]
		if g.r.IntN(2) == 0 {
			add(fmt.Sprintf("fwmark %#x", m), func(s *fib.RuleSpec) { s.Mark, s.MarkSet = m, true })
		} else {
			k := ruleMasks[g.r.IntN(len(ruleMasks))]
			add(fmt.Sprintf("fwmark %#x/%#x", m, k), func(s *fib.RuleSpec) { s.Mark, s.MarkSet, s.Mask, s.MaskSet = m, true, k, true })
		}
	}
	if g.r.IntN(10) == 0 {
		tos := ruleTOS[g.r.IntN(len(ruleTOS))]
		add(fmt.Sprintf("tos %#02x", tos), func(s *fib.RuleSpec) { s.TOS = tos })
	}
	if g.r.IntN(8) == 0 {
		p := []uint8{1, 6, 6, 17}[g.r.IntN(4)]
		add("ipproto "+protoNames[p], func(s *fib.RuleSpec) { s.IPProto = p })
	}
	if g.r.IntN(14) == 0 {
		text, pr := g.portRange()
		add("sport "+text, func(s *fib.RuleSpec) { s.SPort = pr })
	}
	if g.r.IntN(10) == 0 {
		text, pr := g.portRange()
		add("dport "+text, func(s *fib.RuleSpec) { s.DPort = pr })
	}
	return ps
}

// actionParts draws a rule's action (none: iproute2's lookup main).
func (g *rgen) actionParts() []rulePart {
	var ps []rulePart
	add := func(text string, set func(*fib.RuleSpec)) { ps = append(ps, rulePart{text, set}) }
	act := func(a fib.RuleAction) func(*fib.RuleSpec) {
		return func(s *fib.RuleSpec) { s.Action, s.ActionSet = a, true }
	}
	switch k := g.r.IntN(100); {
	case k < 50:
		name := ruleTableNames[g.r.IntN(len(ruleTableNames))]
		id, _ := fib.ParseTable(name)
		add("lookup "+name, func(s *fib.RuleSpec) { s.Table, s.TableSet = id, true })
	case k < 60:
	case k < 72:
		n := g.prio()
		add(fmt.Sprint("goto ", n), func(s *fib.RuleSpec) { s.Action, s.ActionSet, s.Goto = fib.RuleGoto, true, n })
	case k < 79:
		add("nop", act(fib.RuleNop))
	case k < 86:
		add("blackhole", act(fib.RuleBlackhole))
	case k < 93:
		add("unreachable", act(fib.RuleUnreachable))
	default:
		add("prohibit", act(fib.RuleProhibit))
	}
	if g.r.IntN(7) == 0 {
		n := []int{0, 0, 8, 16, 23, 24, 28, 32}[g.r.IntN(8)]
		add(fmt.Sprint("suppress_prefixlength ", n), func(s *fib.RuleSpec) { s.SuppressPrefixLen = n })
	}
	return ps
}

func buildRule(verb string, parts []rulePart) rline {
	s := &fib.RuleSpec{Rule: fib.Rule{SuppressPrefixLen: -1}}
	words := []string{"rule", verb}
	for _, p := range parts {
		words = append(words, p.text)
		p.set(s)
	}
	if s.MarkSet && !s.MaskSet && s.Mark != 0 {
		// fib_nl2rule's compatibility default, on delete too (the parser
		// sets it the same way).
		s.Mask, s.MaskSet = 0xffffffff, true
	}
	return rline{text: strings.Join(words, " "), spec: s, del: verb == "del"}
}

func (g *rgen) ruleLine() rline {
	switch k := g.r.IntN(100); {
	case k < 8 && len(g.adds) > 0: // a duplicate
		return buildRule("add", g.adds[g.r.IntN(len(g.adds))])
	case k < 16 && len(g.adds) > 0: // a delete naming some of a rule's attributes
		var parts []rulePart
		for try := 0; len(parts) == 0 && try < 10; try++ {
			for _, p := range g.adds[g.r.IntN(len(g.adds))] {
				if p.text != "from all" && g.r.IntN(2) == 0 {
					parts = append(parts, p)
				}
			}
		}
		if len(parts) > 0 {
			return buildRule("del", parts)
		}
		fallthrough
	case k < 22: // a delete of random attributes
		parts := append(g.selectorParts(), g.actionParts()...)
		if len(parts) == 0 || len(parts) == 1 && parts[0].text == "from all" {
			p := g.prio()
			parts = []rulePart{{fmt.Sprint("pref ", p), func(s *fib.RuleSpec) { s.Priority, s.PrioritySet = p, true }}}
		}
		return buildRule("del", parts)
	}
	sel := g.selectorParts()
	act := g.actionParts()
	// An error action or a lookup without selectors ends most walks: give
	// most of them a selector, every error action one.
	terminal := len(act) > 0 && slices.Contains([]string{"blackhole", "unreachable", "prohibit"}, act[0].text)
	if len(sel) <= 1 && (terminal || g.r.IntN(5) != 0) {
		text, p := g.rulePrefix()
		sel = append(sel, rulePart{"to " + text, func(s *fib.RuleSpec) { s.Dst = p }})
	}
	parts := append(sel, act...)
	g.adds = append(g.adds, parts)
	return buildRule("add", parts)
}

func kernelRulesRound(t *testing.T, seed uint64) {
	ns := testenv.Netns(t, "nfr")
	// Forwarding on, so input lookups answer forwarded routes; rp_filter off,
	// so source validation is only the check modelRouteGet models.
	testenv.Run(t, "ip", "netns", "exec", ns, "sysctl", "-q", "-w",
		"net.ipv4.conf.all.forwarding=1", "net.ipv4.conf.default.forwarding=1",
		"net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0",
		"net.ipv4.conf.all.accept_local=0", "net.ipv4.conf.all.src_valid_mark=0")
	for _, d := range []string{"eth0", "eth1", "eth2", "eth3", "eth9"} {
		peer := "peer" + d[3:]
		testenv.Run(t, "ip", "-n", ns, "link", "add", d, "type", "veth", "peer", "name", peer)
		testenv.Run(t, "ip", "-n", ns, "link", "set", d, "up")
		testenv.Run(t, "ip", "-n", ns, "link", "set", peer, "up")
	}

	g := &rgen{kgen: kgen{r: rand.New(rand.NewPCG(seed, 29))}}
	// An address first (see kernelRound), and a custom rule the probes
	// never match, so the kernel's walk and source validation take the
	// custom-rules paths from the start.
	lines := []rline{
		{text: "address add 192.168.99.1/24 dev eth9"},
		buildRule("add", []rulePart{
			{"pref 32001", func(s *fib.RuleSpec) { s.Priority, s.PrioritySet = 32001, true }},
			{"from 198.18.0.0/15", func(s *fib.RuleSpec) { s.Src = netip.MustParsePrefix("198.18.0.0/15") }},
			{"lookup 300", func(s *fib.RuleSpec) { s.Table, s.TableSet = 300, true }},
		}),
	}
	for len(lines) < 450 {
		lines = append(lines, g.line())
	}
	f := fib.New(fib.Options{})
	tx := f.Begin(len(lines))
	ours := batchBoth(t, ns, tx, "rules.batch", lines)
	nrules := 0
	for _, l := range lines {
		if l.spec != nil {
			nrules++
		}
	}
	t.Logf("%d lines (%d rule lines, parsed: %t), %d refused by both", len(lines), nrules, ruleParserLanded(), len(ours))

	// The rule lists: same rules, same order.
	kout, err := testenv.Output("ip", "-n", ns, "-d", "-j", "rule", "show")
	if err != nil {
		t.Fatalf("ip rule show: %v %s", err, kout)
	}
	var kjs []map[string]any
	if err := json.Unmarshal([]byte(kout), &kjs); err != nil {
		t.Fatalf("ip -j rule show: %v: %s", err, kout)
	}
	var krules, orules []string
	for _, m := range kjs {
		krules = append(krules, kernelRuleKey(m))
	}
	rules := f.Rules()
	for i := range rules {
		orules = append(orules, netfwdRuleKey(&rules[i]))
	}
	if !slices.Equal(krules, orules) {
		var d []string
		for i := range max(len(krules), len(orules)) {
			k, o := "-", "-"
			if i < len(krules) {
				k = krules[i]
			}
			if i < len(orules) {
				o = orules[i]
			}
			mark := "  "
			if k != o {
				mark = "! "
			}
			d = append(d, mark+"kernel "+k, mark+"netfwd "+o)
		}
		t.Fatalf("rule lists differ:\n%s", strings.Join(d, "\n"))
	}

	probes := g.ruleProbes(f, rulesProbesPerSeed)
	answers := kernelRouteGets(t, ns, probes)
	devHasAddr := map[string]bool{}
	for _, a := range f.Addresses() {
		devHasAddr[a.Dev] = true
	}
	mismatches, stats, decided := 0, map[string]int{}, map[string]bool{}
	for i := range probes {
		p := &probes[i]
		k := answers[i]
		o, res, why := modelRouteGet(f, p)
		stats[o.typ]++
		if why != "" {
			stats[why]++
		}
		if res.RuleSet {
			decided[netfwdRuleKey(&res.Rule)] = true
		}
		d := compareAnswers(k, o, p, devHasAddr)
		if d == "" {
			continue
		}
		mismatches++
		if mismatches <= 15 {
			rule := "none"
			if res.RuleSet {
				rule = netfwdRuleKey(&res.Rule)
			}
			route := "-"
			if res.Route != nil {
				route = fmt.Sprintf("%s %s table %s", res.Route.Type, res.Route.Prefix, fib.TableName(res.Table))
			}
			t.Errorf("ip route get %s: %s\n  kernel %+v\n  netfwd %+v %s (rule %s, route %s)", p.line(), d, k, o, why, rule, route)
		}
	}
	if mismatches > 0 {
		t.Errorf("%d of %d flows differ; rules:\n  %s", mismatches, len(probes), strings.Join(orules, "\n  "))
		return
	}
	deciding := 0 // rules whose action can end a walk
	for i := range rules {
		if rules[i].Action != fib.RuleGoto && rules[i].Action != fib.RuleNop {
			deciding++
		}
	}
	t.Logf("%d flows agree; %d of %d rules that can decide decided some; answers %v", len(probes), len(decided), deciding, stats)
}

// rprobe is one flow: `ip route get` with selectors. iif empty: an output
// lookup.
type rprobe struct {
	dst, src     netip.Addr
	iif, oif     string
	mark         uint32
	tos, proto   uint8
	sport, dport uint16
	uid          uint32 // kernel_vrf_test.go's stand-in for `vrf NAME`
}

func (p *rprobe) line() string {
	l := "route get " + p.dst.String()
	if p.src.IsValid() {
		l += " from " + p.src.String()
	}
	if p.iif != "" {
		l += " iif " + p.iif
	}
	if p.oif != "" {
		l += " oif " + p.oif
	}
	if p.mark != 0 {
		l += fmt.Sprintf(" mark %#x", p.mark)
	}
	if p.tos != 0 {
		l += fmt.Sprintf(" tos %#02x", p.tos)
	}
	if p.proto != 0 {
		l += " ipproto " + protoNames[p.proto]
	}
	if p.sport != 0 {
		l += fmt.Sprint(" sport ", p.sport)
	}
	if p.dport != 0 {
		l += fmt.Sprint(" dport ", p.dport)
	}
	if p.uid != 0 {
		l += fmt.Sprint(" uid ", p.uid)
	}
	return l
}

// martian: addresses the kernel refuses as a flow's source or destination
// before any lookup.
func martian(a netip.Addr) bool {
	b := a.As4()
	return b[0] == 0 || b[0] == 127 || a.IsMulticast() || b == [4]byte{255, 255, 255, 255}
}

// edgeOf is an address at or next to an end of p.
func (g *rgen) edgeOf(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr()
	if g.r.IntN(2) == 0 {
		a = fib.LastAddr(p)
	}
	switch g.r.IntN(4) {
	case 0:
		if n := a.Next(); n.IsValid() {
			a = n
		}
	case 1:
		if n := a.Prev(); n.IsValid() {
			a = n
		}
	}
	return a
}

// ruleProbes draws flows that hit every rule: destinations at the edges of
// the routes' and rules' prefixes, sources from the rules' prefixes, and
// the rules' devices, marks, tos, protocols and ports.
func (g *rgen) ruleProbes(f *fib.FIB, n int) []rprobe {
	var routes, dsts, srcs []netip.Prefix
	for _, r := range f.Routes(fib.TableAll) {
		routes = append(routes, r.Prefix)
	}
	var iifs, oifs []string
	var marks []uint32
	var toss, protos []uint8
	var ports []fib.PortRange
	rules := f.Rules()
	for i := range rules {
		r := &rules[i]
		if r.Src.IsValid() && r.Src.Bits() > 0 {
			srcs = append(srcs, r.Src)
		}
		if r.Dst.IsValid() && r.Dst.Bits() > 0 {
			dsts = append(dsts, r.Dst)
		}
		if r.IIF != "" && r.IIF != "lo" {
			iifs = append(iifs, r.IIF)
		}
		if r.OIF != "" && r.OIF != "lo" {
			oifs = append(oifs, r.OIF)
		}
		if r.Mask != 0 {
			marks = append(marks, r.Mark, r.Mark^r.Mask, r.Mark&r.Mask)
		}
		if r.TOS != 0 {
			toss = append(toss, r.TOS)
		}
		if r.IPProto != 0 {
			protos = append(protos, r.IPProto)
		}
		for _, pr := range []fib.PortRange{r.SPort, r.DPort} {
			if pr.Set() {
				ports = append(ports, pr)
			}
		}
	}
	var locals []netip.Addr
	for _, a := range f.Addresses() {
		locals = append(locals, a.Prefix.Addr())
	}
	pickPrefix := func(ps []netip.Prefix) netip.Addr {
		if len(ps) == 0 {
			return g.addr()
		}
		p := ps[g.r.IntN(len(ps))]
		if g.r.IntN(3) == 0 { // inside
			b := p.Masked().Addr().As4()
			b[3] += byte(g.r.IntN(256))
			if a := netip.AddrFrom4(b); p.Contains(a) {
				return a
			}
		}
		return g.edgeOf(p)
	}
	pick := func(xs []string, dflt func() string) string {
		if len(xs) > 0 && g.r.IntN(3) != 0 {
			return xs[g.r.IntN(len(xs))]
		}
		return dflt()
	}
	port := func() uint16 {
		if len(ports) > 0 && g.r.IntN(10) < 7 {
			pr := ports[g.r.IntN(len(ports))]
			return []uint16{pr.Lo - 1, pr.Lo, pr.Hi, pr.Hi + 1, pr.Lo + (pr.Hi-pr.Lo)/2}[g.r.IntN(5)]
		}
		return uint16(1 + g.r.IntN(65535))
	}
	probes := make([]rprobe, 0, n)
	for len(probes) < n {
		var p rprobe
		switch k := g.r.IntN(20); {
		case k < 7:
			p.dst = pickPrefix(routes)
		case k < 13:
			p.dst = pickPrefix(dsts)
		case k < 14 && len(locals) > 0:
			p.dst = locals[g.r.IntN(len(locals))]
		default:
			p.dst = g.addr()
		}
		if g.r.IntN(10) < 6 { // an input lookup
			p.iif = pick(iifs, g.dev)
			switch k := g.r.IntN(20); {
			case k < 7:
				p.src = pickPrefix(srcs)
			case k < 10 && len(locals) > 0:
				p.src = locals[g.r.IntN(len(locals))]
			default:
				p.src = g.addr()
			}
		} else {
			if len(locals) > 0 && g.r.IntN(3) == 0 {
				p.src = locals[g.r.IntN(len(locals))]
			}
			if g.r.IntN(10) < 3 {
				p.oif = pick(oifs, g.dev)
			}
		}
		if martian(p.dst) || p.src.IsValid() && martian(p.src) {
			continue
		}
		if g.r.IntN(10) < 4 {
			if len(marks) > 0 && g.r.IntN(4) != 0 {
				p.mark = marks[g.r.IntN(len(marks))]
			} else {
				p.mark = ruleMarks[g.r.IntN(len(ruleMarks))]
			}
		}
		if g.r.IntN(10) < 3 {
			if len(toss) > 0 && g.r.IntN(2) == 0 {
				p.tos = toss[g.r.IntN(len(toss))]
			} else {
				p.tos = uint8(g.r.IntN(8) * 4)
			}
			p.tos |= uint8(g.r.IntN(4)) << 5 // bits the rules do not compare
		}
		if g.r.IntN(10) < 5 {
			if len(protos) > 0 && g.r.IntN(2) == 0 {
				p.proto = protos[g.r.IntN(len(protos))]
			} else {
				p.proto = []uint8{1, 6, 17}[g.r.IntN(3)]
			}
			if p.proto != 1 {
				if g.r.IntN(5) != 0 {
					p.sport = port()
				}
				if g.r.IntN(5) != 0 {
					p.dport = port()
				}
			}
		}
		probes = append(probes, p)
	}
	return probes
}

// routeAnswer is what `ip -j route get` shows, or the error class (as
// kernel_test.go names them: blackhole = EINVAL, unreachable = EHOSTUNREACH,
// prohibit = EACCES, none = ENETUNREACH).
type routeAnswer struct {
	typ, gw, dev, table, prefsrc string
}

// kernelRouteGets asks the kernel all probes in one `ip -batch`: each
// success prints one JSON array on stdout, each failure its message and
// "Command failed FILE:N" on stderr.
func kernelRouteGets(t *testing.T, ns string, probes []rprobe) []routeAnswer {
	var b strings.Builder
	for i := range probes {
		b.WriteString(probes[i].line())
		b.WriteByte('\n')
	}
	file := filepath.Join(t.TempDir(), "gets.batch")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("ip", "-n", ns, "-d", "-j", "-force", "-batch", file)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_ = cmd.Run() // fails when any query does
	failed := map[int]string{}
	prev := ""
	for _, l := range strings.Split(stderr.String(), "\n") {
		if m := failedLine.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			failed[n] = prev
		}
		prev = l
	}
	dec := json.NewDecoder(&stdout)
	answers := make([]routeAnswer, len(probes))
	for i := range probes {
		if msg, ok := failed[i+1]; ok {
			switch {
			case strings.Contains(msg, "Invalid argument"):
				answers[i].typ = "blackhole"
			case strings.Contains(msg, "No route to host"):
				answers[i].typ = "unreachable"
			case strings.Contains(msg, "Permission denied"):
				answers[i].typ = "prohibit"
			case strings.Contains(msg, "Network is unreachable"):
				answers[i].typ = "none"
			default:
				answers[i].typ = "error: " + msg
			}
			continue
		}
		var ks []struct {
			Type, Gateway, Dev, Table, Prefsrc string
		}
		if err := dec.Decode(&ks); err != nil || len(ks) != 1 {
			t.Fatalf("ip route get output for %q: %v (%d answers)", probes[i].line(), err, len(ks))
		}
		k := ks[0]
		answers[i] = routeAnswer{typ: k.Type, gw: k.Gateway, dev: k.Dev, table: k.Table, prefsrc: k.Prefsrc}
		if answers[i].typ == "" {
			answers[i].typ = "unicast"
		}
	}
	return answers
}

// answerOf is a LookupRouteFlow result as the kernel shows it.
func answerOf(res fib.Result, ok bool) routeAnswer {
	if !ok {
		return routeAnswer{typ: "none"}
	}
	a := routeAnswer{typ: res.Route.Type.String()}
	if a.typ != "unicast" && a.typ != "local" && a.typ != "broadcast" {
		return a
	}
	if res.NH != nil {
		if res.NH.UsesGateway() {
			a.gw = res.NH.Gateway.String()
		}
		a.dev = res.NH.Dev
	}
	a.table = fib.TableName(res.Table)
	if res.Prefsrc.IsValid() {
		a.prefsrc = res.Prefsrc.String()
	}
	return a
}

func (p *rprobe) query() fib.FlowQuery {
	return fib.FlowQuery{Dst: p.dst, Src: p.src, IIF: p.iif, OIF: p.oif, Mark: p.mark, TOS: p.tos,
		Proto: p.flowProto(), SPort: p.sport, DPort: p.dport}
}

// flowProto is the flow's protocol: the kernel's `route get` without
// ipproto asks for UDP (inet_rtm_getroute's default, for the output flow
// and the packet it builds for an input lookup alike).
func (p *rprobe) flowProto() uint8 {
	if p.proto == 0 {
		return 17
	}
	return p.proto
}

// modelRouteGet is the kernel's `ip route get` for a flow by netfwd's
// lookup, with the two kernel steps around the lookup that the answer
// shows (see the top of the file); why names the step that decided.
func modelRouteGet(f *fib.FIB, p *rprobe) (a routeAnswer, res fib.Result, why string) {
	res, ok := f.LookupRouteFlow(p.query())
	a = answerOf(res, ok)
	forwards := a.typ == "unicast" || a.typ == "local" || a.typ == "broadcast"
	if p.iif == "" {
		if p.oif != "" && !forwards {
			// ip_route_output_key_hash_rcu: "Apparently, routing tables are
			// wrong. Assume, that the destination is on link." The source
			// is the device's first address (inet_select_addr(dev, 0, link)).
			a = routeAnswer{typ: "unicast", dev: p.oif}
			if s := f.SelectSource(p.oif, netip.Addr{}); s.IsValid() {
				a.prefsrc = s.String()
			}
			return a, res, "on-link"
		}
		return a, res, ""
	}
	if !forwards {
		return a, res, ""
	}
	// fib_validate_source with rp_filter off (__fib_validate_source): the
	// reverse flow (source and destination swapped, ports too, mark 0, the
	// forward route's device as iif, lo for local delivery; a broadcast's
	// has no source) may not end at a local or broadcast route.
	rq := fib.FlowQuery{Dst: p.src, IIF: "lo", TOS: p.tos, Proto: p.flowProto(), SPort: p.dport, DPort: p.sport}
	switch a.typ {
	case "unicast":
		rq.IIF, rq.Src = res.NH.Dev, p.dst
	case "local":
		rq.Src = p.dst
	}
	if rres, rok := f.LookupRouteFlow(rq); rok && (rres.Route.Type == fib.Local || rres.Route.Type == fib.Broadcast) {
		return routeAnswer{typ: "blackhole"}, res, "martian source"
	}
	return a, res, ""
}

// compareAnswers returns what differs ("": nothing).
func compareAnswers(k, o routeAnswer, p *rprobe, devHasAddr map[string]bool) string {
	if k.typ != o.typ {
		return "type"
	}
	if k.typ != "unicast" && k.typ != "local" && k.typ != "broadcast" {
		return ""
	}
	var d []string
	if k.gw != o.gw {
		d = append(d, "gateway")
	}
	// Local delivery (and an input broadcast) goes to lo.
	if k.typ != "local" && !(k.typ == "broadcast" && p.iif != "") && k.dev != o.dev {
		d = append(d, "dev")
	}
	if k.table != o.table {
		d = append(d, "table")
	}
	// The kernel prints a source for output lookups without one; source
	// selection off a device without addresses depends on the kernel's
	// device order (see kernelRound).
	if p.iif == "" && !p.src.IsValid() && (k.typ == "local" || devHasAddr[o.dev]) && k.prefsrc != o.prefsrc {
		d = append(d, "prefsrc")
	}
	return strings.Join(d, ", ")
}

// kernelRuleKey and netfwdRuleKey print a rule in one canonical form.
func kernelRuleKey(m map[string]any) string {
	str := func(k string) string {
		s, _ := m[k].(string)
		return s
	}
	num := func(k string) int64 {
		switch v := m[k].(type) {
		case float64:
			return int64(v)
		case string:
			n, _ := strconv.ParseInt(v, 0, 64)
			return n
		}
		return 0
	}
	has := func(k string) bool { _, ok := m[k]; return ok }
	var w []string
	w = append(w, fmt.Sprint(num("priority")))
	if has("not") {
		w = append(w, "not")
	}
	for _, sel := range []string{"src", "dst"} {
		if s := str(sel); s != "" && s != "all" {
			bits := int64(32)
			if has(sel + "len") {
				bits = num(sel + "len")
			}
			w = append(w, fmt.Sprintf("%s %s/%d", sel, s, bits))
		}
	}
	if has("iif") {
		w = append(w, "iif "+str("iif"))
	}
	if has("oif") {
		w = append(w, "oif "+str("oif"))
	}
	if has("fwmark") || has("fwmask") {
		mask := int64(0xffffffff)
		if has("fwmask") {
			mask = num("fwmask")
		}
		w = append(w, fmt.Sprintf("fwmark %#x/%#x", num("fwmark"), mask))
	}
	if t := num("tos"); t != 0 {
		w = append(w, fmt.Sprintf("tos %#x", t))
	}
	if has("ipproto") {
		w = append(w, "ipproto "+str("ipproto"))
	}
	for _, sel := range []string{"sport", "dport"} {
		switch {
		case has(sel):
			w = append(w, fmt.Sprintf("%s %d-%d", sel, num(sel), num(sel)))
		case has(sel + "_start"):
			w = append(w, fmt.Sprintf("%s %d-%d", sel, num(sel+"_start"), num(sel+"_end")))
		}
	}
	switch {
	case has("goto"):
		w = append(w, fmt.Sprint("goto ", num("goto")))
	case has("nop"):
		w = append(w, "nop")
	case has("action"):
		w = append(w, str("action"))
	default:
		w = append(w, "lookup")
	}
	if has("table") {
		w = append(w, "table "+str("table"))
	}
	if has("suppress_prefixlen") {
		w = append(w, fmt.Sprint("suppress ", num("suppress_prefixlen")))
	}
	w = append(w, "proto "+str("protocol"))
	return strings.Join(w, " ")
}

func netfwdRuleKey(r *fib.Rule) string {
	var w []string
	w = append(w, fmt.Sprint(r.Priority))
	if r.Invert {
		w = append(w, "not")
	}
	if r.Src.IsValid() && r.Src.Bits() > 0 {
		w = append(w, "src "+r.Src.String())
	}
	if r.Dst.IsValid() && r.Dst.Bits() > 0 {
		w = append(w, "dst "+r.Dst.String())
	}
	if r.IIF != "" {
		w = append(w, "iif "+r.IIF)
	}
	if r.OIF != "" {
		w = append(w, "oif "+r.OIF)
	}
	if r.Mark != 0 || r.Mask != 0 {
		w = append(w, fmt.Sprintf("fwmark %#x/%#x", r.Mark, r.Mask))
	}
	if r.TOS != 0 {
		w = append(w, fmt.Sprintf("tos %#x", r.TOS))
	}
	if r.IPProto != 0 {
		w = append(w, "ipproto "+protoNames[r.IPProto])
	}
	for i, pr := range []fib.PortRange{r.SPort, r.DPort} {
		if pr.Set() {
			w = append(w, fmt.Sprintf("%s %d-%d", []string{"sport", "dport"}[i], pr.Lo, pr.Hi))
		}
	}
	if r.Action == fib.RuleGoto {
		w = append(w, fmt.Sprint("goto ", r.Goto))
	} else {
		w = append(w, r.Action.String())
	}
	if r.Table != 0 {
		w = append(w, "table "+fib.TableName(r.Table))
	}
	if r.SuppressPrefixLen >= 0 && r.Table != 0 { // iproute2 prints it with a table only
		w = append(w, fmt.Sprint("suppress ", r.SuppressPrefixLen))
	}
	proto := "unspec"
	if r.Proto == fib.ProtoKernel {
		proto = "kernel"
	}
	return strings.Join(w, " ") + " proto " + proto
}

// batchBoth gives lines to the kernel of namespace ns (`ip -force -batch`)
// and to tx (rule specs directly until the rule parser landed, else the
// config lines), commits tx, and fails t now where the two differ on which
// lines they refuse. It returns netfwd's refusals by line number.
func batchBoth(t *testing.T, ns string, tx *fib.Txn, name string, lines []rline) map[int]string {
	t.Helper()
	texts := make([]string, len(lines))
	for i, l := range lines {
		texts[i] = l.text
	}
	file := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(file, []byte(strings.Join(texts, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := testenv.Output("ip", "-n", ns, "-force", "-batch", file)
	kernelFailed := map[int]string{}
	prev := ""
	for _, l := range strings.Split(out, "\n") {
		if m := failedLine.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			kernelFailed[n] = prev
		}
		prev = l
	}
	parseRules := ruleParserLanded()
	ours := map[int]string{}
	for i, l := range lines {
		var err error
		if l.spec != nil && !parseRules {
			if l.del {
				err = tx.DelRule(*l.spec)
			} else {
				err = tx.AddRule(*l.spec)
			}
		} else {
			cmd, ok, perr := config.ParseLine(config.Pos{File: name, Line: i + 1}, l.text)
			err = perr
			if err == nil && ok {
				err = apply.FIBCommand(tx, &cmd)
			}
		}
		if err != nil {
			ours[i+1] = err.Error()
		}
	}
	tx.Commit()
	for n := 1; n <= len(lines); n++ {
		k, kf := kernelFailed[n]
		o, of := ours[n]
		if kf != of {
			t.Errorf("line %d %q: kernel failed=%t (%s), netfwd failed=%t (%s)", n, texts[n-1], kf, k, of, o)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return ours
}
