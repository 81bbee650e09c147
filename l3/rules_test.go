package l3_test

// Policy routing on the datapath: source- and iif-based rules, rule
// actions (prohibit, blackhole, unreachable), random rule lists and flows
// compared with the FIB's reference walk (LookupRouteFlow), in trie and
// compiled mode, allocation-free forwarding with 0, 1 and 100 rules, and
// rules changing under traffic (-race).

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
	"github.com/netfwd/netfwd/wire"
)

// ruleTables are two tables with different default routes (100: the backup
// uplink eth3, 200: the uplink eth0) and a few routes of each kind.
const ruleTables = `
route add default via 198.51.100.1 dev eth3 table 100
route add 10.5.0.0/16 via 203.0.113.1 dev eth0 table 100
route add throw 10.66.0.0/16 table 100
route add unreachable 198.18.0.0/15 table 100
route add default via 203.0.113.1 dev eth0 table 200
route add blackhole 100.64.0.0/10 table 200
route add prohibit 8.8.8.0/24 table 200
route add 10.0.20.0/24 via 198.51.100.1 dev eth3 table 200
`

// newRuleRig is the engine rig with the rule tables, in trie or compiled
// mode.
func newRuleRig(t testing.TB, compiled bool) *rig {
	e := l3.NewEngine(l3.EngineOptions{Clock: l2.NewManualClock(), Compiled: compiled})
	r := setupRig(t, e, testConfig+ruleTables)
	// Every next hop the tests reach is resolved: outcomes never wait for ARP.
	for dev, a := range map[string]string{"eth0": "203.0.113.77", "eth3": "198.51.100.9", "vlan10": "10.0.10.9", "vlan20": "10.0.20.77"} {
		e.Router().SetNeighbor(dev, mustAddr(a), r.hw["uplink"])
	}
	return r
}

// rule is a RuleSpec for `rule add`: priority and table given, no
// suppress_prefixlength unless set.
func rule(prio uint32, action fib.RuleAction, table uint32, set func(*fib.Rule)) fib.RuleSpec {
	s := fib.RuleSpec{Rule: fib.Rule{Priority: prio, Action: action, Table: table, SuppressPrefixLen: -1},
		PrioritySet: true, ActionSet: true, TableSet: table != 0}
	if set != nil {
		set(&s.Rule)
	}
	return s
}

func addRules(t testing.TB, e *l3.Engine, specs ...fib.RuleSpec) {
	t.Helper()
	tx := e.FIB().Begin(len(specs))
	for _, s := range specs {
		if err := tx.AddRule(s); err != nil {
			tx.Abort()
			t.Fatalf("rule add %+v: %v", s.Rule, err)
		}
	}
	tx.Commit()
}

func delRule(t testing.TB, e *l3.Engine, s fib.RuleSpec) {
	t.Helper()
	tx := e.FIB().Begin(1)
	if err := tx.DelRule(s); err != nil {
		tx.Abort()
		t.Fatalf("rule del %+v: %v", s.Rule, err)
	}
	tx.Commit()
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// ingress is where a test frame enters: the interface, its port, the
// sender's MAC and the frame's VLAN tag.
type ingress struct {
	iface, port string
	host        string
	vid         uint16
}

var ingresses = []ingress{
	{"vlan10", "eth1", "h10", 0},
	{"vlan20", "eth2", "h20", 20},
	{"eth0", "eth0", "uplink", 0},
	{"eth3", "eth3", "backup", 0},
}

// portOf is the port an interface's frames leave by.
var portOf = map[string]string{"vlan10": "eth1", "vlan20": "eth2", "eth0": "eth0", "eth3": "eth3"}

// flowPkt is a test packet with every field a rule can select on.
type flowPkt struct {
	in           ingress
	src, dst     netip.Addr
	tos, proto   uint8
	sport, dport uint16
	mf           bool // a first fragment
}

func (p flowPkt) frame(r *rig) []byte {
	srcMAC, dstMAC := r.hw[p.in.host], r.mac(p.in.iface)
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr(srcMAC[:]), DstMAC: net.HardwareAddr(dstMAC[:]), EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, TOS: p.tos, Protocol: layers.IPProtocol(p.proto), Id: 7,
		SrcIP: p.src.AsSlice(), DstIP: p.dst.AsSlice()}
	if p.mf {
		ip.Flags = layers.IPv4MoreFragments
	}
	ls := []gopacket.SerializableLayer{eth}
	if p.in.vid != 0 {
		eth.EthernetType = layers.EthernetTypeDot1Q
		ls = append(ls, &layers.Dot1Q{VLANIdentifier: p.in.vid, Type: layers.EthernetTypeIPv4})
	}
	ls = append(ls, ip)
	switch p.proto {
	case wire.ProtoICMP:
		ls = append(ls, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: 9, Seq: 1})
	case wire.ProtoUDP:
		u := &layers.UDP{SrcPort: layers.UDPPort(p.sport), DstPort: layers.UDPPort(p.dport)}
		u.SetNetworkLayerForChecksum(ip)
		ls = append(ls, u)
	case wire.ProtoTCP:
		tc := &layers.TCP{SrcPort: layers.TCPPort(p.sport), DstPort: layers.TCPPort(p.dport), Seq: 1, SYN: true, Window: 1000}
		tc.SetNetworkLayerForChecksum(ip)
		ls = append(ls, tc)
	case 132: // SCTP: the common header's ports
		ls = append(ls, gopacket.Payload([]byte{byte(p.sport >> 8), byte(p.sport), byte(p.dport >> 8), byte(p.dport), 0, 0, 0, 0, 0, 0, 0, 0}))
	}
	ls = append(ls, gopacket.Payload(make([]byte, 16)))
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		r.t.Fatal(err)
	}
	return slices.Clone(buf.Bytes())
}

