package apply

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/wire"
)

// Two customers with the same 10.0.0.0/24 on routed ports of two VRFs: the
// derived routes land in each VRF's table, the router's interfaces carry
// the VRF, and a packet received on either port resolves in its own VRF.
func TestApplyVRFTwoCustomers(t *testing.T) {
	c := newTestController()
	err := c.Apply(parseLines(t, "vrf.conf", []string{
		"link add red type vrf table 10",
		"link add blue type vrf table 20",
		"link set red up",
		"link set p1 master red",
		"link set p2 vrf blue",
		"address add 10.0.0.1/24 dev p1",
		"address add 10.0.0.1/24 dev p2",
		"address add 192.0.2.1/24 dev up1",
		"address add 198.51.100.1/24 dev up2",
		"link set up1 master red",
		"link set up2 master blue",
		"route add default via 192.0.2.2 table 10",
		"route add default via 198.51.100.2 table 20",
	}))
	if err != nil {
		t.Fatal(err)
	}
	f := c.Engine().FIB()
	for _, tc := range []struct {
		table uint32
		want  string
	}{
		{10, "10.0.0.0/24 10.0.0.1/32 10.0.0.255/32 192.0.2.0/24 192.0.2.1/32 192.0.2.255/32 0.0.0.0/0"},
		{20, "10.0.0.0/24 10.0.0.1/32 10.0.0.255/32 198.51.100.0/24 198.51.100.1/32 198.51.100.255/32 0.0.0.0/0"},
	} {
		var got []string
		for _, r := range f.Routes(tc.table) {
			got = append(got, r.Prefix.String())
		}
		for _, w := range strings.Fields(tc.want) {
			if !strings.Contains(" "+strings.Join(got, " ")+" ", " "+w+" ") {
				t.Errorf("table %d lacks %s: %v", tc.table, w, got)
			}
		}
	}
	for _, table := range []uint32{fib.TableLocal, fib.TableMain} {
		for _, r := range f.Routes(table) {
			if strings.HasPrefix(r.Prefix.String(), "10.0.0.") || strings.HasPrefix(r.Prefix.String(), "192.0.2.") {
				t.Errorf("table %d has a VRF device's route %s", table, r.Prefix)
			}
		}
	}
	r := c.Engine().Router()
	red, blue := r.IfIndex("red"), r.IfIndex("blue")
	for name, want := range map[string][2]uint32{"p1": {10, red}, "up1": {10, red}, "p2": {20, blue}, "up2": {20, blue}} {
		i := r.Iface(name)
		if i == nil || i.VRFTable != want[0] || i.VRFIndex != want[1] {
			t.Fatalf("iface %s: %+v, want VRF table %d index %d", name, i, want[0], want[1])
		}
	}
	// The rule walk of a packet from each customer to the same outside
	// address leaves through its own VRF's uplink.
	for in, wantDev := range map[string]string{"p1": "up1", "p2": "up2"} {
		i := r.Iface(in)
		k := fib.Flow{Dst: wire.Addr4From(netip.MustParseAddr("203.0.113.9")), Src: wire.Addr4From(netip.MustParseAddr("10.0.0.2")),
			IIF: i.VRFIndex, L3mdev: i.VRFTable}
		nh := f.LookupFlow(&k)
		if nh == nil || nh.Dev != wantDev {
			t.Fatalf("from %s: nexthop %v, want via %s", in, nh, wantDev)
		}
	}
}

// Masters move as in Linux: a bridge port entering a VRF leaves its
// bridge, a VRF's port joining a bridge leaves the VRF, nomaster leaves
// either, and deleting a VRF releases its devices (their routes go back to
// local and main) and, with the last VRF, the l3mdev rule.
func TestApplyVRFMasters(t *testing.T) {
	c := newTestController()
	apply := func(lines ...string) error { return c.Apply(parseLines(t, "ctl", lines)) }
	if err := apply("link add br0 type bridge", "link set p1 master br0", "link add red type vrf table 10",
		"address add 10.1.0.1/24 dev p2", "link set p2 master red"); err != nil {
		t.Fatal(err)
	}
	f := c.Engine().FIB()
	if !f.HasCustomRules() {
		t.Fatal("a VRF without the l3mdev rule")
	}
	if err := apply("link set p1 master red"); err != nil {
		t.Fatal(err)
	}
	if p := c.Engine().Domain().Port("p1"); p == nil || p.Bridge() != nil {
		t.Fatalf("p1 still in its bridge after entering the VRF")
	}
	if v, _ := f.DevVRF("p1"); v != "red" {
		t.Fatalf("p1 in VRF %q, want red", v)
	}
	if err := apply("link set p1 master br0"); err != nil {
		t.Fatal(err)
	}
	if v, _ := f.DevVRF("p1"); v != "" {
		t.Fatalf("p1 still in VRF %q after joining br0", v)
	}
	if p := c.Engine().Domain().Port("p1"); p == nil || p.Bridge() == nil {
		t.Fatalf("p1 not in br0")
	}
	if err := apply("link set p2 nomaster"); err != nil {
		t.Fatal(err)
	}
	if res, ok := f.LookupRoute(netip.MustParseAddr("10.1.0.5")); !ok || res.Table != fib.TableMain {
		t.Fatalf("p2's connected route after nomaster: %+v %v, want in main", res, ok)
	}
	if err := apply("link set p2 master red", "link del red"); err != nil {
		t.Fatal(err)
	}
	if v, _ := f.DevVRF("p2"); v != "" || len(f.VRFs()) != 0 {
		t.Fatalf("after link del: p2 in %q, VRFs %v", v, f.VRFs())
	}
	if f.HasCustomRules() {
		t.Fatalf("the last VRF left its l3mdev rule: %v", f.Rules())
	}
	if i := c.Engine().Router().Iface("p2"); i == nil || i.VRFTable != 0 {
		t.Fatalf("p2's interface still carries a VRF: %+v", i)
	}
}

