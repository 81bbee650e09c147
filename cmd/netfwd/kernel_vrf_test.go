package main

// Differential test of VRFs against the Linux kernel: three VRFs whose ports
// have the same subnet (10.0.0.1/24 on r0, b0 and g0, and on eth0 in table
// main), random routes in the VRF tables (100, 200, 300) and elsewhere, and
// random rules from TestKernelDifferentialRules's generator (naming the
// VRFs' ports and tables too); `ip route get` must agree with
// fib.LookupRouteFlow on input lookups from a port of a VRF, output lookups
// through one, `vrf NAME` lookups and the other flows of the rules test.
// red and blue have Linux's `unreachable default metric 4278198272`, green
// has none, so green's misses fall through to the later rules (main: the
// well-known leak).
//
// The test kernel is built without CONFIG_NET_VRF, so the namespace emulates
// what the vrf driver and l3mdev do on kernel 6.18 (net/l3mdev/l3mdev.c,
// net/core/fib_rules.c, net/ipv4/fib_frontend.c, route.c); netfwd gets the
// real thing (Txn.AddVRF, Txn.SetMaster, FlowQuery.VRF):
//   - Derived routes: fib_magic puts the local, broadcast and connected
//     routes of a port's addresses in l3mdev_fib_table(dev), the VRF's table.
//     The ports get their addresses before any other line, and the routes
//     the kernel derived in local and main are deleted and added to the
//     VRF's table with the same type, scope, source and protocol.
//   - The l3mdev rule (`1000: from all lookup [l3mdev-table]`) matches a flow
//     whose flowi_l3mdev is set (l3mdev_fib_rule_match), and a miss or throw
//     goes on to the next rule. l3mdev_update_flow sets flowi_l3mdev from an
//     oif enslaved to a VRF (or the VRF device itself, whose oif it then
//     resets to 0), else from an iif enslaved to one; since 5.18 the flow's
//     iif and oif stay the port's. Emulated at the same place in the list
//     (priority 1000, added before any other rule) by a block of rules
//     `iif PORT lookup T` and `oif PORT lookup T` for every port, which
//     match exactly the flows whose l3mdev is the port's VRF: input lookups
//     from a port, output lookups through one (route get oif, and the
//     gateway check fib_check_nh_v4_gw makes), and reverse lookups of source
//     validation whose iif is a port.
//   - `route get ... vrf NAME` (RTA_OIF = the VRF device): l3mdev_update_flow
//     gives it the VRF's l3mdev and resets its oif to 0, so no rule's oif and
//     no nexthop device filter applies. Emulated by `uidrange U lookup T` in
//     the block and `route get ... uid U` (no generated rule selects on
//     uid; every other flow has uid 0).
//   - The emulating rules have protocol 99, so no generated `rule add` is
//     `File exists` against them; generated `rule del` lines that would
//     remove one of them or the l3mdev rule are left out. The rule lists are
//     compared with the block standing for netfwd's l3mdev rule.
//
// What the emulation cannot give exactly, and how the test deals with it:
//   - Source validation of an input lookup from a port: the kernel's reverse
//     lookup carries the port's l3mdev with the forward route's device (or
//     lo) as iif, which no iif rule can select. The ports have accept_local=1
//     and the namespace send_redirects=0, which makes fib_validate_source
//     accept without a lookup, and the model validates nothing there; source
//     validation stays modelled for the other devices (modelRouteGet), also
//     where a forward route leaves through a port.
//   - An output lookup through a port whose walk fails: Linux returns the
//     walk's error (ip_route_output_key_hash_rcu assumes the destination on
//     link only for flows without flowi4_l3mdev); the emulated kernel, whose
//     flow has no l3mdev, answers "dev PORT" on link. The test checks that
//     netfwd's walk fails and the kernel answered on link; the error's kind
//     is not compared there ("l3mdev error" in the log).
//   - Rules naming a VRF device (`iif red`, `oif red`: since 6.15 they match
//     the flows of the VRF's domain, fib_rule_iif_match) are not generated.
//   - Rules `iif PORT` are not generated (vrfPortIIFRules): the kernel
//     matches them (the iif stays the port since 5.18) and netfwd, whose
//     LookupRouteFlow and datapath give the flow the VRF device as iif, does
//     not: a known difference (see the constant).
//   - The source an output lookup in a VRF picks when its route leaves
//     through a device outside the VRF (fib_select_path: inet_select_addr on
//     the VRF device) is not compared, nor, as elsewhere, the device of a
//     local answer (the VRF device in Linux, lo in the emulation).
//   - Addresses of the ports are fixed: the generated address lines use
//     eth0-eth3 only.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/apply"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/testenv"
)

