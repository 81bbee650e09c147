package l2

import (
	"testing"

	"github.com/netfwd/netfwd/wire"
)

// Zero allocations per frame on the hot paths: known unicast (with and
// without retagging), flood (list and array member sets, mixed tagging),
// deferred flood, drop, and the multicast filter.
func TestZeroAllocs(t *testing.T) {
	ports := []string{}
	for i := 0; i < 12; i++ {
		ports = append(ports, "p"+string(rune('a'+i)))
	}
	tb := newTestBridge(t, BridgeAttrs{VLANFiltering: new(true)}, ports...)
	tb.apply(VLANAdd{Dev: "pa", VID: 10, PVID: true, Untagged: true})
	for _, p := range ports[1:] {
		tb.apply(VLANAdd{Dev: p, VID: 10})
	}
	tb.apply(VLANAdd{Dev: "pb", VID: 20}, VLANAdd{Dev: "pc", VID: 20, Untagged: true},
		VLANAdd{Dev: "pd", VID: 20})
	a, b := mac(1), mac(2)
	// Learn a on pa and b on pb.
	tb.send("pa", untagged(wire.BroadcastMAC, a))
	tb.send("pb", tagged(wire.BroadcastMAC, b, 10))
	cases := map[string]struct {
		in string
		f  []byte
	}{
		"unicast-untag":  {"pb", tagged(a, b, 10)},
		"unicast-tag":    {"pa", untagged(b, a)},
		"flood-list":     {"pb", tagged(wire.BroadcastMAC, b, 20)},
		"flood-array":    {"pa", untagged(wire.BroadcastMAC, a)},
		"flood-unknown":  {"pb", tagged(mac(99), b, 10)},
		"drop-vlan":      {"pb", tagged(a, b, 30)},
		"drop-malformed": {"pb", []byte{1, 2, 3}},
		"mcast-filtered": {"pb", tagged(wire.MustParseMAC("01:00:5e:01:02:03"), b, 20)},
	}
	// mcast_flood off on VLAN 20's members so the filter drops early.
	tb.apply(LinkSet{Dev: "pb", Clear: FlagMcastFlood}, LinkSet{Dev: "pc", Clear: FlagMcastFlood},
		LinkSet{Dev: "pd", Clear: FlagMcastFlood})
	for name, c := range cases {
		in := tb.ports[c.in]
		// Warm up: queues and arena reach their steady size.
		for i := 0; i < 3; i++ {
			tb.b.Receive(tb.tx, in, c.f)
			tb.tx.Flush(nil)
		}
		n := testing.AllocsPerRun(200, func() {
			for i := 0; i < 16; i++ {
				tb.b.Receive(tb.tx, in, c.f)
			}
			tb.tx.Flush(func(*Port, [][]byte) {})
		})
		if n != 0 {
			t.Errorf("%s: %v allocs per run", name, n)
		}
	}
	// Deferred floods (threshold below the member count).
	tb.apply(BridgeSet{Name: "br0", Attrs: BridgeAttrs{FloodDeferThreshold: new(4)}})
	in := tb.ports["pa"]
	f := untagged(wire.BroadcastMAC, a)
	tb.b.Receive(tb.tx, in, f)
	tb.tx.Flush(nil)
	if n := testing.AllocsPerRun(200, func() {
		tb.b.Receive(tb.tx, in, f)
		tb.tx.Flush(func(*Port, [][]byte) {})
	}); n != 0 {
		t.Errorf("deferred flood: %v allocs per run", n)
	}
	if tb.d.Stats().FloodDeferred == 0 {
		t.Fatal("nothing was deferred")
	}
}
