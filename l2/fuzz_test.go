package l2

import (
	"testing"

	"github.com/netfwd/netfwd/wire"
)

// FuzzReceive feeds raw frames to a bridge with VLANs, suppression, mdb and
// deferral configured. It must never panic, and every frame must either
// reach something (a port, the host, the deferral queue) or be counted as
// a drop with a reason.
func FuzzReceive(f *testing.F) {
	f.Add([]byte{}, uint8(0))
	f.Add(untagged(wire.BroadcastMAC, mac(1)), uint8(1))
	f.Add(tagged(mac(2), mac(1), 10), uint8(2))
	f.Add(arpRequest(mac(1), [4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}, 10), uint8(3))
	f.Add(tagged(wire.MustParseMAC("01:00:5e:00:00:01"), mac(1), 10), uint8(0))
	f.Add(buildFrame(frameSpec{dst: mac(3), src: mac(4), tag: 0, pcp: 7}), uint8(1))
	tb := newTestBridge(f, BridgeAttrs{VLANFiltering: new(true), FloodDeferThreshold: new(2)}, "p0", "p1", "p2", "p3")
	tb.apply(
		VLANAdd{Dev: "p0", VID: 10, PVID: true, Untagged: true},
		VLANAdd{Dev: "p1", VID: 10, VIDEnd: 12},
		VLANAdd{Dev: "p2", VID: 10},
		VLANAdd{Dev: "br0", VID: 10},
		LinkSet{Dev: "p2", Set: FlagNeighSuppress, Clear: FlagMcastFlood},
		LinkSet{Dev: "p3", State: new(StateLearning)},
		MDBAdd{Bridge: "br0", Port: "p1", Group: wire.MustParseMAC("01:00:5e:00:00:01"), VID: 10},
	)
	f.Fuzz(func(t *testing.T, frame []byte, port uint8) {
		in := tb.ports[[]string{"p0", "p1", "p2", "p3"}[port%4]]
		before := tb.d.Stats()
		v := tb.b.Receive(tb.tx, in, frame)
		tb.tx.Flush(nil)
		after := tb.d.Stats()
		var dropped uint64
		for r := DropReason(1); r < numDropReasons; r++ {
			dropped += after.Drops[r] - before.Drops[r]
		}
		switch {
		case v.Drop != 0:
			if after.Drops[v.Drop] != before.Drops[v.Drop]+1 || dropped == 0 {
				t.Fatalf("drop %v not counted", v.Drop)
			}
		case v.Host, v.Copies > 0, v.Deferred:
		default:
			t.Fatalf("frame went nowhere and no drop reason: %+v", v)
		}
		if after.Ports[in.Name].RxPackets != before.Ports[in.Name].RxPackets+1 {
			t.Fatal("rx not counted")
		}
	})
}