// vrfProbesPerSeed is how many flows each seed compares.
const vrfProbesPerSeed = 12000

// vrfPortIIFRules generates rules `iif PORT` for ports of VRFs. Off: Linux
// 6.18 matches such a rule for packets received on the port (the flow's iif
// stays the port, l3mdev_update_flow only sets flowi_l3mdev), netfwd gives
// the flow the VRF device's index as iif (fib.LookupRouteFlow, fib.Flow's
// IIF), so the rule never matches there. Turn on to see the difference.
const vrfPortIIFRules = false

// kvrf is one VRF of the test.
type kvrf struct {
	name  string
	table uint32
	uid   uint32 // the uidrange standing for `vrf NAME` lookups
	ports []string
	addrs [][]string // per port
	// unreachable: the VRF's table ends in Linux's unreachable default.
	unreachable bool
}

var kernelVRFs = []kvrf{
	{"red", 100, 10001, []string{"r0", "r1"}, [][]string{{"10.0.0.1/24", "10.0.0.2/24"}, {"10.1.1.1/24"}}, true},
	{"blue", 200, 10002, []string{"b0", "b1"}, [][]string{{"10.0.0.1/24"}, {"10.1.1.1/25"}}, true},
	{"green", 300, 10003, []string{"g0"}, [][]string{{"10.0.0.1/24", "10.2.0.9/32"}}, false},
}

const vrfEmulationProto = "99" // iproute2 prints it as "openr"

func TestKernelDifferentialVRFs(t *testing.T) {
	testenv.RequireRoot(t)
	waitingTest(t)
	seeds := 3
	if os.Getenv("NETFWD_KERNEL_SEEDS") != "" {
		seeds = kernelSeeds()
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { kernelVRFRound(t, uint64(seed)) })
	}
}

// vprobe is a flow with its VRF (`route get ... vrf NAME`).
type vprobe struct {
	rprobe
	vrf string
}