// query is the reference's question for p: an input lookup on p's
// interface, with the ports a rule sees (none for fragments).
func (p flowPkt) query() fib.FlowQuery {
	q := fib.FlowQuery{Dst: p.dst, Src: p.src, IIF: p.in.iface, TOS: p.tos, Proto: p.proto, SPort: p.sport, DPort: p.dport}
	if p.mf || p.proto == wire.ProtoICMP {
		q.SPort, q.DPort = 0, 0
	}
	return q
}

// outcome is what became of one packet: "via PORT" (forwarded, or queued
// with its ARP request out of PORT), "local", or the drop reason.
func outcome(r *rig, p flowPkt) (string, map[string][]gopacket.Packet) {
	r.t.Helper()
	r.w.Receive(r.e.Domain().Port(p.in.port), [][]byte{p.frame(r)})
	c := r.w.Pending()
	out := map[string][]gopacket.Packet{}
	r.w.Flush(func(port *l2.Port, frames [][]byte) {
		for _, f := range frames {
			out[port.Name] = append(out[port.Name], gopacket.NewPacket(slices.Clone(f), layers.LayerTypeEthernet, gopacket.Default))
		}
	})
	switch {
	case c.Forwarded+c.Queued == 1:
		ports := make([]string, 0, len(out))
		for port := range out {
			ports = append(ports, port)
		}
		slices.Sort(ports)
		return "via " + strings.Join(ports, ","), out
	case c.Local == 1 || c.Drops["local_protocol"] == 1 || c.Drops["local_icmp"] == 1 || c.Drops["local_fragment"] == 1:
		return "local", out
	}
	for reason, n := range c.Drops {
		if n == 1 {
			return reason, out
		}
	}
	return fmt.Sprintf("?%+v", c), out
}

// expected is the outcome the reference walk gives for p.
func expected(r *rig, p flowPkt) string {
	res, ok := r.e.FIB().LookupRouteFlow(p.query())
	if !ok {
		return "no_route"
	}
	switch res.Route.Type {
	case fib.Unicast:
		return "via " + portOf[res.NH.Dev]
	case fib.Local:
		return "local"
	case fib.Broadcast:
		return "broadcast"
	case fib.Blackhole:
		return "blackhole"
	case fib.Unreachable:
		return "unreachable"
	case fib.Prohibit:
		return "prohibit"
	}
	return "type " + res.Route.Type.String()
}

func udp(in ingress, src, dst string) flowPkt {
	return flowPkt{in: in, src: netip.MustParseAddr(src), dst: netip.MustParseAddr(dst), proto: wire.ProtoUDP, sport: 33434, dport: 53}
}

// forEachMode runs f on a rig in trie and in compiled mode.
func forEachMode(t *testing.T, f func(t *testing.T, r *rig)) {
	for _, compiled := range []bool{false, true} {
		t.Run(fmt.Sprintf("compiled=%v", compiled), func(t *testing.T) { f(t, newRuleRig(t, compiled)) })
	}
}

