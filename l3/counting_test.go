package l3_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/gopacket/layers"

	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
	"github.com/netfwd/netfwd/wire"
)

// TestCountersAddUp: random traffic through the rig, with next hops that
// resolve late or never, packets fragmented towards them, echo requests to
// the router (whose replies wait for ARP too or are fragmented) and ICMP
// errors. Once every neighbour queue has drained, every packet that reached
// the router ended as exactly one of forwarded (at once or when released
// after waiting for ARP), local, ARP, or a drop under one reason, and every
// packet that waited was released or expired:
//
//	In == Forwarded + Local + ARPIn + sum(Drops)
//	Queued == Released + Expired
func TestCountersAddUp(t *testing.T) {
	for seed := range 12 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { countersAddUp(t, uint64(seed)) })
	}
}

func countersAddUp(t *testing.T, seed uint64) {
	clock := l2.NewManualClock()
	r := newRigClock(t, clock, `
route add 10.77.0.0/16 via 203.0.113.7 dev eth0
`)
	rng := rand.New(rand.NewPCG(seed, 3))
	late := wire.MustParseMAC("02:00:00:00:00:07")
	lateHost := wire.MustParseMAC("02:00:00:00:10:77")
	resolveLate := func() {
		r.run("eth0", arpFrame(t, layers.ARPReply, late, r.mac("eth0"), 0, "203.0.113.7", "203.0.113.2", r.mac("eth0")))
	}
	resolveHost := func() { // 10.0.10.77, behind eth1 (vlan10)
		r.run("eth1", arpFrame(t, layers.ARPReply, lateHost, r.mac("vlan10"), 0, "10.0.10.77", "10.0.10.1", r.mac("vlan10")))
	}
	for step := range 400 {
		var frames [][]byte
		port := "eth1"
		for range 1 + rng.IntN(8) {
			p := pkt{srcMAC: r.hw["h10"], dstMAC: r.mac("vlan10"), src: "10.0.10.5", ttl: 64, proto: layers.IPProtocolUDP, payload: rng.IntN(100)}
			switch rng.IntN(9) {
			case 0: // resolved next hop
				p.dst = "10.0.20.5"
			case 1, 2: // late next hop; large ones are fragmented (eth0 MTU 1400)
				p.dst = fmt.Sprintf("10.77.%d.%d", rng.IntN(4), 1+rng.IntN(9))
				if rng.IntN(2) == 0 {
					p.payload = 1400 + rng.IntN(2000)
					p.df = rng.IntN(4) == 0
				}
			case 3: // a late host on a connected subnet
				p.dst = "10.0.10.77"
			case 4: // echo request to the router; the reply may be fragmented
				p.dst, p.proto, p.icmpType = "10.0.10.1", layers.IPProtocolICMPv4, 8
				if rng.IntN(3) == 0 {
					p.payload = 1500 + rng.IntN(2000)
				}
			case 5: // echo request from the late host: the reply waits for ARP
				p.src, p.srcMAC = "10.0.10.77", lateHost
				p.dst, p.proto, p.icmpType = "10.0.10.1", layers.IPProtocolICMPv4, 8
				p.payload = rng.IntN(3000)
			case 6: // TTL expiry (ICMP error back), UDP to the router
				p.dst = []string{"8.8.8.8", "10.0.10.1"}[rng.IntN(2)]
				p.ttl = uint8(1 + rng.IntN(2))
			case 7: // blackhole, unreachable, martian
				p.dst = []string{"10.66.0.1", "10.67.0.1", "127.0.0.1"}[rng.IntN(3)]
			case 8: // from the late host to the uplink: its errors wait too
				p.src, p.srcMAC, p.dst, p.ttl = "10.0.10.77", lateHost, "8.8.8.8", uint8(1+rng.IntN(3))
			}
			frames = append(frames, p.bytes(t))
		}
		r.run(port, frames...)
		switch rng.IntN(20) {
		case 0:
			resolveLate()
		case 1:
			resolveHost()
		case 2, 3, 4:
			clock.Advance(time.Duration(rng.IntN(1500)) * time.Millisecond)
			r.tick()
		}
		_ = step
	}
	// Drain: every resolution completes or fails within a few seconds.
	for range 100 {
		clock.Advance(100 * time.Millisecond)
		r.tick()
	}
	if q := r.e.Router().Neighbours().Stats().QueuedNow; q != 0 {
		t.Fatalf("%d packets still wait for ARP", q)
	}
	s := r.e.Stats()
	drops := sumDrops(s)
	if got := s.Forwarded + s.Local + s.ARPIn + drops; s.In != got {
		t.Fatalf("in %d, outcomes %d: forwarded %d local %d arp %d (queued %d released %d expired %d) drops %d %v",
			s.In, got, s.Forwarded, s.Local, s.ARPIn, s.Queued, s.Released, s.Expired, drops, nonZero(s.Drops))
	}
	if s.Queued != s.Released+s.Expired {
		t.Fatalf("queued %d, released %d + expired %d", s.Queued, s.Released, s.Expired)
	}
	if s.Released == 0 || s.Fragmented == 0 {
		t.Fatalf("queued %d released %d expired %d fragmented %d: the test did not exercise the queues",
			s.Queued, s.Released, s.Expired, s.Fragmented)
	}
}

