package l3_test

import (
	"testing"

	"github.com/google/gopacket/layers"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
	"github.com/netfwd/netfwd/wire"
)

// puntLog records what a worker hands the host path; interfaces named in
// twins have one, others do not.
type puntLog struct {
	twins  map[string]bool
	frames map[string][][]byte
}

func newPuntLog(twins ...string) *puntLog {
	p := &puntLog{twins: map[string]bool{}, frames: map[string][][]byte{}}
	for _, t := range twins {
		p.twins[t] = true
	}
	return p
}

func (p *puntLog) punter(ifc *l3.Iface, f []byte, l3off int, origin int32) bool {
	if !p.twins[ifc.Name] {
		return false
	}
	p.frames[ifc.Name] = append(p.frames[ifc.Name], append([]byte(nil), f...))
	return true
}

func (p *puntLog) count() int {
	n := 0
	for _, fs := range p.frames {
		n += len(fs)
	}
	return n
}

// What the host path takes and what the router keeps, interface by
// interface, compared with the router without one.
func TestHostPathPunts(t *testing.T) {
	tcpToSVI := func(r *rig) []byte { return r.fromH10("10.0.10.1", layers.IPProtocolTCP, nil) }
	echoToSVI := func(r *rig) []byte {
		return r.fromH10("10.0.10.1", layers.IPProtocolICMPv4, func(p *pkt) { p.icmpType = 8 })
	}
	cases := []struct {
		name      string
		echo      bool
		join      string // a group the host joined in VLAN 10 (the daemon follows the twin's)
		frame     func(r *rig) []byte
		punted    bool // taken by the host path of vlan10
		answered  bool // the router still sends something itself
		forwarded bool
	}{
		{name: "tcp to local address", frame: tcpToSVI, punted: true},
		{name: "udp to local address", frame: func(r *rig) []byte { return r.fromH10("10.0.20.1", layers.IPProtocolUDP, nil) }, punted: true},
		{name: "ospf to 224.0.0.5", join: "01:00:5e:00:00:05", frame: func(r *rig) []byte {
			return r.fromH10("224.0.0.5", 89, func(p *pkt) { p.dstMAC = wire.MustParseMAC("01:00:5e:00:00:05") })
		}, punted: true},
		{name: "limited broadcast", frame: func(r *rig) []byte {
			return r.fromH10("255.255.255.255", layers.IPProtocolUDP, func(p *pkt) { p.dstMAC = wire.MustParseMAC("ff:ff:ff:ff:ff:ff") })
		}, punted: true},
		{name: "subnet broadcast", frame: func(r *rig) []byte { return r.fromH10("10.0.10.255", layers.IPProtocolUDP, nil) }, punted: true},
		{name: "ospf group the host did not join", frame: func(r *rig) []byte {
			return r.fromH10("224.0.0.5", 89, func(p *pkt) { p.dstMAC = wire.MustParseMAC("01:00:5e:00:00:05") })
		}},
		{name: "global multicast stays dropped", join: "01:00:5e:01:01:01", frame: func(r *rig) []byte {
			return r.fromH10("239.1.1.1", layers.IPProtocolUDP, func(p *pkt) { p.dstMAC = wire.MustParseMAC("01:00:5e:01:01:01") })
		}},
		{name: "echo answered by the router", frame: echoToSVI, answered: true},
		{name: "echo punted when asked", echo: true, frame: echoToSVI, punted: true},
		{name: "transit forwarded", frame: func(r *rig) []byte { return r.fromH10("10.0.20.5", layers.IPProtocolTCP, nil) }, forwarded: true},
		{name: "arp request for the router", frame: func(r *rig) []byte {
			return arpFrame(t, layers.ARPRequest, r.hw["h10"], wire.MustParseMAC("ff:ff:ff:ff:ff:ff"), 0, "10.0.10.5", "10.0.10.1", wire.MAC{})
		}, punted: true, answered: true},
		{name: "arp request for another host", frame: func(r *rig) []byte {
			return arpFrame(t, layers.ARPRequest, r.hw["h10"], wire.MustParseMAC("ff:ff:ff:ff:ff:ff"), 0, "10.0.10.5", "10.0.10.77", wire.MAC{})
		}},
		{name: "arp reply", frame: func(r *rig) []byte {
			return arpFrame(t, layers.ARPReply, r.hw["h10"], r.mac("vlan10"), 0, "10.0.10.5", "10.0.10.1", r.mac("vlan10"))
		}, punted: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t)
			log := newPuntLog("vlan10")
			r.w.SetPunter(log.punter, c.echo)
			if c.join != "" {
				if err := r.e.Domain().Bridge("br0").JoinGroup(10, wire.MustParseMAC(c.join)); err != nil {
					t.Fatal(err)
				}
			}
			frame := c.frame(r)
			before := r.e.Stats()
			out := r.run("eth1", frame)
			after := r.e.Stats()
			if got := log.count(); (got == 1) != c.punted || got > 1 {
				t.Fatalf("punted %d frames, want punted=%v", got, c.punted)
			}
			if c.punted && string(log.frames["vlan10"][0]) != string(frame) {
				t.Fatalf("punted frame differs from the received one")
			}
			if c.punted != (after.Punted == before.Punted+1) {
				t.Fatalf("Punted counter %d -> %d", before.Punted, after.Punted)
			}
			sent := len(out) > 0
			if c.forwarded {
				only(t, out, "eth2")
			} else if sent != c.answered {
				t.Fatalf("router output %v, want answered=%v:\n%s", sent, c.answered, summary(out))
			}
		})
	}
}