func want(t *testing.T, r *rig, p flowPkt, w string) {
	t.Helper()
	got, out := outcome(r, p)
	if got != w {
		t.Fatalf("%v %v -> %v on %s: %s, want %s\n%s", p.in.iface, p.src, p.dst, p.in.port, got, w, summary(out))
	}
	if e := expected(r, p); e != w {
		t.Fatalf("%v -> %v: the reference says %s, want %s", p.src, p.dst, e, w)
	}
}

// Two sources, `from` rules to two tables with different default routes:
// their packets leave on different ports; without the rules both take
// main's default (eth0).
func TestRuleSourceRouting(t *testing.T) {
	forEachMode(t, func(t *testing.T, r *rig) {
		v10, v20 := ingresses[0], ingresses[1]
		from10 := rule(100, fib.RuleLookup, 100, func(r *fib.Rule) { r.Src = pfx("10.0.10.0/24") })
		from20 := rule(200, fib.RuleLookup, 200, func(r *fib.Rule) { r.Src = pfx("10.0.20.0/24") })
		addRules(t, r.e, from10, from20)
		want(t, r, udp(v10, "10.0.10.5", "9.9.9.9"), "via eth3")
		want(t, r, udp(v20, "10.0.20.5", "9.9.9.9"), "via eth0")
		// Table 200 sends 10.0.20.0/24 (its own subnet) via eth3; table 100
		// has no route there, nor does anything but main: h10 reaches h20.
		want(t, r, udp(v20, "10.0.20.5", "10.0.20.77"), "via eth3")
		want(t, r, udp(v10, "10.0.10.5", "10.0.20.5"), "via eth3") // table 100's default
		// Local addresses still answer first (rule 0: lookup local).
		want(t, r, udp(v10, "10.0.10.5", "10.0.20.1"), "local")
		// A source no rule selects: main.
		want(t, r, udp(ingresses[3], "8.8.8.8", "9.9.9.9"), "via eth0")
		// The router's own packets are routed with their source: an echo
		// reply from 10.0.10.1 is selected by from10 too, and table 100
		// has no route to 10.0.10.5 but its default (eth3), as in Linux.
		echo := flowPkt{in: v10, src: netip.MustParseAddr("10.0.10.5"), dst: netip.MustParseAddr("10.0.10.1"), proto: wire.ProtoICMP}
		if got, out := outcome(r, echo); got != "local" || len(out["eth3"]) != 1 {
			t.Fatalf("echo reply: %s\n%s", got, summary(out))
		}
		delRule(t, r.e, from10)
		delRule(t, r.e, from20)
		want(t, r, udp(v10, "10.0.10.5", "9.9.9.9"), "via eth0")
		want(t, r, udp(v20, "10.0.20.5", "9.9.9.9"), "via eth0")
		if got, out := outcome(r, echo); got != "local" || len(out["eth1"]) != 1 {
			t.Fatalf("echo reply without rules: %s\n%s", got, summary(out))
		}
	})
}

// iif rules select by the ingress interface (a VLAN interface, a routed
// port), `not iif` by all the others.
func TestRuleIIF(t *testing.T) {
	forEachMode(t, func(t *testing.T, r *rig) {
		addRules(t, r.e,
			rule(100, fib.RuleLookup, 100, func(r *fib.Rule) { r.IIF = "vlan20" }),
			rule(110, fib.RuleLookup, 200, func(r *fib.Rule) { r.IIF = "eth0"; r.Invert = true }))
		// The same source and destination, two ingress interfaces: table
		// 100's default (eth3), table 200's (eth0).
		want(t, r, udp(ingresses[1], "10.0.20.5", "9.9.9.9"), "via eth3")
		want(t, r, udp(ingresses[0], "10.0.20.5", "9.9.9.9"), "via eth0")
		// To h20's subnet: table 200 sends it via eth3, except from eth0
		// (main: the connected route on vlan20).
		want(t, r, udp(ingresses[0], "10.0.10.5", "10.0.20.77"), "via eth3")
		want(t, r, udp(ingresses[3], "8.8.8.8", "10.0.20.77"), "via eth3")
		want(t, r, udp(ingresses[2], "8.8.8.8", "10.0.20.77"), "via eth2")
	})
}

