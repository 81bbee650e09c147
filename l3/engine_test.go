package l3_test

import (
	"net"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/apply"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
	"github.com/netfwd/netfwd/wire"
)

const testConfig = `
link add br0 type bridge vlan_filtering 1
link set eth1 master br0
link set eth2 master br0
bridge vlan add dev eth1 vid 10 pvid untagged
bridge vlan add dev eth2 vid 20
link add link br0 name vlan10 type vlan id 10
link add link br0 name vlan20 type vlan id 20
address add 10.0.10.1/24 dev vlan10
address add 10.0.20.1/24 dev vlan20
address add 203.0.113.2/24 dev eth0
route add default via 203.0.113.1 dev eth0
address add 198.51.100.2/24 dev eth3
route add default via 198.51.100.1 dev eth3 metric 200
route add 192.0.2.0/24 nexthop via 203.0.113.1 nexthop via 198.51.100.1
route add blackhole 10.66.0.0/16
route add unreachable 10.67.0.0/16
route add prohibit 10.68.0.0/16
link set eth0 mtu 1400
`

type rig struct {
	t  testing.TB
	e  *l3.Engine
	c  *apply.Controller
	w  *l3.Worker
	hw map[string]wire.MAC // host MACs
}

func newRig(t testing.TB) *rig {
	return setupRig(t, l3.NewEngine(l3.EngineOptions{Clock: l2.NewManualClock()}), testConfig)
}

// setupRig applies conf to e and adds the hosts and their neighbours.
func setupRig(t testing.TB, e *l3.Engine, conf string) *rig {
	c := apply.New(e)
	cmds, errs := config.Parse("test.conf", strings.NewReader(conf))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := c.Apply(cmds); err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, e: e, c: c, w: e.NewWorker(), hw: map[string]wire.MAC{
		"uplink": wire.MustParseMAC("02:00:00:00:00:01"),
		"h10":    wire.MustParseMAC("02:00:00:00:10:05"),
		"h20":    wire.MustParseMAC("02:00:00:00:20:05"),
		"backup": wire.MustParseMAC("02:00:00:00:00:02"),
	}}
	e.Router().SetNeighbor("eth3", mustAddr("198.51.100.1"), r.hw["backup"])
	e.Router().SetNeighbor("eth0", mustAddr("203.0.113.1"), r.hw["uplink"])
	e.Router().SetNeighbor("vlan10", mustAddr("10.0.10.5"), r.hw["h10"])
	e.Router().SetNeighbor("vlan20", mustAddr("10.0.20.5"), r.hw["h20"])
	return r
}

func (r *rig) mac(iface string) wire.MAC { return r.e.Router().Iface(iface).MAC }

type pkt struct {
	srcMAC, dstMAC wire.MAC
	vid            uint16
	src, dst       string
	ttl            uint8
	proto          layers.IPProtocol
	df             bool
	payload        int
	icmpType       uint8
}

func (p pkt) bytes(t testing.TB) []byte {
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr(p.srcMAC[:]), DstMAC: net.HardwareAddr(p.dstMAC[:]), EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: p.ttl, Protocol: p.proto, Id: 1,
		SrcIP: net.ParseIP(p.src).To4(), DstIP: net.ParseIP(p.dst).To4()}
	if p.df {
		ip.Flags = layers.IPv4DontFragment
	}
	ls := []gopacket.SerializableLayer{eth}
	if p.vid != 0 {
		eth.EthernetType = layers.EthernetTypeDot1Q
		ls = append(ls, &layers.Dot1Q{VLANIdentifier: p.vid, Type: layers.EthernetTypeIPv4})
	}
	ls = append(ls, ip)
	switch p.proto {
	case layers.IPProtocolICMPv4:
		ls = append(ls, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(p.icmpType, 0), Id: 9, Seq: 1})
	case layers.IPProtocolUDP:
		u := &layers.UDP{SrcPort: 33434, DstPort: 33435}
		u.SetNetworkLayerForChecksum(ip)
		ls = append(ls, u)
	case layers.IPProtocolTCP:
		tc := &layers.TCP{SrcPort: 40000, DstPort: 22, Seq: 1000, SYN: true, Window: 1000}
		tc.SetNetworkLayerForChecksum(ip)
		ls = append(ls, tc)
	}
	ls = append(ls, gopacket.Payload(make([]byte, p.payload)))
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// run feeds frames on a port and returns what left, per port.
func (r *rig) run(port string, frames ...[]byte) map[string][]gopacket.Packet {
	p := r.e.Domain().Port(port)
	if p == nil {
		r.t.Fatalf("no port %s", port)
	}
	r.w.Receive(p, frames)
	out := map[string][]gopacket.Packet{}
	r.w.Flush(func(p *l2.Port, frames [][]byte) {
		for _, f := range frames {
			out[p.Name] = append(out[p.Name], gopacket.NewPacket(append([]byte(nil), f...), layers.LayerTypeEthernet, gopacket.Default))
		}
	})
	return out
}