// Bad VRF lines are refused with the line named and change nothing.
func TestApplyVRFErrors(t *testing.T) {
	c := newTestController()
	if err := c.Apply(parseLines(t, "base.conf", []string{"link add red type vrf table 10", "link add br0 type bridge"})); err != nil {
		t.Fatal(err)
	}
	before := c.Snapshot(nil)
	for _, tc := range []struct{ line, want string }{
		{"link add blue type vrf table 10", "already used"},
		{"link add red type vrf table 11", "exists"},
		{"link add br0 type vrf table 12", "exists"},
		{"link add red type bridge", "exists"},
		{"link set p1 vrf br0", "not a VRF"},
		{"link set p1 master nosuch", "cannot find"},
		{"address add 10.9.0.1/24 dev red", "VRF device"},
		{"route add 10.8.0.0/24 dev red", "VRF device"},
		{"link set red down", "VRF device"},
		{"link set red master br0", "VRF device"},
	} {
		err := c.Apply(parseLines(t, "bad.conf", []string{tc.line}))
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tc.want)) || !strings.Contains(err.Error(), "bad.conf:1") {
			t.Errorf("%q: error %v, want bad.conf:1 and %q", tc.line, err, tc.want)
		}
		if after := c.Snapshot(nil); after != before {
			t.Fatalf("%q changed the state:\n%s", tc.line, lineDiff(after, before))
		}
	}
}

// `route add|del ... vrf NAME` puts the route in (takes it from) the VRF's
// table, the last of `table` and `vrf` winning as in iproute2; an unknown
// VRF is refused with the line named; a reload that moves the VRF to
// another table moves its `vrf NAME` routes with it.
func TestApplyRouteVRF(t *testing.T) {
	c := newTestController()
	if err := c.Apply(parseLines(t, "vrf.conf", []string{
		"link add red type vrf table 10",
		"link add blue type vrf table 20",
		"route add 198.51.100.0/24 dev p1 vrf red",
		"route add 198.51.100.64/26 dev p1 table 30 vrf blue",
		"route add 198.51.100.128/26 dev p1 vrf blue table 30",
	})); err != nil {
		t.Fatal(err)
	}
	f := c.Engine().FIB()
	has := func(table uint32, pfx string) bool {
		for _, r := range f.Routes(table) {
			if r.Prefix.String() == pfx {
				return true
			}
		}
		return false
	}
	for _, tc := range []struct {
		table uint32
		pfx   string
	}{{10, "198.51.100.0/24"}, {20, "198.51.100.64/26"}, {30, "198.51.100.128/26"}} {
		if !has(tc.table, tc.pfx) {
			t.Errorf("table %d lacks %s", tc.table, tc.pfx)
		}
	}
	if has(fib.TableMain, "198.51.100.0/24") || has(30, "198.51.100.64/26") {
		t.Error("a vrf route landed outside its VRF's table")
	}
	if err := c.Apply(parseLines(t, "del.conf", []string{"route del 198.51.100.0/24 dev p1 vrf red"})); err != nil {
		t.Fatal(err)
	}
	if has(10, "198.51.100.0/24") {
		t.Error("route del ... vrf red left the route in table 10")
	}
	before := c.Snapshot(nil)
	err := c.Apply(parseLines(t, "bad.conf", []string{"route add 203.0.113.0/24 dev p1 vrf nosuch"}))
	if err == nil || !strings.Contains(err.Error(), "bad.conf:1") || !strings.Contains(err.Error(), `invalid VRF "nosuch"`) {
		t.Errorf("unknown VRF: error %v, want bad.conf:1 and invalid VRF", err)
	}
	if after := c.Snapshot(nil); after != before {
		t.Fatalf("a refused line changed the state:\n%s", lineDiff(after, before))
	}
	// Reload: red moves from table 10 to 40, its route with it; a line
	// that changes from `table 20` to `vrf blue` (the same table) is the
	// same key.
	checkDiff(t, []string{
		"link add red type vrf table 10",
		"link add blue type vrf table 20",
		"route add 198.51.100.0/24 dev p1 vrf red",
		"route add 203.0.113.0/24 dev p1 table 20",
	}, []string{
		"link add red type vrf table 40",
		"link add blue type vrf table 20",
		"route add 198.51.100.0/24 dev p1 vrf red",
		"route add 203.0.113.0/24 dev p1 vrf blue",
	}, false)
}