func kernelVRFRound(t *testing.T, seed uint64) {
	ns := testenv.Netns(t, "nfv")
	testenv.Run(t, "ip", "netns", "exec", ns, "sysctl", "-q", "-w",
		"net.ipv4.conf.all.forwarding=1", "net.ipv4.conf.default.forwarding=1",
		"net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0",
		"net.ipv4.conf.all.accept_local=0", "net.ipv4.conf.all.src_valid_mark=0",
		"net.ipv4.conf.all.send_redirects=0", "net.ipv4.conf.default.send_redirects=0")
	portVRF := map[string]*kvrf{}
	var ports []string
	for i := range kernelVRFs {
		for _, p := range kernelVRFs[i].ports {
			portVRF[p] = &kernelVRFs[i]
			ports = append(ports, p)
		}
	}
	for _, d := range append([]string{"eth0", "eth1", "eth2", "eth3", "eth9"}, ports...) {
		peer := "p" + d
		testenv.Run(t, "ip", "-n", ns, "link", "add", d, "type", "veth", "peer", "name", peer)
		testenv.Run(t, "ip", "-n", ns, "link", "set", d, "up")
		testenv.Run(t, "ip", "-n", ns, "link", "set", peer, "up")
	}
	for _, p := range ports {
		testenv.Run(t, "ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv4.conf."+p+".accept_local=1")
	}

	// netfwd: the VRFs, their ports and addresses, the unreachable defaults.
	f := fib.New(fib.Options{})
	tx := f.Begin(64)
	var setup []string // config lines given to both
	for i := range kernelVRFs {
		v := &kernelVRFs[i]
		if err := tx.AddVRF(v.name, v.table); err != nil {
			t.Fatalf("AddVRF %s: %v", v.name, err)
		}
		for j, p := range v.ports {
			if err := tx.SetMaster(p, v.name); err != nil {
				t.Fatalf("SetMaster %s %s: %v", p, v.name, err)
			}
			for _, a := range v.addrs[j] {
				setup = append(setup, "address add "+a+" dev "+p)
			}
		}
	}
	var unreachables []string
	for _, v := range kernelVRFs {
		if v.unreachable {
			unreachables = append(unreachables, fmt.Sprintf("route add unreachable default metric 4278198272 table %d", v.table))
		}
	}
	for i, l := range append(slices.Clone(setup), unreachables...) {
		cmd, ok, err := config.ParseLine(config.Pos{File: "setup", Line: i + 1}, l)
		if err == nil && ok {
			err = apply.FIBCommand(tx, &cmd)
		}
		if err != nil {
			t.Fatalf("netfwd %q: %v", l, err)
		}
	}
	tx.Commit()

	// The kernel: the ports' addresses, their derived routes moved to the
	// VRFs' tables, the rules standing for the l3mdev rule.
	kernelBatch(t, ns, setup)
	var moves []string
	for _, table := range []string{"local", "main"} {
		out, err := testenv.Output("ip", "-n", ns, "-j", "route", "show", "table", table)
		if err != nil {
			t.Fatalf("ip route show table %s: %v %s", table, err, out)
		}
		var rs []struct{ Type, Dst, Dev, Protocol, Scope, Prefsrc string }
		if err := json.Unmarshal([]byte(out), &rs); err != nil {
			t.Fatalf("ip -j route show table %s: %v", table, err)
		}
		for _, r := range rs {
			v := portVRF[r.Dev]
			if v == nil {
				continue
			}
			typ := r.Type
			if typ == "" {
				typ = "unicast"
			}
			spec := fmt.Sprintf("%s %s dev %s proto %s scope %s src %s", typ, r.Dst, r.Dev, r.Protocol, r.Scope, r.Prefsrc)
			moves = append(moves, "route del table "+table+" "+spec, fmt.Sprintf("route add table %d %s", v.table, spec))
		}
	}
	for _, v := range kernelVRFs {
		for _, p := range v.ports {
			moves = append(moves,
				fmt.Sprintf("rule add pref 1000 iif %s lookup %d protocol %s", p, v.table, vrfEmulationProto),
				fmt.Sprintf("rule add pref 1000 oif %s lookup %d protocol %s", p, v.table, vrfEmulationProto))
		}
		moves = append(moves, fmt.Sprintf("rule add pref 1000 uidrange %d-%d lookup %d protocol %s", v.uid, v.uid, v.table, vrfEmulationProto))
	}
	kernelBatch(t, ns, append(moves, unreachables...))

	// The emulating rules as netfwd rules, with the l3mdev rule: a
	// generated delete that removes one of them is left out.
	emu := fib.New(fib.Options{})
	etx := emu.Begin(16)
	if err := etx.AddVRF("x", 1); err != nil {
		t.Fatal(err)
	}
	for _, v := range kernelVRFs {
		var specs []fib.RuleSpec
		for _, p := range v.ports {
			specs = append(specs, vrfEmuSpec(p, "", v.table), vrfEmuSpec("", p, v.table))
		}
		for _, s := range append(specs, vrfEmuSpec("", "", v.table)) {
			if err := etx.AddRule(s); err != nil {
				t.Fatalf("emulating rule %+v: %v", s, err)
			}
		}
	}
	etx.Commit()
	removesEmulated := func(s *fib.RuleSpec) bool {
		tx := emu.Begin(1)
		defer tx.Abort()
		return tx.DelRule(*s) == nil
	}

	devs := append([]string{"eth0", "eth1", "eth2", "eth3"}, ports...)
	g := &rgen{kgen: kgen{r: rand.New(rand.NewPCG(seed, 31))}, ruleDevs: devs, routeDevs: devs,
		// Most rules after the l3mdev rule, so that most VRF flows reach it.
		prios: []uint32{0, 5, 500, 999, 1000, 1000, 1001, 1500, 2000, 10000, 32000, 32765, 32766, 32767, 40000}}
	g.addrs = append(g.addrs, "10.0.0.1/24 dev eth0")
	lines := []rline{
		{text: "address add 192.168.99.1/24 dev eth9"},
		{text: "address add 10.0.0.1/24 dev eth0"}, // the VRFs' subnet in main too
	}
	skipped := 0
	for len(lines) < 450 {
		l := g.line()
		if s := l.spec; s != nil && (!vrfPortIIFRules && portVRF[s.IIF] != nil || l.del && removesEmulated(s) || !l.del && broadRule(s)) {
			skipped++
			continue
		}
		lines = append(lines, l)
	}
	tx = f.Begin(len(lines))
	ours := batchBoth(t, ns, tx, "vrf.batch", lines)
	t.Logf("%d lines (%d left out), %d refused by both", len(lines), skipped, len(ours))

	// The rule lists, the emulating block standing for the l3mdev rule.
	kout, err := testenv.Output("ip", "-n", ns, "-d", "-j", "rule", "show")
	if err != nil {
		t.Fatalf("ip rule show: %v %s", err, kout)
	}
	var kjs []map[string]any
	if err := json.Unmarshal([]byte(kout), &kjs); err != nil {
		t.Fatalf("ip -j rule show: %v: %s", err, kout)
	}
	rules := f.Rules()
	var krules, orules []string
	l3 := ""
	for i := range rules {
		orules = append(orules, netfwdRuleKey(&rules[i]))
		if rules[i].L3mdev {
			l3 = orules[i]
		}
	}
	emulated := 0
	for _, m := range kjs {
		if p, _ := m["protocol"].(string); p == "openr" || p == vrfEmulationProto {
			if emulated == 0 {
				krules = append(krules, l3)
			}
			emulated++
			continue
		}
		krules = append(krules, kernelRuleKey(m))
	}
	if want := 2*len(ports) + len(kernelVRFs); emulated != want {
		t.Fatalf("kernel has %d emulating rules, want %d", emulated, want)
	}
	if !slices.Equal(krules, orules) {
		t.Fatalf("rule lists differ:\n  kernel %s\n  netfwd %s", strings.Join(krules, "\n         "), strings.Join(orules, "\n         "))
	}

	probes := g.vrfProbes(f, ports, vrfProbesPerSeed)
	kprobes := make([]rprobe, len(probes))
	for i := range probes {
		kprobes[i] = probes[i].rprobe
		if v := probes[i].vrf; v != "" {
			kprobes[i].uid = vrfByName(v).uid
		}
	}
	answers := kernelRouteGets(t, ns, kprobes)
	devHasAddr := map[string]bool{}
	for _, a := range f.Addresses() {
		devHasAddr[a.Dev] = true
	}
	mismatches, stats := 0, map[string]int{}
	for i := range probes {
		p := &probes[i]
		k := answers[i]
		o, res, why := vrfModelRouteGet(f, p, portVRF)
		kind := "other"
		switch {
		case p.vrf != "":
			kind = "vrf " + p.vrf
		case portVRF[p.iif] != nil:
			kind = "iif " + portVRF[p.iif].name
		case portVRF[p.oif] != nil:
			kind = "oif " + portVRF[p.oif].name
		}
		stats[kind]++
		if kind != "other" {
			v := vrfOf(p, portVRF)
			switch {
			case res.Table == v.table:
				stats["answered by "+v.name]++
			case res.RuleSet && res.Rule.Priority > fib.RuleL3mdevPriority:
				stats["fell through from "+v.name]++
			}
			if os.Getenv("VRFDBG") != "" && res.RuleSet {
				stats["DBG "+v.name+" "+netfwdRuleKey(&res.Rule)]++
			}
		}
		if why != "" {
			stats[why]++
		}
		d := ""
		if why == "l3mdev error" {
			// The emulated kernel answers on link (see the top).
			if k.typ != "unicast" || k.table != "" || k.dev != p.oif {
				d = "on link expected"
			}
		} else {
			kp := p.rprobe
			if why == "leaked source" {
				kp.src = netip.IPv4Unspecified() // no source compared
			}
			d = compareAnswers(k, o, &kp, devHasAddr)
		}
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
			t.Errorf("ip route get %s (vrf %q): %s\n  kernel %+v\n  netfwd %+v %s (rule %s, route %s)", kprobes[i].line(), p.vrf, d, k, o, why, rule, route)
		}
	}
	if mismatches > 0 {
		t.Errorf("%d of %d flows differ; rules:\n  %s", mismatches, len(probes), strings.Join(orules, "\n  "))
		return
	}
	answered, fell := 0, 0
	for _, v := range kernelVRFs {
		answered += stats["answered by "+v.name]
		fell += stats["fell through from "+v.name]
	}
	if answered == 0 {
		t.Errorf("no flow answered by a VRF's table (%d fell through to later rules): the rules left the VRFs none", fell)
	}
	t.Logf("%d flows agree; %v", len(probes), stats)
}