func mustAddr(s string) netipAddr { return parseAddr(s) }

func only(t *testing.T, out map[string][]gopacket.Packet, port string) gopacket.Packet {
	t.Helper()
	if len(out) != 1 || len(out[port]) != 1 {
		t.Fatalf("want one frame on %s, got %v", port, summary(out))
	}
	return out[port][0]
}

func summary(out map[string][]gopacket.Packet) string {
	var b strings.Builder
	for p, fs := range out {
		for _, f := range fs {
			b.WriteString(p + ": " + f.String() + "\n")
		}
	}
	return b.String()
}

func TestRouteBetweenVLANs(t *testing.T) {
	r := newRig(t)
	in := pkt{srcMAC: r.hw["h10"], dstMAC: r.mac("vlan10"), src: "10.0.10.5", dst: "10.0.20.5", ttl: 64, proto: layers.IPProtocolUDP, payload: 20}
	out := r.run("eth1", in.bytes(t))
	p := only(t, out, "eth2")
	eth := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	q, ok := p.Layer(layers.LayerTypeDot1Q).(*layers.Dot1Q)
	if !ok || q.VLANIdentifier != 20 {
		t.Fatalf("not tagged 20: %v", p)
	}
	ip := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if wire.MAC(eth.DstMAC) != r.hw["h20"] || wire.MAC(eth.SrcMAC) != r.mac("vlan20") || ip.TTL != 63 {
		t.Fatalf("rewrite wrong: %v", p)
	}
	if p.ErrorLayer() != nil {
		t.Fatal(p.ErrorLayer().Error())
	}
	if wire.Checksum(ip.Contents) != 0 {
		t.Fatal("ip checksum")
	}
}

func TestRouteToUplinkAndBack(t *testing.T) {
	r := newRig(t)
	in := pkt{srcMAC: r.hw["h20"], dstMAC: r.mac("vlan20"), vid: 20, src: "10.0.20.5", dst: "8.8.8.8", ttl: 5, proto: layers.IPProtocolUDP, payload: 20}
	p := only(t, r.run("eth2", in.bytes(t)), "eth0")
	eth := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	if wire.MAC(eth.DstMAC) != r.hw["uplink"] || eth.EthernetType != layers.EthernetTypeIPv4 || p.Layer(layers.LayerTypeIPv4).(*layers.IPv4).TTL != 4 {
		t.Fatalf("%v", p)
	}
	back := pkt{srcMAC: r.hw["uplink"], dstMAC: r.mac("eth0"), src: "8.8.8.8", dst: "10.0.10.5", ttl: 50, proto: layers.IPProtocolUDP, payload: 20}
	p = only(t, r.run("eth0", back.bytes(t)), "eth1")
	if p.Layer(layers.LayerTypeDot1Q) != nil {
		t.Fatalf("untagged port got a tag: %v", p)
	}
}