// Rule actions: prohibit answers administratively prohibited, blackhole
// drops silently, unreachable answers network unreachable (Linux's
// ip_error for -EACCES, -EINVAL, -ENETUNREACH).
func TestRuleActions(t *testing.T) {
	forEachMode(t, func(t *testing.T, r *rig) {
		addRules(t, r.e,
			rule(100, fib.RuleProhibit, 0, func(r *fib.Rule) {
				r.Src = pfx("10.0.10.0/24")
				r.IPProto = wire.ProtoUDP
				r.DPort = fib.PortRange{Lo: 53, Hi: 53}
			}),
			rule(101, fib.RuleBlackhole, 0, func(r *fib.Rule) { r.IPProto = wire.ProtoTCP; r.DPort = fib.PortRange{Lo: 22, Hi: 22} }),
			rule(102, fib.RuleUnreachable, 0, func(r *fib.Rule) { r.Dst = pfx("9.9.9.0/24"); r.IIF = "vlan20" }))
		v10 := ingresses[0]
		before := r.e.Stats()
		got, out := outcome(r, udp(v10, "10.0.10.5", "9.9.9.9"))
		if got != "prohibit" {
			t.Fatalf("prohibit rule: %s", got)
		}
		icmp := only(t, out, "eth1").Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
		if icmp.TypeCode != layers.CreateICMPv4TypeCode(layers.ICMPv4TypeDestinationUnreachable, layers.ICMPv4CodeCommAdminProhibited) {
			t.Fatalf("prohibit rule answered %v", icmp.TypeCode)
		}
		// Another port: forwarded by main.
		p := udp(v10, "10.0.10.5", "9.9.9.9")
		p.dport = 54
		want(t, r, p, "via eth0")
		// TCP to port 22: silent; to 23: forwarded.
		tcp := flowPkt{in: v10, src: netip.MustParseAddr("10.0.10.5"), dst: netip.MustParseAddr("9.9.9.9"), proto: wire.ProtoTCP, sport: 40000, dport: 22}
		if got, out := outcome(r, tcp); got != "blackhole" || len(out) != 0 {
			t.Fatalf("blackhole rule: %s\n%s", got, summary(out))
		}
		tcp.dport = 23
		want(t, r, tcp, "via eth0")
		// A first fragment has no ports for rules (the kernel's flow dissector).
		tcp.dport, tcp.mf = 22, true
		want(t, r, tcp, "via eth0")
		// unreachable: network unreachable, counted as no route.
		got, out = outcome(r, udp(ingresses[1], "10.0.20.5", "9.9.9.9"))
		if got != "no_route" {
			t.Fatalf("unreachable rule: %s", got)
		}
		icmp = only(t, out, "eth2").Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
		if icmp.TypeCode != layers.CreateICMPv4TypeCode(layers.ICMPv4TypeDestinationUnreachable, layers.ICMPv4CodeNet) {
			t.Fatalf("unreachable rule answered %v", icmp.TypeCode)
		}
		st := r.e.Stats()
		if st.Drops["prohibit"]-before.Drops["prohibit"] != 1 || st.Drops["blackhole"]-before.Drops["blackhole"] != 1 ||
			st.Drops["no_route"]-before.Drops["no_route"] != 1 ||
			st.ICMPSent["admin_prohibited"]-before.ICMPSent["admin_prohibited"] != 1 || st.ICMPSent["net_unreachable"]-before.ICMPSent["net_unreachable"] != 1 {
			t.Fatalf("counters: drops %v, icmp %v", st.Drops, st.ICMPSent)
		}
	})
}

// The router's own packets are output lookups (iif lo): a rule for iif lo
// steers them and no transit packet; a blackhole rule for them is an
// output error.
func TestRuleRouterOutput(t *testing.T) {
	forEachMode(t, func(t *testing.T, r *rig) {
		lo := rule(100, fib.RuleLookup, 100, func(r *fib.Rule) { r.IIF = "lo" })
		addRules(t, r.e, lo)
		// An error about a transit packet to h10 (prohibit route 10.68/16):
		// the error takes table 100's default (eth3), the transit packets
		// are untouched.
		v10 := ingresses[0]
		got, out := outcome(r, udp(v10, "10.0.10.5", "10.68.1.1"))
		if got != "prohibit" || len(out["eth3"]) != 1 || len(out) != 1 {
			t.Fatalf("error with iif lo rule: %s\n%s", got, summary(out))
		}
		want(t, r, udp(v10, "10.0.10.5", "9.9.9.9"), "via eth0")
		delRule(t, r.e, lo)
		addRules(t, r.e, rule(100, fib.RuleBlackhole, 0, func(r *fib.Rule) { r.IIF = "lo" }))
		before := r.e.Stats().OutputErrors
		echo := flowPkt{in: v10, src: netip.MustParseAddr("10.0.10.5"), dst: netip.MustParseAddr("10.0.10.1"), proto: wire.ProtoICMP}
		if got, out := outcome(r, echo); got != "local" || len(out) != 0 {
			t.Fatalf("echo with iif lo blackhole: %s\n%s", got, summary(out))
		}
		if n := r.e.Stats().OutputErrors - before; n != 1 {
			t.Fatalf("%d output errors, want 1", n)
		}
	})
}