func nonZero(m map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// newRigClock is newRig with a clock of the test's and extra config lines.
func newRigClock(t *testing.T, clock *l2.ManualClock, extra string) *rig {
	e := l3.NewEngine(l3.EngineOptions{Clock: clock})
	r := setupRig(t, e, testConfig+extra)
	return r
}

func (r *rig) tick() {
	r.w.Tick()
	r.w.Flush(func(*l2.Port, [][]byte) {})
}

// Packets held for ARP are forwarded when they are released: Forwarded
// moves with the frames that leave, at release, not when the packet was
// parked; those whose resolution fails are Expired (and dropped under
// neigh_failed).
func TestForwardedAtRelease(t *testing.T) {
	clock := l2.NewManualClock()
	r := newRigClock(t, clock, `
route add 10.77.0.0/16 via 203.0.113.7 dev eth0
route add 10.78.0.0/16 via 203.0.113.8 dev eth0
`)
	late := wire.MustParseMAC("02:00:00:00:00:07")
	s0 := r.e.Stats()
	sent := 0
	for range 3 {
		out := r.run("eth1", r.fromH10("10.77.0.1", layers.IPProtocolUDP, nil))
		for _, f := range out["eth0"] {
			if f.Layer(layers.LayerTypeIPv4) != nil {
				sent++
			}
		}
	}
	if s := r.e.Stats(); sent != 0 || s.Forwarded != s0.Forwarded || s.Queued-s0.Queued != 3 {
		t.Fatalf("before ARP: %d sent, forwarded %d, queued %d", sent, s.Forwarded-s0.Forwarded, s.Queued-s0.Queued)
	}
	out := r.run("eth0", arpFrame(t, layers.ARPReply, late, r.mac("eth0"), 0, "203.0.113.7", "203.0.113.2", r.mac("eth0")))
	for _, f := range out["eth0"] {
		if f.Layer(layers.LayerTypeIPv4) != nil {
			sent++
		}
	}
	s := r.e.Stats()
	if sent != 3 || s.Forwarded-s0.Forwarded != 3 || s.Released-s0.Released != 3 {
		t.Fatalf("after ARP: %d sent, forwarded %d, released %d", sent, s.Forwarded-s0.Forwarded, s.Released-s0.Released)
	}
	// A next hop that never answers: its packet expires.
	r.run("eth1", r.fromH10("10.78.0.1", layers.IPProtocolUDP, nil))
	for range 100 {
		clock.Advance(100 * time.Millisecond)
		r.tick()
	}
	s = r.e.Stats()
	if s.Expired-s0.Expired != 1 || s.Drops["neigh_failed"]-s0.Drops["neigh_failed"] != 1 || s.Forwarded-s0.Forwarded != 3 {
		t.Fatalf("never resolved: expired %d, neigh_failed %d, forwarded %d", s.Expired-s0.Expired,
			s.Drops["neigh_failed"]-s0.Drops["neigh_failed"], s.Forwarded-s0.Forwarded)
	}
}
