package l3_test

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/wire"
)

func (r *rig) apply(lines string) {
	r.t.Helper()
	cmds, errs := config.Parse("t", strings.NewReader(lines))
	if len(errs) > 0 {
		r.t.Fatal(errs)
	}
	if err := r.c.Apply(cmds); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) fromH10(dst string, proto layers.IPProtocol, tweak func(*pkt)) []byte {
	p := pkt{srcMAC: r.hw["h10"], dstMAC: r.mac("vlan10"), src: "10.0.10.5", dst: dst, ttl: 64, proto: proto, payload: 8}
	if tweak != nil {
		tweak(&p)
	}
	return p.bytes(r.t)
}

// Link down makes routes through it unusable: traffic falls back to the
// higher-metric default on eth3, and returns when the link comes back.
func TestLinkDownFailover(t *testing.T) {
	r := newRig(t)
	frame := r.fromH10("8.8.8.8", layers.IPProtocolUDP, nil)
	only(t, r.run("eth1", frame), "eth0")
	r.apply("link set eth0 down\n")
	p := only(t, r.run("eth1", r.fromH10("8.8.8.8", layers.IPProtocolUDP, nil)), "eth3")
	if wire.MAC(p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet).DstMAC) != r.hw["backup"] {
		t.Fatalf("not to the backup router: %v", p)
	}
	// The connected route of eth0 is withdrawn too: its subnet now follows the default.
	only(t, r.run("eth1", r.fromH10("203.0.113.9", layers.IPProtocolUDP, nil)), "eth3")
	r.apply("link set eth0 up\n")
	only(t, r.run("eth1", r.fromH10("8.8.8.8", layers.IPProtocolUDP, nil)), "eth0")
}

// ECMP: flows spread over both members by their 5-tuple; a flow sticks to
// one member; ICMP errors about a flow hash on the quoted packet.
func TestECMPSpreadsFlows(t *testing.T) {
	r := newRig(t)
	count := map[string]int{}
	for port := 1000; port < 1400; port++ {
		frame := r.fromH10("192.0.2.9", layers.IPProtocolUDP, nil)
		binary.BigEndian.PutUint16(frame[14+20:], uint16(port)) // UDP source port (checksum stays unchecked by the router)
		var first string
		for range 3 {
			out := r.run("eth1", frame)
			for p := range out {
				if first == "" {
					first = p
				} else if p != first {
					t.Fatalf("flow %d moved from %s to %s", port, first, p)
				}
			}
		}
		count[first]++
	}
	if count["eth0"] < 120 || count["eth3"] < 120 {
		t.Fatalf("400 flows spread %v", count)
	}
}

func TestLocalAndMartians(t *testing.T) {
	r := newRig(t)
	// TCP to the router: a reset.
	p := only(t, r.run("eth1", r.fromH10("10.0.10.1", layers.IPProtocolTCP, nil)), "eth1")
	tcp, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
	if !ok || !tcp.RST || !tcp.ACK || tcp.Ack != 1000+8+1 || tcp.SrcPort != 22 || tcp.DstPort != 40000 {
		t.Fatalf("tcp to router: %v", p)
	}
	ip4 := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	pseudo := append(append(append([]byte{}, ip4.SrcIP.To4()...), ip4.DstIP.To4()...), 0, 6, 0, byte(len(ip4.Payload)))
	if wire.Checksum(append(pseudo, ip4.Payload...)) != 0 {
		t.Fatal("reset's TCP checksum is wrong")
	}
	// Another protocol: protocol unreachable.
	p = only(t, r.run("eth1", r.fromH10("10.0.10.1", layers.IPProtocolGRE, nil)), "eth1")
	if ic := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4); ic.TypeCode != layers.CreateICMPv4TypeCode(3, 2) {
		t.Fatalf("protocol unreachable: %v", p)
	}
	silent := map[string][]byte{
		"echo to directed broadcast": r.fromH10("10.0.10.255", layers.IPProtocolICMPv4, func(p *pkt) { p.icmpType = 8 }),
		"martian source":             r.fromH10("8.8.8.8", layers.IPProtocolUDP, func(p *pkt) { p.src = "127.0.0.1" }),
		"not our MAC":                r.fromH10("8.8.8.8", layers.IPProtocolUDP, func(p *pkt) { p.dstMAC = wire.MustParseMAC("02:00:00:00:99:99") }),
		"error about an error":       icmpErrorFrame(r),
		"multicast":                  r.fromH10("224.0.0.5", layers.IPProtocolUDP, nil),
	}
	for name, f := range silent {
		out := r.run("eth1", f)
		delete(out, "eth2") // the bridge floods unknown unicast / multicast in VLAN 10 (no other member)
		if len(out) != 0 {
			t.Errorf("%s: answered %v", name, summary(out))
		}
	}
	st := r.e.Stats()
	for _, reason := range []string{"broadcast", "martian_source"} {
		if st.Drops[reason] == 0 {
			t.Errorf("no %s drop counted: %v", reason, st.Drops)
		}
	}
}

// icmpErrorFrame is an ICMP time exceeded from h10 towards an unreachable
// network: the router must not answer an error with an error.
func icmpErrorFrame(r *rig) []byte {
	src, dst := r.hw["h10"], r.mac("vlan10")
	eth := &layers.Ethernet{SrcMAC: src[:], DstMAC: dst[:], EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolICMPv4, SrcIP: []byte{10, 0, 10, 5}, DstIP: []byte{10, 67, 0, 1}}
	ic := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(11, 0)}
	inner := &layers.IPv4{Version: 4, IHL: 5, TTL: 1, Protocol: layers.IPProtocolUDP, SrcIP: []byte{10, 67, 0, 1}, DstIP: []byte{10, 0, 10, 5}}
	buf := gopacket.NewSerializeBuffer()
	gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, ic, inner, gopacket.Payload(make([]byte, 8)))
	return buf.Bytes()
}

// TestOwnSourcesAreMartians: a packet whose source is one of the router's
// addresses, or a broadcast address of one of its subnets, is dropped and
// counted as a martian source, as Linux's fib_validate_source does, whether
// it is addressed through the router or to it.
func TestOwnSourcesAreMartians(t *testing.T) {
	r := newRig(t)
	for _, c := range []struct{ src, dst string }{
		{"10.0.10.1", "10.0.20.5"},   // the router's address on the ingress subnet
		{"203.0.113.2", "10.0.20.5"}, // its address on another interface
		{"10.0.10.255", "10.0.20.5"}, // the ingress subnet's broadcast
		{"10.0.20.255", "8.8.8.8"},   // another subnet's broadcast
		{"10.0.10.255", "10.0.10.1"}, // to the router itself
	} {
		before := r.e.Stats().Drops["martian_source"]
		f := r.fromH10(c.dst, layers.IPProtocolUDP, func(p *pkt) { p.src = c.src })
		out := r.run("eth1", f)
		delete(out, "eth2") // the bridge floods unknown unicast in VLAN 10
		if len(out) != 0 {
			t.Errorf("%s -> %s: forwarded or answered: %v", c.src, c.dst, summary(out))
		}
		if r.e.Stats().Drops["martian_source"] != before+1 {
			t.Errorf("%s -> %s: not counted as martian source: %v", c.src, c.dst, r.e.Stats().Drops)
		}
	}
	// A neighbour's address is fine.
	if out := r.run("eth1", r.fromH10("10.0.20.5", layers.IPProtocolUDP, nil)); len(out["eth2"]) != 1 {
		t.Fatalf("plain traffic: %v", summary(out))
	}
}