// randomRule is one random rule over the rig's addresses, interfaces,
// tables and the test packets' fields.
func randomRule(rng *rand.Rand) fib.RuleSpec {
	prefixes := []string{"10.0.10.0/24", "10.0.20.0/24", "10.0.0.0/8", "8.8.8.0/24", "9.9.9.9/32", "198.18.0.0/15", "10.5.0.0/16", "0.0.0.0/1"}
	s := fib.RuleSpec{Rule: fib.Rule{SuppressPrefixLen: -1}}
	if rng.IntN(4) > 0 {
		s.Priority, s.PrioritySet = 1+rng.Uint32N(400), true
	}
	if rng.IntN(3) == 0 {
		s.Src = pfx(prefixes[rng.IntN(len(prefixes))])
	}
	if rng.IntN(3) == 0 {
		s.Dst = pfx(prefixes[rng.IntN(len(prefixes))])
	}
	if rng.IntN(4) == 0 {
		s.IIF = []string{"vlan10", "vlan20", "eth0", "eth3", "lo"}[rng.IntN(5)]
	}
	if rng.IntN(6) == 0 {
		s.TOS = []uint8{0x04, 0x08, 0x10, 0x18}[rng.IntN(4)]
	}
	if rng.IntN(5) == 0 {
		s.IPProto = []uint8{wire.ProtoTCP, wire.ProtoUDP, wire.ProtoICMP, 132}[rng.IntN(4)]
	}
	if rng.IntN(5) == 0 {
		lo := uint16(rng.IntN(3)) * 1000
		s.DPort = fib.PortRange{Lo: lo, Hi: lo + uint16(rng.IntN(1500))}
	}
	if rng.IntN(6) == 0 {
		lo := uint16(rng.IntN(3)) * 20000
		s.SPort = fib.PortRange{Lo: lo, Hi: lo + uint16(rng.IntN(20000))}
	}
	s.Invert = rng.IntN(10) == 0
	s.ActionSet = true
	switch n := rng.IntN(20); {
	case n < 11:
		s.Action = fib.RuleLookup
		s.Table, s.TableSet = []uint32{100, 200, 100, 200, fib.TableMain, fib.TableLocal, 300}[rng.IntN(7)], true
		if rng.IntN(6) == 0 {
			s.SuppressPrefixLen = rng.IntN(25)
		}
	case n < 13:
		s.Action = fib.RuleBlackhole
	case n < 15:
		s.Action = fib.RuleProhibit
	case n < 17:
		s.Action = fib.RuleUnreachable
	case n < 18:
		s.Action = fib.RuleNop
	default:
		s.Action = fib.RuleGoto
		if !s.PrioritySet {
			s.Priority, s.PrioritySet = 1+rng.Uint32N(400), true
		}
		s.Goto = s.Priority + 1 + rng.Uint32N(200)
	}
	return s
}

func randomPkt(rng *rand.Rand) flowPkt {
	srcs := []string{"10.0.10.5", "10.0.10.9", "10.0.20.5", "10.0.20.77", "8.8.8.8", "9.9.9.9", "198.18.3.4", "203.0.113.50", "10.5.4.4", "192.0.2.33"}
	dsts := []string{"10.0.10.5", "10.0.10.9", "10.0.20.5", "10.0.20.77", "10.0.10.1", "10.0.20.255", "203.0.113.77", "198.51.100.9",
		"8.8.8.8", "8.8.4.4", "9.9.9.9", "198.18.0.1", "10.5.0.1", "10.66.1.1", "10.67.1.1", "10.68.1.1", "100.64.0.1", "10.99.0.1", "172.16.0.1"}
	p := flowPkt{in: ingresses[rng.IntN(len(ingresses))],
		src: netip.MustParseAddr(srcs[rng.IntN(len(srcs))]), dst: netip.MustParseAddr(dsts[rng.IntN(len(dsts))]),
		tos:   []uint8{0, 0, 0x04, 0x08, 0x10, 0xb8}[rng.IntN(6)],
		proto: []uint8{wire.ProtoUDP, wire.ProtoTCP, wire.ProtoICMP, 132}[rng.IntN(4)],
		sport: uint16(rng.IntN(60000)), dport: uint16(rng.IntN(3000)),
		mf: rng.IntN(8) == 0,
	}
	return p
}

