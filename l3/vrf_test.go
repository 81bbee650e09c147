package l3_test

// VRFs on the datapath: a packet received on an interface of a VRF is
// routed in the VRF's table (the l3mdev rule), the router's ICMP answers
// to it are output lookups in that VRF, and the per-VRF counters count it.

import (
	"testing"

	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
)

// vrfConfig puts vlan20 and the backup uplink eth3 in VRF red (table 10):
// red's default is eth3's gateway, and 10.67.0.0/16 is unreachable there.
const vrfConfig = `
link add red type vrf table 10
link set eth3 master red
link set vlan20 vrf red
route add default via 198.51.100.1 dev eth3 table 10
route add unreachable 10.67.0.0/16 table 10
`

func TestVRFForwardingAndCounters(t *testing.T) {
	for _, compiled := range []bool{false, true} {
		e := l3.NewEngine(l3.EngineOptions{Clock: l2.NewManualClock(), Compiled: compiled})
		r := setupRig(t, e, testConfig+vrfConfig)
		e.Router().SetNeighbor("eth3", mustAddr("198.51.100.9"), r.hw["backup"])
		v10, v20 := ingresses[0], ingresses[1]
		// The same destination from the two VRFs: main's default (eth0),
		// red's (eth3).
		want(t, r, udp(v10, "10.0.10.5", "9.9.9.9"), "via eth0")
		want(t, r, udp(v20, "10.0.20.5", "9.9.9.9"), "via eth3")
		// vlan10's subnet is not in red: red's default takes it.
		want(t, r, udp(v20, "10.0.20.5", "10.0.10.5"), "via eth3")
		// Main has no route to red's subnet any more (vlan20's connected
		// route moved to table 10): main's default.
		want(t, r, udp(v10, "10.0.10.5", "10.0.20.5"), "via eth0")
		// red's unreachable answers host unreachable, and the error goes
		// back out of red's vlan20 (an output lookup in the VRF: main has
		// no route to 10.0.20.5 but its default via eth0).
		got, out := outcome(r, udp(v20, "10.0.20.5", "10.67.0.1"))
		if got != "unreachable" || len(out["eth2"]) != 1 || len(out["eth0"]) != 0 {
			t.Fatalf("compiled=%v: red's unreachable: %s\n%s", compiled, got, summary(out))
		}
		// main's unreachable for the same destination from vlan10: not red's.
		want(t, r, udp(v10, "10.0.10.5", "10.67.0.1"), "unreachable")
		st := e.VRFStats()["red"]
		if st.Forwarded != 2 || st.Drops["unreachable"] != 1 || sum(st.Drops) != 1 {
			t.Fatalf("compiled=%v: red's counters %+v, want 2 forwarded and 1 unreachable", compiled, st)
		}
		if all := e.Stats(); all.Forwarded != 4 || all.Drops["unreachable"] != 2 {
			t.Fatalf("compiled=%v: router totals %d forwarded, %d unreachable; want 4 and 2", compiled, all.Forwarded, all.Drops["unreachable"])
		}
	}
}

func sum(m map[string]uint64) (n uint64) {
	for _, v := range m {
		n += v
	}
	return n
}
