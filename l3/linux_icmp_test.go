package l3_test

// Differential test of the router's answers against Linux: the same frames
// are sent to a Linux router in a network namespace (captured on the
// sending host's veth) and to netfwd's engine with the same configuration;
// the ICMP errors, echo reply and TCP reset must match field by field (the
// IP identification and its checksum aside).

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/mdlayher/packet"

	"github.com/netfwd/netfwd/internal/apply"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/testenv"
	"github.com/netfwd/netfwd/internal/vethlab"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
	"github.com/netfwd/netfwd/wire"
)

type probe struct {
	name  string
	dst   string
	ttl   uint8
	proto layers.IPProtocol
	size  int
	df    bool
	icmp  uint8
}

var probes = []probe{
	{name: "ttl exceeded", dst: "10.0.2.2", ttl: 1, proto: layers.IPProtocolUDP, size: 40},
	{name: "host unreachable route", dst: "10.67.0.1", ttl: 64, proto: layers.IPProtocolUDP, size: 40},
	{name: "prohibit route", dst: "10.68.0.1", ttl: 64, proto: layers.IPProtocolUDP, size: 40},
	{name: "net unreachable", dst: "172.16.0.1", ttl: 64, proto: layers.IPProtocolUDP, size: 40},
	{name: "blackhole", dst: "10.66.0.1", ttl: 64, proto: layers.IPProtocolUDP, size: 40},
	{name: "frag needed", dst: "10.0.2.2", ttl: 64, proto: layers.IPProtocolUDP, size: 1450, df: true},
	{name: "big quote", dst: "10.67.0.1", ttl: 64, proto: layers.IPProtocolUDP, size: 1200},
	{name: "udp to router", dst: "10.0.1.1", ttl: 64, proto: layers.IPProtocolUDP, size: 40},
	{name: "tcp to router", dst: "10.0.1.1", ttl: 64, proto: layers.IPProtocolTCP, size: 20},
	{name: "gre to router", dst: "10.0.1.1", ttl: 64, proto: layers.IPProtocolGRE, size: 20},
	{name: "echo to router", dst: "10.0.1.1", ttl: 64, proto: layers.IPProtocolICMPv4, size: 56, icmp: 8},
	{name: "echo to far side", dst: "10.0.2.1", ttl: 64, proto: layers.IPProtocolICMPv4, size: 56, icmp: 8},
}

func probeFrame(t *testing.T, p probe, src, dst net.HardwareAddr) []byte {
	eth := &layers.Ethernet{SrcMAC: src, DstMAC: dst, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: p.ttl, TOS: 0x10, Protocol: p.proto, Id: 0x4242,
		SrcIP: net.IP{10, 0, 1, 2}, DstIP: net.ParseIP(p.dst).To4()}
	if p.df {
		ip.Flags = layers.IPv4DontFragment
	}
	ls := []gopacket.SerializableLayer{eth, ip}
	switch p.proto {
	case layers.IPProtocolUDP:
		u := &layers.UDP{SrcPort: 40000, DstPort: 33434}
		u.SetNetworkLayerForChecksum(ip)
		ls = append(ls, u, gopacket.Payload(make([]byte, p.size)))
	case layers.IPProtocolTCP:
		tc := &layers.TCP{SrcPort: 40001, DstPort: 22, Seq: 777, SYN: true, Window: 512}
		tc.SetNetworkLayerForChecksum(ip)
		ls = append(ls, tc)
	case layers.IPProtocolICMPv4:
		ls = append(ls, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(p.icmp, 0), Id: 3, Seq: 4}, gopacket.Payload(make([]byte, p.size)))
	default:
		ls = append(ls, gopacket.Payload(make([]byte, p.size)))
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// answer describes a reply in comparable form.
func answer(f []byte) string {
	p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
	ip, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if !ok {
		return "non-ip " + p.String()
	}
	s := fmt.Sprintf("ip %s>%s ttl=%d tos=%#x len=%d proto=%d df=%t", ip.SrcIP, ip.DstIP, ip.TTL, ip.TOS, ip.Length, ip.Protocol, ip.Flags&layers.IPv4DontFragment != 0)
	switch l := p.Layer(layers.LayerTypeICMPv4).(type) {
	case *layers.ICMPv4:
		s += fmt.Sprintf(" icmp %v id=%d seq=%d payload=%d", l.TypeCode, l.Id, l.Seq, len(l.Payload))
		if l.TypeCode.Type() != 0 && len(l.Payload) >= 20 {
			inner := gopacket.NewPacket(l.Payload, layers.LayerTypeIPv4, gopacket.Default)
			if in, ok := inner.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok {
				s += fmt.Sprintf(" quote[%s>%s ttl=%d len=%d]", in.SrcIP, in.DstIP, in.TTL, in.Length)
			}
		}
	}
	if tcp, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP); ok {
		s += fmt.Sprintf(" tcp %d>%d seq=%d ack=%d rst=%t ackf=%t win=%d", tcp.SrcPort, tcp.DstPort, tcp.Seq, tcp.Ack, tcp.RST, tcp.ACK, tcp.Window)
	}
	return s
}