// Random rule lists and random flows: every packet's outcome is the one
// the reference walk (FIB.LookupRouteFlow with the same selectors) gives.
func TestRuleFlowsMatchReference(t *testing.T) {
	forEachMode(t, func(t *testing.T, r *rig) {
		rng := rand.New(rand.NewPCG(29, 1))
		r.e.Router().SetNeighbor("vlan10", mustAddr("10.0.10.9"), r.hw["h10"])
		lists, pkts := 60, 40
		if testing.Short() {
			lists = 15
		}
		counts := map[string]int{}
		for l := 0; l < lists; l++ {
			tx := r.e.FIB().Begin(1)
			tx.SetRules(fib.DefaultRules())
			for n := 1 + rng.IntN(8); n > 0; n-- {
				tx.AddRule(randomRule(rng)) // duplicates and invalid ones are refused
			}
			tx.Commit()
			for i := 0; i < pkts; i++ {
				p := randomPkt(rng)
				l3off := 14
				if p.in.vid != 0 {
					l3off += 4
				}
				if q, ok := l3.RouteQuery(p.frame(r)[l3off:], p.in.iface); !ok || q != p.query() {
					t.Fatalf("RouteQuery %+v, want %+v", q, p.query())
				}
				got, out := outcome(r, p)
				if w := expected(r, p); got != w {
					t.Fatalf("list %d packet %d: %+v\n%s, the reference says %s\nrules:\n%s\n%s", l, i, p, got, w, ruleDump(r.e), summary(out))
				}
				counts[got]++
			}
		}
		t.Logf("outcomes: %v", counts)
		if len(counts) < 8 {
			t.Fatalf("too few kinds of outcome: %v", counts)
		}
	})
}

func ruleDump(e *l3.Engine) string {
	var b strings.Builder
	for _, r := range e.FIB().Rules() {
		fmt.Fprintf(&b, "%d: not=%v from %v to %v iif %q tos %#x proto %d sport %v dport %v %v table %d goto %d suppress %d\n",
			r.Priority, r.Invert, r.Src, r.Dst, r.IIF, r.TOS, r.IPProto, r.SPort, r.DPort, r.Action, r.Table, r.Goto, r.SuppressPrefixLen)
	}
	return b.String()
}

// Rules change while a worker forwards (run with -race): every packet is
// forwarded by one list or the other, nothing else happens.
func TestRulesChangeUnderTraffic(t *testing.T) {
	r := newRuleRig(t, false)
	from10 := rule(100, fib.RuleLookup, 100, func(r *fib.Rule) { r.Src = pfx("10.0.10.0/24") })
	frame := udp(ingresses[0], "10.0.10.5", "9.9.9.9").frame(r)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tx := r.e.FIB().Begin(1)
			var err error
			if i%2 == 0 {
				err = tx.AddRule(from10)
			} else {
				err = tx.DelRule(from10)
			}
			tx.Commit()
			if err != nil {
				t.Error(err)
				return
			}
		}
	}()
	port := r.e.Domain().Port("eth1")
	buf := make([]byte, len(frame))
	counts := map[string]int{}
	for i := 0; i < 3000; i++ {
		copy(buf, frame)
		r.w.Receive(port, [][]byte{buf})
		r.w.Flush(func(p *l2.Port, frames [][]byte) { counts[p.Name] += len(frames) })
	}
	close(stop)
	wg.Wait()
	if counts["eth0"]+counts["eth3"] != 3000 || len(counts) > 2 {
		t.Fatalf("frames out: %v", counts)
	}
	t.Logf("frames out: %v", counts)
}

