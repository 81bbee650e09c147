package fib

import (
	"net/netip"
	"testing"

	"github.com/netfwd/netfwd/nexthop"
)

// TestConfigDerives: the kernel's connected route for an address netfwd
// holds is recognised whether the device is up or down (down, netfwd has
// withdrawn its own: a twin's copy would otherwise be learned and stay
// beside it when the port came back); other routes are not.
func TestConfigDerives(t *testing.T) {
	f := New(Options{})
	tx := f.Begin(0)
	if err := tx.AddAddress("eth6", netip.MustParsePrefix("192.0.2.2/24")); err != nil {
		t.Fatal(err)
	}
	tx.Commit()
	connected := &LearnedRoute{Prefix: netip.MustParsePrefix("192.0.2.0/24"), Type: Unicast, Proto: ProtoKernel,
		Scope: ScopeLink, Src: netip.MustParseAddr("192.0.2.2"), NH: &nexthop.Nexthop{Kind: nexthop.Unicast, Dev: "eth6"}}
	other := *connected
	other.Prefix = netip.MustParsePrefix("198.51.100.0/24")
	gw := *connected
	gw.NH = &nexthop.Nexthop{Kind: nexthop.Unicast, Dev: "eth6", Gateway: netip.MustParseAddr("192.0.2.1")}
	for _, up := range []bool{true, false} {
		tx := f.Begin(0)
		if err := tx.SetLinkUp("eth6", up); err != nil {
			t.Fatal(err)
		}
		if !tx.ConfigDerives(connected) {
			t.Errorf("up %v: the connected route of 192.0.2.2/24 not recognised", up)
		}
		if tx.ConfigDerives(&other) || tx.ConfigDerives(&gw) {
			t.Errorf("up %v: a route the address does not derive recognised", up)
		}
		tx.Commit()
	}
}