// linuxRouter is a Linux router in a namespace between two hosts: ha
// (10.0.1.2) on its r0 (10.0.1.1/24) and hb (10.0.2.2) on its r1
// (10.0.2.1/24, MTU 1400), with unreachable, prohibit and blackhole routes.
// conn sends and reads raw frames on ha's side.
type linuxRouter struct {
	lab          *vethlab.Lab
	ha, rt, hb   string
	b0           string
	rtMAC, haMAC net.HardwareAddr
	conn         *packet.Conn
}

func newLinuxRouter(t *testing.T) *linuxRouter {
	testenv.RequireRoot(t)
	lab, err := vethlab.NewLab()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lab.Close() })
	lr := &linuxRouter{lab: lab}
	lr.ha, _ = lab.AddNetns("ha")
	lr.rt, _ = lab.AddNetns("rt")
	lr.hb, _ = lab.AddNetns("hb")
	a0, r0, err := lab.AddVeth(lr.ha, "a0", lr.rt, "r0")
	if err != nil {
		t.Fatal(err)
	}
	r1, b0, err := lab.AddVeth(lr.rt, "r1", lr.hb, "b0")
	if err != nil {
		t.Fatal(err)
	}
	lr.b0 = b0
	ha, rt, hb := lr.ha, lr.rt, lr.hb
	for _, c := range [][]string{
		{rt, "addr", "add", "10.0.1.1/24", "dev", r0}, {rt, "addr", "add", "10.0.2.1/24", "dev", r1},
		{rt, "link", "set", r1, "mtu", "1400"},
		{rt, "route", "add", "unreachable", "10.67.0.0/16"}, {rt, "route", "add", "prohibit", "10.68.0.0/16"},
		{rt, "route", "add", "blackhole", "10.66.0.0/16"},
		{ha, "addr", "add", "10.0.1.2/24", "dev", a0}, {hb, "addr", "add", "10.0.2.2/24", "dev", b0},
		{hb, "neigh", "replace", "10.0.2.1", "lladdr", "02:00:00:00:00:01", "dev", b0},
	} {
		if err := lab.IP(c[0], c[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	if err := lab.Sysctl(rt, "net.ipv4.ip_forward", "1"); err != nil {
		t.Fatal(err)
	}
	// Linux's defaults for the rate limits would swallow some answers of a
	// quick run: the per-destination limit is lifted on both sides.
	lab.Sysctl(rt, "net.ipv4.icmp_ratelimit", "0")
	if lr.rtMAC, err = ifMAC(rt, r0); err != nil {
		t.Fatal(err)
	}
	if lr.conn, lr.haMAC, err = listen(ha, a0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lr.conn.Close() })
	// Resolve 10.0.2.2 on the Linux router first (it must not answer "unreachable" for ARP failures).
	lab.Exec(rt, "ping", "-c1", "-W1", "10.0.2.2")
	return lr
}

// listen opens a raw packet socket on dev in namespace ns.
func listen(ns, dev string) (conn *packet.Conn, mac net.HardwareAddr, err error) {
	err = pktio.InNetns(ns, func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		mac = ifi.HardwareAddr
		conn, err = packet.Listen(ifi, packet.Raw, 0x0003, nil)
		return err
	})
	return conn, mac, err
}