// manyRules are n custom rules no test packet of the allocation test and
// the benchmark matches: the walk checks every one, then the merged local
// and main lookup answers.
func manyRules(n int) []fib.RuleSpec {
	specs := make([]fib.RuleSpec, n)
	for i := range specs {
		prio := uint32(100 + i)
		switch i % 4 {
		case 0:
			specs[i] = rule(prio, fib.RuleLookup, 100, func(r *fib.Rule) { r.Src = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(100 + i/4), 0, 0}), 16) })
		case 1:
			specs[i] = rule(prio, fib.RuleLookup, 200, func(r *fib.Rule) { r.IIF = "eth3"; r.Dst = pfx("9.9.9.0/24") })
		case 2:
			specs[i] = rule(prio, fib.RuleProhibit, 0, func(r *fib.Rule) { r.IPProto = wire.ProtoTCP; r.DPort = fib.PortRange{Lo: uint16(i), Hi: uint16(i)} })
		default:
			specs[i] = rule(prio, fib.RuleBlackhole, 0, func(r *fib.Rule) { r.TOS = 0x10; r.Src = pfx("10.0.0.0/8") })
		}
	}
	return specs
}

// BenchmarkForwardRules forwards batches of 32 frames (SVI to SVI, 32
// destinations) with Linux's default rules and with 1 and 100 custom rules
// no packet matches, and with one every packet matches: ns/op is per
// packet.
func BenchmarkForwardRules(b *testing.B) {
	for _, compiled := range []bool{false, true} {
		for _, c := range []struct {
			name  string
			rules []fib.RuleSpec
		}{{"rules=0", nil}, {"rules=1", manyRules(1)}, {"rules=100", manyRules(100)}, {"rules=1-matching", []fib.RuleSpec{matchAllRule}}} {
			b.Run(fmt.Sprintf("compiled=%v/%s", compiled, c.name), func(b *testing.B) {
				r := setupRig(b, l3.NewEngine(l3.EngineOptions{Clock: l2.NewManualClock(), Compiled: compiled}), testConfig+allocsTable)
				addRules(b, r.e, c.rules...)
				const n = 32
				srcs, bufs := make([][]byte, n), make([][]byte, n)
				for i := range srcs {
					dst := fmt.Sprintf("10.0.20.%d", 10+i)
					r.e.Router().SetNeighbor("vlan20", mustAddr(dst), r.hw["h20"])
					srcs[i] = pkt{srcMAC: r.hw["h10"], dstMAC: r.mac("vlan10"), src: "10.0.10.5", dst: dst, ttl: 64, proto: layers.IPProtocolUDP, payload: 18}.bytes(b)
					bufs[i] = make([]byte, len(srcs[i]))
				}
				port := r.e.Domain().Port("eth1")
				sent := 0
				sink := func(p *l2.Port, frames [][]byte) { sent += len(frames) }
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i += n {
					for j := range bufs {
						copy(bufs[j], srcs[j])
					}
					r.w.Receive(port, bufs)
					r.w.Flush(sink)
				}
				if sent < b.N {
					b.Fatalf("%d of %d sent", sent, b.N)
				}
			})
		}
	}
}

// The router's own packets walk the rules allocation-free too: echo
// replies (not rate limited) with 100 rules, one of them `iif lo` that
// steers them.
func TestRuleOutputAllocs(t *testing.T) {
	r := newRuleRig(t, false)
	addRules(t, r.e, manyRules(100)...)
	addRules(t, r.e, rule(99, fib.RuleLookup, 100, func(r *fib.Rule) { r.IIF = "lo" }))
	src := flowPkt{in: ingresses[0], src: netip.MustParseAddr("10.0.10.5"), dst: netip.MustParseAddr("10.0.10.1"), proto: wire.ProtoICMP}.frame(r)
	buf := make([]byte, len(src))
	batch, port := [][]byte{buf}, r.e.Domain().Port("eth1")
	out := 0
	sink := func(p *l2.Port, frames [][]byte) {
		if p.Name == "eth3" { // table 100's default
			out += len(frames)
		}
	}
	runs := 0
	n := testing.AllocsPerRun(1000, func() {
		copy(buf, src)
		r.w.Receive(port, batch)
		r.w.Flush(sink)
		runs++
	})
	if n != 0 {
		t.Errorf("%.1f allocations per echo reply", n)
	}
	if out != runs {
		t.Errorf("%d echo requests, %d replies out of eth3", runs, out)
	}
}
