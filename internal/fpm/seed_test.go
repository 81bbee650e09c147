package fpm

import (
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/rtnl"
	"github.com/netfwd/netfwd/internal/testenv"
)

// TestSeedFromKernel: zebra's routes in the kernel (proto bgp, inline and
// through a nexthop object) are in the FIB before any session, other
// programs' routes are not; the first session replays one of the two and
// its sweep removes the other.
func TestSeedFromKernel(t *testing.T) {
	testenv.RequireRoot(t)
	ns := testenv.Netns(t, "seed")
	testenv.Run(t, "ip", "-n", ns, "link", "add", "v0", "type", "veth", "peer", "name", "v1")
	testenv.Run(t, "ip", "-n", ns, "link", "set", "v0", "up")
	testenv.Run(t, "ip", "-n", ns, "link", "set", "v1", "up")
	testenv.Run(t, "ip", "-n", ns, "address", "add", "192.0.2.2/24", "dev", "v0")
	testenv.Run(t, "ip", "-n", ns, "nexthop", "add", "id", "7", "via", "192.0.2.1", "dev", "v0", "proto", "bgp")
	testenv.Run(t, "ip", "-n", ns, "route", "add", "10.1.0.0/16", "nhid", "7", "proto", "bgp", "metric", "20")
	testenv.Run(t, "ip", "-n", ns, "route", "add", "10.2.0.0/16", "via", "192.0.2.1", "dev", "v0", "proto", "bgp", "metric", "20")
	testenv.Run(t, "ip", "-n", ns, "route", "add", "10.3.0.0/16", "via", "192.0.2.1", "dev", "v0", "proto", "bird")
	var v0 uint32
	ifaceOf := func(i uint32) (string, bool) { return "eth0", i == v0 }
	var c *rtnl.Conn
	err := pktio.InNetns(ns, func() (err error) {
		c, err = rtnl.Open()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadTimeout(5 * time.Second)
	var links []struct{ Ifindex uint32 }
	json.Unmarshal([]byte(testenv.Run(t, "ip", "-n", ns, "-j", "link", "show", "v0")), &links)
	if len(links) != 1 {
		t.Fatal("no v0")
	}
	v0 = links[0].Ifindex

	o := Options{FIB: fib.New(fib.Options{Compiled: true}), Iface: ifaceOf, SweepQuiet: 300 * time.Millisecond, StaleTime: -1,
		Logger: slog.New(slog.DiscardHandler)}
	s, err := Listen("127.0.0.1:0", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	n, err := s.SeedFromKernel(c)
	if err != nil || n != 2 {
		t.Fatalf("seeded %d routes: %v", n, err)
	}
	ts := &testServer{s, o.FIB}
	wantRoutes(t, ts.f, "10.1.0.0/16 via 192.0.2.1 dev eth0 proto bgp metric 20", "10.2.0.0/16 via 192.0.2.1 dev eth0 proto bgp metric 20")

	// zebra connects and replays 10.1.0.0/16 only: the sweep keeps it
	// and removes 10.2.0.0/16.
	go s.Serve()
	conn := ts.dial(t)
	var b []byte
	b = AppendNexthop(b, &rtnl.Nexthop{Family: rtnl.AF_INET, ID: 3, OIF: v0, Gateway: ip("192.0.2.1")}, false)
	b = AppendNewRoute(b, &ZebraRoute{Prefix: pfx("10.1.0.0/16"), Metric: 20, NHID: 3})
	ts.send(t, conn, b)
	waitFor(t, "the sweep", func() bool { return s.Stats().Sweeps.Load() > 0 })
	wantRoutes(t, ts.f, "10.1.0.0/16 via 192.0.2.1 dev eth0 proto bgp metric 20")
}