// broadRule reports whether a rule add would take nearly every flow before
// the VRFs' tables see it: an inverted or wide rule (no selector narrower
// than a /20) with an error action, or with any action but nop before the
// l3mdev rule (no priority: 999, the second rule's minus one). A few of
// them leave no flow for the VRFs.
func broadRule(s *fib.RuleSpec) bool {
	narrow := func(p netip.Prefix) bool { return p.IsValid() && p.Bits() >= 20 }
	wide := s.Invert || !(narrow(s.Dst) || narrow(s.Src) || s.IIF != "" || s.OIF != "" || s.Mask != 0 ||
		s.TOS != 0 || s.IPProto != 0 || s.SPort.Set() || s.DPort.Set())
	switch {
	case !wide:
		return false
	case s.Action == fib.RuleBlackhole, s.Action == fib.RuleUnreachable, s.Action == fib.RuleProhibit:
		return true
	}
	return s.Action != fib.RuleNop && (!s.PrioritySet || s.Priority < fib.RuleL3mdevPriority)
}

func vrfEmuSpec(iif, oif string, table uint32) fib.RuleSpec {
	return fib.RuleSpec{Rule: fib.Rule{Priority: 1000, IIF: iif, OIF: oif, Table: table, SuppressPrefixLen: -1},
		PrioritySet: true, TableSet: true}
}

