package fib

import (
	"net/netip"
	"testing"

	"github.com/netfwd/netfwd/wire"
)

// Two customers with the same 10.0.0.0/24 behind one router: each VRF's
// packets resolve in its own table; the default VRF does not see either.
func TestVRFOverlappingPrefixes(t *testing.T) {
	for _, compiled := range []bool{false, true} {
		f := New(Options{Compiled: compiled})
		tx := f.Begin(0)
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		for _, d := range []string{"a0", "a1", "b0", "b1", "up0"} {
			must(tx.SetLinkUp(d, true))
		}
		must(tx.AddVRF("red", 10))
		must(tx.AddVRF("blue", 20))
		if err := tx.AddVRF("green", 10); err == nil {
			t.Fatal("a second VRF on table 10 accepted")
		}
		// Addresses first, then enslave (the derived routes move), and the
		// other way round: both orders end the same.
		must(tx.AddAddress("a0", netip.MustParsePrefix("10.0.0.1/24")))
		must(tx.SetMaster("a0", "red"))
		must(tx.SetMaster("b0", "blue"))
		must(tx.AddAddress("b0", netip.MustParsePrefix("10.0.0.1/24")))
		must(tx.SetMaster("a1", "red"))
		must(tx.AddAddress("a1", netip.MustParsePrefix("192.0.2.1/30")))
		must(tx.SetMaster("b1", "blue"))
		must(tx.AddAddress("b1", netip.MustParsePrefix("192.0.2.5/30")))
		must(tx.AddAddress("up0", netip.MustParsePrefix("203.0.113.1/24")))
		must(tx.AddRoute(RouteSpec{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Gateway: netip.MustParseAddr("192.0.2.2"), Table: 10}))
		must(tx.AddRoute(RouteSpec{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Gateway: netip.MustParseAddr("192.0.2.6"), Table: 20}))
		tx.Commit()

		if len(f.Routes(TableLocal)) != 2 { // 203.0.113.1 and its broadcast
			t.Fatalf("table local: %v", f.Routes(TableLocal))
		}
		rules := f.Rules()
		if len(rules) != 4 || !rules[1].L3mdev || rules[1].Priority != 1000 {
			t.Fatalf("rules: %+v", rules)
		}
		dst := wire.Addr4From(netip.MustParseAddr("10.0.0.7"))
		cases := []struct {
			l3mdev uint32
			dev    string
		}{{10, "a0"}, {20, "b0"}}
		for _, c := range cases {
			k := Flow{Dst: dst, IIF: f.DevIndex("x"), L3mdev: c.l3mdev}
			nh := f.LookupFlow(&k)
			if nh == nil || nh.Dev != c.dev {
				t.Fatalf("compiled %t: vrf table %d: 10.0.0.7 via %v, want dev %s", compiled, c.l3mdev, nh, c.dev)
			}
			// Off-net: each VRF's default route.
			k.Dst = wire.Addr4From(netip.MustParseAddr("198.51.100.1"))
			nh = f.LookupFlow(&k)
			want := map[uint32]string{10: "a1", 20: "b1"}[c.l3mdev]
			if nh == nil || nh.Dev != want {
				t.Fatalf("vrf table %d: default via %v, want %s", c.l3mdev, nh, want)
			}
			// The VRF's own address is local in the VRF.
			k.Dst = wire.Addr4From(netip.MustParseAddr("10.0.0.1"))
			if nh = f.LookupFlow(&k); nh == nil || nh.Kind.String() != "local" {
				t.Fatalf("vrf table %d: own address %v", c.l3mdev, nh)
			}
		}
		// The default VRF has neither 10.0.0.0/24 nor a default route.
		if nh := f.LookupFlow(&Flow{Dst: dst, IIF: f.DevIndex("up0")}); nh != nil {
			t.Fatalf("default VRF: 10.0.0.7 via %v", nh)
		}
		// nomaster moves a0's routes back to local and main.
		tx = f.Begin(0)
		must(tx.SetMaster("a0", ""))
		tx.Commit()
		if nh := f.LookupFlow(&Flow{Dst: dst, IIF: f.DevIndex("up0")}); nh == nil || nh.Dev != "a0" {
			t.Fatalf("after nomaster: 10.0.0.7 via %v", nh)
		}
		for _, r := range f.Routes(10) {
			if r.NH != nil && r.NH.Dev == "a0" {
				t.Fatalf("table 10 still has %v", r.Prefix)
			}
		}
	}
}
