package fib

import (
	"net/netip"
	"testing"

	"github.com/netfwd/netfwd/wire"
)

// The router's own sources: its addresses, the broadcast addresses of its
// subnets, local and broadcast /32 routes of the local table; not the
// addresses inside a local route for a whole range.
func TestOwnAddrs(t *testing.T) {
	f := New(Options{})
	tx := f.Begin(0)
	pfx := netip.MustParsePrefix
	for _, err := range []error{
		tx.AddAddress("eth0", pfx("10.0.0.1/24")),
		tx.AddAddress("eth1", pfx("192.0.2.9/30")),
		tx.AddRoute(RouteSpec{Prefix: pfx("10.9.0.0/16"), Type: Local, Table: TableLocal, Dev: "eth0"}),
		tx.AddRoute(RouteSpec{Prefix: pfx("10.9.1.0/24"), Table: TableLocal, Dev: "eth0"}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	tx.Commit()
	for a, want := range map[string]bool{
		"10.0.0.1": true, "10.0.0.255": true, "10.0.0.2": false, "10.0.1.1": false,
		"192.0.2.9": true, "192.0.2.11": true, "192.0.2.10": false,
		"10.9.0.1": false, "10.9.1.7": false, "198.51.100.1": false,
	} {
		if got := f.IsLocalOrBroadcast(wire.Addr4From(netip.MustParseAddr(a))); got != want {
			t.Errorf("%s: %v, want %v", a, got, want)
		}
	}
	tx = f.Begin(0)
	if err := tx.DelAddress("eth0", pfx("10.0.0.1/24")); err != nil {
		t.Fatal(err)
	}
	tx.Commit()
	if f.IsLocalOrBroadcast(wire.Addr4From(netip.MustParseAddr("10.0.0.1"))) {
		t.Fatal("a deleted address is still the router's")
	}
}

// Many addresses: the perfect-hash table places every one (and answers no
// for the others).
func TestOwnAddrsMany(t *testing.T) {
	f := New(Options{})
	tx := f.Begin(0)
	want := map[wire.Addr4]bool{}
	for i := range 300 {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 4), byte(i&15) << 4, 1}), 28)
		if err := tx.AddAddress("eth0", p); err != nil {
			t.Fatal(err)
		}
		a := wire.Addr4From(p.Addr())
		want[a], want[a+14] = true, true // the address and its /28's broadcast
	}
	tx.Commit()
	for a := wire.Addr4(0x0a000000); a < 0x0a200000; a++ {
		if got := f.IsLocalOrBroadcast(a); got != want[a] {
			t.Fatalf("%s: %v, want %v", a, got, want[a])
		}
	}
}