// send writes frame from ha to the router.
func (lr *linuxRouter) send(t *testing.T, frame []byte) {
	if _, err := lr.conn.WriteTo(frame, &packet.Addr{HardwareAddr: lr.rtMAC}); err != nil {
		t.Fatal(err)
	}
}

// netfwdRouter is netfwd's engine with linuxRouter's configuration, ha's
// MAC given; it returns the engine, a worker and r0's MAC.
func netfwdRouter(t *testing.T, haMAC net.HardwareAddr) (*l3.Engine, *l3.Worker, wire.MAC) {
	e := l3.NewEngine(l3.EngineOptions{RateLimit: l3.RateLimitConfig{PerDestBurst: 1000}})
	c := apply.New(e)
	conf := `address add 10.0.1.1/24 dev r0
address add 10.0.2.1/24 dev r1
link set r1 mtu 1400
route add unreachable 10.67.0.0/16
route add prohibit 10.68.0.0/16
route add blackhole 10.66.0.0/16
`
	cmds, errs := config.Parse("t", strings.NewReader(conf))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := c.Apply(cmds); err != nil {
		t.Fatal(err)
	}
	e.Router().SetNeighbor("r0", mustAddr("10.0.1.2"), wire.MAC(haMAC))
	e.Router().SetNeighbor("r1", mustAddr("10.0.2.2"), wire.MustParseMAC("02:00:00:00:00:02"))
	return e, e.NewWorker(), e.Router().Iface("r0").MAC
}

func TestICMPLikeLinux(t *testing.T) {
	lr := newLinuxRouter(t)
	linux := map[string]string{}
	for _, p := range probes {
		if strings.HasPrefix(p.dst, "10.67.") || strings.HasPrefix(p.dst, "10.68.") || strings.HasPrefix(p.dst, "172.") {
			// Linux's ip_error keeps a token bucket per source that starts
			// empty and refills one token a second: wait for one.
			time.Sleep(1100 * time.Millisecond)
		}
		lr.send(t, probeFrame(t, p, lr.haMAC, lr.rtMAC))
		linux[p.name] = readAnswer(lr.conn, lr.haMAC)
	}

	// netfwd with the same configuration.
	e, w, ourMAC := netfwdRouter(t, lr.haMAC)
	for _, p := range probes {
		f := probeFrame(t, p, lr.haMAC, ourMAC[:])
		w.Receive(e.Domain().Port("r0"), [][]byte{f})
		got := "none"
		w.Flush(func(port *l2.Port, frames [][]byte) {
			for _, fr := range frames {
				if port.Name == "r0" {
					got = answer(fr)
				}
			}
		})
		if got != linux[p.name] {
			t.Errorf("%s:\n linux  %s\n netfwd %s", p.name, linux[p.name], got)
		} else {
			t.Logf("%s: %s", p.name, got)
		}
	}
}