func TestICMPErrorsAndEcho(t *testing.T) {
	r := newRig(t)
	cases := []struct {
		name      string
		dst       string
		ttl       uint8
		typ, code uint8
	}{
		{"ttl", "8.8.8.8", 1, 11, 0},
		{"unreachable", "10.67.1.1", 64, 3, 1},
		{"prohibit", "10.68.1.1", 64, 3, 13},
		{"udp to router", "10.0.10.1", 64, 3, 3},
	}
	for _, c := range cases {
		in := pkt{srcMAC: r.hw["h10"], dstMAC: r.mac("vlan10"), src: "10.0.10.5", dst: c.dst, ttl: c.ttl, proto: layers.IPProtocolUDP, payload: 8}
		p := only(t, r.run("eth1", in.bytes(t)), "eth1")
		icmp, ok := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
		ip := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		if !ok || icmp.TypeCode.Type() != c.typ || icmp.TypeCode.Code() != c.code || ip.DstIP.String() != "10.0.10.5" || ip.SrcIP.String() != "10.0.10.1" {
			t.Errorf("%s: got %v", c.name, p)
		}
	}
	// blackhole: silent
	in := pkt{srcMAC: r.hw["h10"], dstMAC: r.mac("vlan10"), src: "10.0.10.5", dst: "10.66.0.1", ttl: 64, proto: layers.IPProtocolUDP}
	if out := r.run("eth1", in.bytes(t)); len(out) != 0 {
		t.Errorf("blackhole answered: %v", summary(out))
	}
	// ping the router
	echo := pkt{srcMAC: r.hw["h20"], dstMAC: r.mac("vlan20"), vid: 20, src: "10.0.20.5", dst: "10.0.10.1", ttl: 64, proto: layers.IPProtocolICMPv4, icmpType: 8, payload: 32}
	p := only(t, r.run("eth2", echo.bytes(t)), "eth2")
	icmp := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	if icmp.TypeCode.Type() != 0 || icmp.Id != 9 || len(icmp.Payload) != 32 {
		t.Fatalf("echo reply: %v", p)
	}
	// too big with DF toward the 1400-byte uplink: fragmentation needed, MTU 1400
	big := pkt{srcMAC: r.hw["h10"], dstMAC: r.mac("vlan10"), src: "10.0.10.5", dst: "8.8.8.8", ttl: 64, proto: layers.IPProtocolUDP, payload: 1450, df: true}
	p = only(t, r.run("eth1", big.bytes(t)), "eth1")
	icmp = p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	if icmp.TypeCode != layers.CreateICMPv4TypeCode(3, 4) || icmp.Seq != 1400 {
		t.Fatalf("frag needed: %v", p)
	}
	// and without DF: fragments
	big.df = false
	out := r.run("eth1", big.bytes(t))
	if len(out["eth0"]) != 2 {
		t.Fatalf("fragments: %v", summary(out))
	}
	st := r.e.Stats()
	if st.ICMPSent["ttl_exceeded"] != 1 || st.Drops["blackhole"] != 1 || st.Fragmented != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Forwarding allocates nothing per packet, with Linux's default rules (the
// batch's merged lookups) and with custom rules (each packet's flow walks
// them): one rule, 100 rules no packet matches, one rule every packet
// matches (its table answers), in trie and compiled mode.
func TestForwardAllocs(t *testing.T) {
	for _, c := range []struct {
		name     string
		rules    []fib.RuleSpec
		compiled bool
	}{
		{"default rules", nil, false},
		{"1 rule", manyRules(1), false},
		{"100 rules", manyRules(100), false},
		{"1 matching rule", []fib.RuleSpec{matchAllRule}, false},
		{"compiled/default rules", nil, true},
		{"compiled/100 rules", manyRules(100), true},
		{"compiled/1 matching rule", []fib.RuleSpec{matchAllRule}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := setupRig(t, l3.NewEngine(l3.EngineOptions{Clock: l2.NewManualClock(), Compiled: c.compiled}), testConfig+allocsTable)
			addRules(t, r.e, c.rules...)
			if got := r.e.FIB().HasCustomRules(); got != (len(c.rules) > 0) {
				t.Fatalf("HasCustomRules %v", got)
			}
			q := fib.FlowQuery{Dst: mustAddr("10.0.20.5"), Src: mustAddr("10.0.10.5"), IIF: "vlan10"}
			matching := len(c.rules) == 1 && c.rules[0].Invert
			if res, _ := r.e.FIB().LookupRouteFlow(q); (res.Table == 100) != matching {
				t.Fatalf("the reference answers from table %d", res.Table)
			}
			forwardAllocs(t, r)
		})
	}
}

// allocsTable is table 100 for matchAllRule: h20's subnet only.
const allocsTable = "route add 10.0.20.0/24 dev vlan20 table 100\n"

// matchAllRule selects every packet (not from a subnet nobody uses) and
// sends it to table 100.
var matchAllRule = rule(50, fib.RuleLookup, 100, func(r *fib.Rule) { r.Src = pfx("10.200.0.0/16"); r.Invert = true })