// An interface without a twin keeps today's behaviour: TCP to the router
// gets a reset. With no Punter at all, too.
func TestHostPathOnlyWhereTwinned(t *testing.T) {
	for _, punter := range []bool{true, false} {
		r := newRig(t)
		if punter {
			r.w.SetPunter(newPuntLog("vlan10").punter, false)
		}
		frame := pkt{srcMAC: r.hw["uplink"], dstMAC: r.mac("eth0"), src: "203.0.113.1", dst: "203.0.113.2", ttl: 64, proto: layers.IPProtocolTCP}.bytes(t)
		p := only(t, r.run("eth0", frame), "eth0")
		tcp, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if !ok || !tcp.RST {
			t.Fatalf("punter=%v: want a reset, got %v", punter, p)
		}
		if s := r.e.Stats(); s.Punted != 0 {
			t.Fatalf("punted %d", s.Punted)
		}
	}
}

// Frames from a twin leave on its interface: a VLAN interface's through the
// bridge with the member's tagging, a routed port's as they are.
func TestHostPathInject(t *testing.T) {
	r := newRig(t)
	rt := r.e.Router()
	toH20 := pkt{srcMAC: r.mac("vlan20"), dstMAC: r.hw["h20"], src: "10.0.20.1", dst: "10.0.20.5", ttl: 64, proto: layers.IPProtocolTCP}.bytes(t)
	// Teach the FDB where h20 is (tagged on eth2).
	r.run("eth2", pkt{srcMAC: r.hw["h20"], dstMAC: r.mac("vlan20"), vid: 20, src: "10.0.20.5", dst: "10.0.20.1", ttl: 64, proto: layers.IPProtocolICMPv4, icmpType: 8}.bytes(t))
	r.w.Inject(rt.Iface("vlan20"), toH20)
	out := map[string]int{}
	var tagged bool
	r.w.Flush(func(p *l2.Port, frames [][]byte) {
		for _, f := range frames {
			out[p.Name]++
			tagged = len(f) > 14 && f[12] == 0x81 && f[13] == 0x00
		}
	})
	if out["eth2"] != 1 || len(out) != 1 || !tagged {
		t.Fatalf("inject via vlan20: %v tagged=%v", out, tagged)
	}
	toUplink := pkt{srcMAC: r.mac("eth0"), dstMAC: r.hw["uplink"], src: "203.0.113.2", dst: "203.0.113.1", ttl: 64, proto: layers.IPProtocolTCP}.bytes(t)
	r.w.Inject(rt.Iface("eth0"), toUplink)
	var got []byte
	r.w.Flush(func(p *l2.Port, frames [][]byte) {
		if p.Name == "eth0" && len(frames) == 1 {
			got = append([]byte(nil), frames[0]...)
		}
	})
	if string(got) != string(toUplink) {
		t.Fatalf("inject via eth0: got %x", got)
	}
}

// Punting allocates nothing in the router (the punter's own buffer is its
// business).
func TestHostPathPuntAllocs(t *testing.T) {
	r := newRig(t)
	n := 0
	r.w.SetPunter(func(*l3.Iface, []byte, int, int32) bool { n++; return true }, false)
	frame := r.fromH10("10.0.10.1", layers.IPProtocolTCP, nil)
	port := r.e.Domain().Port("eth1")
	frames := [][]byte{frame}
	r.w.Receive(port, frames)
	r.w.Flush(func(*l2.Port, [][]byte) {})
	allocs := testing.AllocsPerRun(200, func() {
		r.w.Receive(port, frames)
		r.w.Flush(func(*l2.Port, [][]byte) {})
	})
	if allocs != 0 || n < 200 {
		t.Fatalf("%v allocs per punted frame, %d punted", allocs, n)
	}
}

// Injecting allocates nothing in the router.
func TestHostPathInjectAllocs(t *testing.T) {
	r := newRig(t)
	ifc := r.e.Router().Iface("eth0")
	frame := pkt{srcMAC: r.mac("eth0"), dstMAC: r.hw["uplink"], src: "203.0.113.2", dst: "203.0.113.1", ttl: 64, proto: layers.IPProtocolTCP}.bytes(t)
	sent := 0
	flush := func(p *l2.Port, frames [][]byte) { sent += len(frames) }
	allocs := testing.AllocsPerRun(200, func() {
		r.w.Inject(ifc, frame)
		r.w.Flush(flush)
	})
	if allocs != 0 || sent < 200 {
		t.Fatalf("%v allocs per injected frame, %d sent", allocs, sent)
	}
}