// TestMartianSourcesLikeLinux: packets whose source is one of the router's
// addresses or a broadcast address of one of its subnets are not forwarded
// by Linux (fib_validate_source: "martian source"); netfwd drops them too,
// and counts them. Packets from a host's address, or a subnet's network
// address, go through both. Linux checks broadcast sources only with reverse
// path filtering on (rp_filter 1 or 2; 2 is systemd's default), which is the
// Linux netfwd behaves like (docs/l3.md).
func TestMartianSourcesLikeLinux(t *testing.T) {
	lr := newLinuxRouter(t)
	if err := lr.lab.Sysctl(lr.rt, "net.ipv4.conf.all.rp_filter", "2"); err != nil {
		t.Fatal(err)
	}
	hbConn, _, err := listen(lr.hb, lr.b0)
	if err != nil {
		t.Fatal(err)
	}
	defer hbConn.Close()
	srcs := []string{"10.0.1.2", "10.0.1.1", "10.0.2.1", "10.0.1.255", "10.0.2.255", "10.0.1.0"}
	frame := func(src string, dstMAC net.HardwareAddr) []byte {
		f := probeFrame(t, probe{dst: "10.0.2.2", ttl: 64, proto: layers.IPProtocolUDP, size: 20}, lr.haMAC, dstMAC)
		ip := wire.IPv4(f[wire.EthernetHeaderLen:])
		wire.Addr4From(mustAddr(src)).Put(ip[12:])
		ip.SetChecksum(0)
		ip.SetChecksum(wire.HeaderChecksum(ip[:wire.IPv4MinHeaderLen]))
		return f
	}
	linux := map[string]bool{}
	for _, src := range srcs {
		lr.send(t, frame(src, lr.rtMAC))
		linux[src] = arrived(hbConn, src)
	}
	if !linux["10.0.1.2"] || linux["10.0.1.1"] {
		t.Fatalf("the Linux router did not behave as expected: %v", linux)
	}

	e, w, ourMAC := netfwdRouter(t, lr.haMAC)
	for _, src := range srcs {
		before := e.Stats().Drops["martian_source"]
		w.Receive(e.Domain().Port("r0"), [][]byte{frame(src, ourMAC[:])})
		forwarded := false
		w.Flush(func(port *l2.Port, frames [][]byte) { forwarded = forwarded || port.Name == "r1" })
		counted := e.Stats().Drops["martian_source"] - before
		if forwarded != linux[src] || counted != map[bool]uint64{true: 0, false: 1}[forwarded] {
			t.Errorf("source %s: linux forwards %v, netfwd forwards %v and counts %d martians", src, linux[src], forwarded, counted)
		} else {
			t.Logf("source %s: forwarded %v", src, forwarded)
		}
	}
}

// arrived reports whether a UDP packet from src reached the listener within
// 300 ms.
func arrived(conn *packet.Conn, src string) bool {
	buf := make([]byte, 2048)
	deadline := time.Now().Add(300 * time.Millisecond)
	for {
		conn.SetReadDeadline(deadline)
		n, _, err := conn.ReadFrom(buf)
		if err != nil {
			return false
		}
		p := gopacket.NewPacket(buf[:n], layers.LayerTypeEthernet, gopacket.Default)
		if ip, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok && ip.Protocol == layers.IPProtocolUDP && ip.SrcIP.String() == src {
			return true
		}
	}
}

func readAnswer(conn *packet.Conn, self net.HardwareAddr) string {
	buf := make([]byte, 2048)
	deadline := time.Now().Add(300 * time.Millisecond)
	for {
		conn.SetReadDeadline(deadline)
		n, _, err := conn.ReadFrom(buf)
		if err != nil {
			return "none"
		}
		p := gopacket.NewPacket(buf[:n], layers.LayerTypeEthernet, gopacket.Default)
		eth, ok := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
		if !ok || eth.EthernetType != layers.EthernetTypeIPv4 || eth.SrcMAC.String() == self.String() {
			continue // our own frames, ARP, IPv6 noise
		}
		return answer(buf[:n])
	}
}

func ifMAC(ns, dev string) (net.HardwareAddr, error) {
	var mac net.HardwareAddr
	err := pktio.InNetns(ns, func() error {
		ifi, err := net.InterfaceByName(dev)
		if err == nil {
			mac = ifi.HardwareAddr
		}
		return err
	})
	return mac, err
}