func vrfByName(name string) *kvrf {
	for i := range kernelVRFs {
		if kernelVRFs[i].name == name {
			return &kernelVRFs[i]
		}
	}
	return nil
}

// vrfOf is the VRF of a flow (nil: none).
func vrfOf(p *vprobe, portVRF map[string]*kvrf) *kvrf {
	switch {
	case p.vrf != "":
		return vrfByName(p.vrf)
	case portVRF[p.iif] != nil:
		return portVRF[p.iif]
	}
	return portVRF[p.oif]
}

// kernelBatch runs lines with ip -batch; every one must succeed.
func kernelBatch(t *testing.T, ns string, lines []string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "setup.batch")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := testenv.Output("ip", "-n", ns, "-batch", file); err != nil {
		t.Fatalf("ip -batch: %v\n%s\n%s", err, out, strings.Join(lines, "\n"))
	}
}

// vrfProbes are the rules test's flows, about half of them moved into the
// VRFs: input lookups from a port, output lookups through one and `vrf NAME`
// lookups (output flows keep a source only if it is one of the router's
// addresses, as the kernel requires).
func (g *rgen) vrfProbes(f *fib.FIB, ports []string, n int) []vprobe {
	var locals []netip.Addr
	for _, a := range f.Addresses() {
		locals = append(locals, a.Prefix.Addr())
	}
	outSrc := func(p *rprobe) {
		if !slices.Contains(locals, p.src) {
			p.src = netip.Addr{}
		}
		if !p.src.IsValid() && g.r.IntN(3) == 0 {
			p.src = locals[g.r.IntN(len(locals))]
		}
	}
	base := g.ruleProbes(f, n)
	probes := make([]vprobe, len(base))
	for i := range base {
		p := vprobe{rprobe: base[i]}
		switch k := g.r.IntN(20); {
		case k < 5: // input from a port
			p.iif, p.oif = ports[g.r.IntN(len(ports))], ""
			if !p.src.IsValid() {
				if g.r.IntN(3) == 0 {
					p.src = locals[g.r.IntN(len(locals))]
				} else {
					p.src = g.addr()
				}
			}
		case k < 8: // output through a port
			p.iif, p.oif = "", ports[g.r.IntN(len(ports))]
			outSrc(&p.rprobe)
		case k < 11: // vrf NAME
			p.iif, p.oif = "", ""
			p.vrf = kernelVRFs[g.r.IntN(len(kernelVRFs))].name
			outSrc(&p.rprobe)
		}
		if martian(p.dst) || p.src.IsValid() && martian(p.src) {
			p.src = netip.Addr{}
			if p.iif != "" {
				p.src = g.addr()
			}
		}
		probes[i] = p
	}
	return probes
}

// vrfModelRouteGet is modelRouteGet for flows of a VRF (see the top): no
// on-link answer for a failed output lookup through a port, no source
// validation for input from a port, and why "leaked source" where the
// kernel's source for a `vrf NAME` lookup comes from the VRF rather than
// the route.
func vrfModelRouteGet(f *fib.FIB, p *vprobe, portVRF map[string]*kvrf) (a routeAnswer, res fib.Result, why string) {
	if p.vrf == "" && portVRF[p.iif] == nil && portVRF[p.oif] == nil {
		return modelRouteGet(f, &p.rprobe)
	}
	q := p.query()
	q.VRF = p.vrf
	res, ok := f.LookupRouteFlow(q)
	a = answerOf(res, ok)
	forwards := a.typ == "unicast" || a.typ == "local" || a.typ == "broadcast"
	switch {
	case p.iif == "" && p.oif != "" && !forwards:
		return a, res, "l3mdev error"
	case p.vrf != "" && forwards && a.typ != "local" && !p.src.IsValid() &&
		(res.NH == nil || portVRF[res.NH.Dev] == nil || portVRF[res.NH.Dev].name != p.vrf):
		return a, res, "leaked source"
	}
	return a, res, ""
}