func forwardAllocs(t *testing.T, r *rig) {
	frame := pkt{srcMAC: r.hw["h10"], dstMAC: r.mac("vlan10"), src: "10.0.10.5", dst: "10.0.20.5", ttl: 64, proto: layers.IPProtocolUDP, payload: 18}.bytes(t)
	up := pkt{srcMAC: r.hw["uplink"], dstMAC: r.mac("eth0"), src: "8.8.8.8", dst: "10.0.20.5", ttl: 64, proto: layers.IPProtocolUDP, payload: 18}.bytes(t)
	buf := make([]byte, len(frame))
	buf2 := make([]byte, len(up))
	p1, p0 := r.e.Domain().Port("eth1"), r.e.Domain().Port("eth0")
	batch, batch2 := [][]byte{buf}, [][]byte{buf2}
	out := 0
	sink := func(p *l2.Port, frames [][]byte) {
		if p.Name == "eth2" {
			out += len(frames)
		}
	}
	for _, c := range []struct {
		name string
		p    *l2.Port
		b    [][]byte
		src  []byte
	}{{"svi to svi", p1, batch, frame}, {"routed port to svi", p0, batch2, up}} {
		before, out0 := r.e.Stats().Forwarded, out
		runs := 0
		n := testing.AllocsPerRun(1000, func() {
			copy(c.b[0], c.src)
			r.w.Receive(c.p, c.b)
			r.w.Flush(sink)
			runs++
		})
		if n != 0 {
			t.Errorf("%s: %.1f allocations per packet", c.name, n)
		}
		// The packets went where they should: forwarded, all of them.
		if fwd := r.e.Stats().Forwarded - before; fwd != uint64(runs) || out-out0 != runs {
			t.Errorf("%s: %d runs, %d forwarded, %d frames out of eth2", c.name, runs, fwd, out-out0)
		}
	}
}

func arpFrame(t testing.TB, op uint16, srcMAC, dstMAC wire.MAC, vid uint16, sip, tip string, tha wire.MAC) []byte {
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr(srcMAC[:]), DstMAC: net.HardwareAddr(dstMAC[:]), EthernetType: layers.EthernetTypeARP}
	arp := &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
		Operation: op, SourceHwAddress: net.HardwareAddr(srcMAC[:]), SourceProtAddress: net.ParseIP(sip).To4(),
		DstHwAddress: net.HardwareAddr(tha[:]), DstProtAddress: net.ParseIP(tip).To4()}
	ls := []gopacket.SerializableLayer{eth}
	if vid != 0 {
		eth.EthernetType = layers.EthernetTypeDot1Q
		ls = append(ls, &layers.Dot1Q{VLANIdentifier: vid, Type: layers.EthernetTypeARP})
	}
	ls = append(ls, arp)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// A packet to an unresolved next hop waits while the router asks by ARP
// (broadcast in the VLAN, from the router's address there); the answer
// releases it. A request for the router's address is answered.
func TestARPResolution(t *testing.T) {
	r := newRig(t)
	h21 := wire.MustParseMAC("02:00:00:00:20:21")
	in := pkt{srcMAC: r.hw["h10"], dstMAC: r.mac("vlan10"), src: "10.0.10.5", dst: "10.0.20.21", ttl: 64, proto: layers.IPProtocolUDP, payload: 10}
	out := r.run("eth1", in.bytes(t))
	p := only(t, out, "eth2")
	arp, ok := p.Layer(layers.LayerTypeARP).(*layers.ARP)
	if !ok || arp.Operation != layers.ARPRequest || net.IP(arp.DstProtAddress).String() != "10.0.20.21" ||
		net.IP(arp.SourceProtAddress).String() != "10.0.20.1" || p.Layer(layers.LayerTypeDot1Q).(*layers.Dot1Q).VLANIdentifier != 20 {
		t.Fatalf("arp request: %v", p)
	}
	reply := arpFrame(t, layers.ARPReply, h21, r.mac("vlan20"), 20, "10.0.20.21", "10.0.20.1", r.mac("vlan20"))
	p = only(t, r.run("eth2", reply), "eth2")
	eth := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	if wire.MAC(eth.DstMAC) != h21 || p.Layer(layers.LayerTypeUDP) == nil {
		t.Fatalf("released packet: %v", p)
	}
	// Who has 10.0.10.1? The router.
	req := arpFrame(t, layers.ARPRequest, r.hw["h10"], wire.BroadcastMAC, 0, "10.0.10.5", "10.0.10.1", wire.MAC{})
	out = r.run("eth1", req)
	p = only(t, out, "eth1")
	arp = p.Layer(layers.LayerTypeARP).(*layers.ARP)
	if arp.Operation != layers.ARPReply || wire.MAC(arp.SourceHwAddress) != r.mac("vlan10") {
		t.Fatalf("arp reply: %v", p)
	}
}
