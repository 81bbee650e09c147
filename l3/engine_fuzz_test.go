package l3_test

import (
	"testing"

	"github.com/google/gopacket/layers"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
	"github.com/netfwd/netfwd/wire"
)

func sumDrops(s l3.Stats) uint64 {
	var n uint64
	for _, v := range s.Drops {
		n += v
	}
	return n
}

// FuzzEngineInput: any frame on any port never panics, and every frame that
// reaches the router ends in exactly one outcome (forwarded, local, ARP,
// queued for ARP, or dropped under one reason).
func FuzzEngineInput(f *testing.F) {
	r0 := newRig(f)
	seeds := [][]byte{
		pkt{srcMAC: r0.hw["h10"], dstMAC: r0.mac("vlan10"), src: "10.0.10.5", dst: "10.0.20.5", ttl: 64, proto: layers.IPProtocolUDP, payload: 20}.bytes(f),
		pkt{srcMAC: r0.hw["uplink"], dstMAC: r0.mac("eth0"), src: "8.8.8.8", dst: "10.0.10.1", ttl: 64, proto: layers.IPProtocolICMPv4, icmpType: 8, payload: 8}.bytes(f),
		pkt{srcMAC: r0.hw["h20"], dstMAC: r0.mac("vlan20"), vid: 20, src: "10.0.20.5", dst: "10.0.99.1", ttl: 1, proto: layers.IPProtocolTCP}.bytes(f),
		arpFrame(f, layers.ARPRequest, r0.hw["h10"], wire.BroadcastMAC, 0, "10.0.10.5", "10.0.10.1", wire.MAC{}),
	}
	for i, s := range seeds {
		f.Add(byte(i), s)
		f.Add(byte(i), s[:len(s)/2])
	}
	f.Fuzz(func(t *testing.T, port byte, frame []byte) {
		r := newRig(t)
		ports := []string{"eth0", "eth1", "eth2"}
		before := r.e.Stats()
		r.w.Receive(r.e.Domain().Port(ports[int(port)%3]), [][]byte{frame})
		r.w.Flush(func(*l2.Port, [][]byte) {})
		after := r.e.Stats()
		in := after.In - before.In
		// Packets released or expired in this step were counted when
		// they were queued (as Forwarded or a drop too).
		out := (after.Forwarded - before.Forwarded) - (after.Released - before.Released) +
			(after.Local - before.Local) + (after.ARPIn - before.ARPIn) + (after.Queued - before.Queued) +
			(sumDrops(after) - sumDrops(before)) - (after.Expired - before.Expired)
		if in != out {
			t.Fatalf("%d frames reached the router, %d outcomes: %+v", in, out, after)
		}
		if after.Released != before.Released {
			t.Fatalf("a packet was released that never waited: %+v", after)
		}
	})
}
