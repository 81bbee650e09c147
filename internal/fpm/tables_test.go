package fpm

// Routes in numbered tables (issue 29): each route goes into the table
// RTA_TABLE names (else rtm_table; 0 is main), every table by default; a
// reconnect's mark-and-sweep covers every table, and the routes zebra
// replays are never withdrawn in between.

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/rtnl"
	"github.com/netfwd/netfwd/internal/testenv"
	"github.com/netfwd/netfwd/nexthop"
	"github.com/netfwd/netfwd/wire"
)

// routeMsg builds one RTM_NEWROUTE (or DELROUTE) frame with rtm_table hdr
// and, when attr != 0, an RTA_TABLE attribute, whatever their values.
func routeMsg(typ uint16, p string, hdr uint8, attr uint32, gw string) []byte {
	r := rtnl.Route{Family: rtnl.AF_INET, DstLen: uint8(pfx(p).Bits()), Protocol: 186, Type: rtnl.RTN_UNICAST,
		Dst: pfx(p).Addr(), Priority: 20, HasPriority: true}
	if typ == rtnl.RTM_DELROUTE {
		r.Type = rtnl.RTN_UNSPEC
	} else {
		r.Gateway, r.OIF = ip(gw), 2
	}
	return appendFramed(nil, func(m []byte) []byte {
		start := len(m)
		m = rtnl.AppendRoute(m, typ, rtnl.NLM_F_REQUEST|rtnl.NLM_F_CREATE|rtnl.NLM_F_REPLACE, 0, &r)
		m[start+16+4] = hdr // rtm_table (after the 16-byte nlmsghdr)
		if attr != 0 {
			m = rtnl.AppendAttrU32(m, rtnl.RTA_TABLE, attr)
			binary.NativeEndian.PutUint32(m[start:], uint32(len(m)-start))
		}
		return m
	})
}

// tableRoutes returns the FPM routes of one table as "prefix via gw" lines.
func tableRoutes(f *fib.FIB, table uint32) []string {
	var out []string
	for _, r := range f.Routes(table) {
		if r.Owner == fib.OwnerFPM {
			out = append(out, fmt.Sprintf("%s via %s", r.Prefix, r.NH.Gateway))
		}
	}
	slices.Sort(out)
	return out
}

func TestTableOfRoute(t *testing.T) {
	var b []byte
	b = append(b, routeMsg(rtnl.RTM_NEWROUTE, "10.1.0.0/16", 254, 0, "192.0.2.1")...)    // main
	b = append(b, routeMsg(rtnl.RTM_NEWROUTE, "10.1.0.0/16", 100, 0, "192.0.2.2")...)    // 100 in the header
	b = append(b, routeMsg(rtnl.RTM_NEWROUTE, "10.1.0.0/16", 252, 1000, "192.0.2.3")...) // compat + RTA_TABLE
	b = append(b, routeMsg(rtnl.RTM_NEWROUTE, "10.2.0.0/16", 5, 100, "192.0.2.4")...)    // RTA_TABLE beats rtm_table
	b = append(b, routeMsg(rtnl.RTM_NEWROUTE, "10.3.0.0/16", 0, 0, "192.0.2.5")...)      // unspec: main
	b = append(b, routeMsg(rtnl.RTM_NEWROUTE, "10.4.0.0/16", 253, 0, "192.0.2.6")...)    // default
	f := fib.New(fib.Options{Compiled: true})
	tr := NewTranslator(fib.OwnerFPM, 1, ifaces, nil)
	if _, err := ApplyStream(f, tr, b, 100); err != nil {
		t.Fatal(err)
	}
	for table, want := range map[uint32][]string{
		fib.TableMain:    {"10.1.0.0/16 via 192.0.2.1", "10.3.0.0/16 via 192.0.2.5"},
		100:              {"10.1.0.0/16 via 192.0.2.2", "10.2.0.0/16 via 192.0.2.4"},
		1000:             {"10.1.0.0/16 via 192.0.2.3"},
		fib.TableDefault: {"10.4.0.0/16 via 192.0.2.6"},
		5:                nil,
		252:              nil,
	} {
		if got := tableRoutes(f, table); !slices.Equal(got, want) {
			t.Errorf("table %d: %q, want %q", table, got, want)
		}
	}
	if sk := tr.C.Skipped(); len(sk) != 0 {
		t.Errorf("skipped %v", sk)
	}
	got := tr.Tables()
	slices.Sort(got)
	if want := []uint32{100, 253, 254, 1000}; !slices.Equal(got, want) {
		t.Errorf("Tables() = %v, want %v", got, want)
	}

	// A delete names its table: the same prefix elsewhere stays.
	del := routeMsg(rtnl.RTM_DELROUTE, "10.1.0.0/16", 252, 1000, "")
	del = append(del, routeMsg(rtnl.RTM_DELROUTE, "10.2.0.0/16", 254, 100, "")...)
	if _, err := ApplyStream(f, tr, del, 100); err != nil {
		t.Fatal(err)
	}
	if got := tableRoutes(f, 1000); len(got) != 0 {
		t.Errorf("table 1000 after the delete: %q", got)
	}
	if got := tableRoutes(f, 100); !slices.Equal(got, []string{"10.1.0.0/16 via 192.0.2.2"}) {
		t.Errorf("table 100 after the delete: %q", got)
	}
	if got := tableRoutes(f, fib.TableMain); len(got) != 2 {
		t.Errorf("main after the deletes: %q", got)
	}

	// MainLocalOnly restricts a session to main and local.
	f2 := fib.New(fib.Options{})
	tr2 := NewTranslator(fib.OwnerFPM, 1, ifaces, nil)
	tr2.MainLocalOnly = true
	if _, err := ApplyStream(f2, tr2, b, 100); err != nil {
		t.Fatal(err)
	}
	if n := len(f2.RoutesOf(fib.OwnerFPM)); n != 2 {
		t.Errorf("MainLocalOnly: %d routes, want the 2 of main", n)
	}
	if sk := tr2.C.Skipped()[SkipTable]; sk != 4 {
		t.Errorf("MainLocalOnly: %d skipped for their table, want 4", sk)
	}
}

// A reconnect's sweep covers every table the new session delivers: a route
// of table 100 zebra does not replay is swept, the same prefix in main
// stays, a table the session did not deliver at all keeps its routes; the replayed routes
// of tables 100 and 1000 stay the same objects, and a lookup through the
// rule that selects table 100 never misses during the resync.
func TestReconnectSweepTables(t *testing.T) {
	s := newServer(t, nil, func(o *Options) { o.SweepQuiet = 400 * time.Millisecond })
	tx := s.f.Begin(1)
	if err := tx.AddRule(fib.RuleSpec{Rule: fib.Rule{Priority: 100, Src: pfx("198.18.0.0/15"), Table: 100,
		SuppressPrefixLen: -1}, PrioritySet: true, TableSet: true}); err != nil {
		t.Fatal(err)
	}
	tx.Commit()
	route := func(p, gw string, table uint32) []byte {
		return AppendNewRoute(nil, &ZebraRoute{Prefix: pfx(p), Metric: 20, Gateway: ip(gw), OIF: 2, Table: table})
	}
	first := slices.Concat(
		route("10.1.0.0/16", "192.0.2.1", 0),
		route("10.1.0.0/16", "192.0.2.100", 100),
		route("10.2.0.0/16", "192.0.2.100", 100),
		route("10.3.0.0/16", "192.0.2.100", 100),
		route("10.9.0.0/16", "192.0.2.200", 1000),
		route("10.10.0.0/16", "192.0.2.200", 2000))
	c := s.dial(t)
	s.send(t, c, first)
	waitFor(t, "first sweep", func() bool { return s.Stats().Sweeps.Load() == 1 })
	c.Close()
	waitFor(t, "disconnect", func() bool { return !s.Stats().Connected.Load() })

	before := map[string]*fib.Route{}
	for _, table := range []uint32{fib.TableMain, 100, 1000, 2000} {
		for _, r := range s.f.Routes(table) {
			before[fmt.Sprint(table, r.Prefix)] = r
		}
	}
	// The datapath's lookup: from a source the rule sends to table 100.
	flows := []fib.Flow{
		{Src: wire.Addr4From(ip("198.18.0.1")), Dst: wire.Addr4From(ip("10.1.0.1")), IIF: s.f.DevIndex("eth1")},
		{Src: wire.Addr4From(ip("198.18.0.1")), Dst: wire.Addr4From(ip("10.2.0.1")), IIF: s.f.DevIndex("eth1")},
		{Src: wire.Addr4From(ip("10.0.0.1")), Dst: wire.Addr4From(ip("10.1.0.1")), IIF: s.f.DevIndex("eth1")},
	}
	want := make([]*nexthop.Nexthop, len(flows))
	for i := range flows {
		want[i] = s.f.LookupFlow(&flows[i])
		if want[i] == nil {
			t.Fatalf("flow %d: no route before the resync", i)
		}
	}
	if want[0] == want[2] || want[0].Gateway != ip("192.0.2.100") {
		t.Fatalf("the rule does not select table 100: %v %v", want[0], want[2])
	}
	stop := make(chan struct{})
	readerErr := make(chan string, 1)
	go func() {
		defer close(readerErr)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for i := range flows {
				if nh := s.f.LookupFlow(&flows[i]); nh != want[i] {
					readerErr <- fmt.Sprintf("flow %d looked up %v during the resync, want %v", i, nh, want[i])
					return
				}
			}
			runtime.Gosched()
		}
	}()
	// zebra comes back without 10.3.0.0/16 of table 100 and replays
	// the rest (in another order).
	c2 := s.dial(t)
	s.send(t, c2, slices.Concat(
		route("10.9.0.0/16", "192.0.2.200", 1000),
		route("10.2.0.0/16", "192.0.2.100", 100),
		route("10.1.0.0/16", "192.0.2.100", 100),
		route("10.1.0.0/16", "192.0.2.1", 0)))
	if got := s.Stats().C.RoutesUnchanged.Load(); got != 4 {
		t.Fatalf("replayed routes: %d unchanged, want 4", got)
	}
	waitFor(t, "second sweep", func() bool { return s.Stats().Sweeps.Load() == 2 })
	close(stop)
	if msg, ok := <-readerErr; ok {
		t.Fatal(msg)
	}
	if n := s.Stats().SweptRoutes.Load(); n != 1 {
		t.Fatalf("swept %d routes, want 1", n)
	}
	if got := tableRoutes(s.f, 100); !slices.Equal(got, []string{"10.1.0.0/16 via 192.0.2.100", "10.2.0.0/16 via 192.0.2.100"}) {
		t.Fatalf("table 100 after the sweep: %q", got)
	}
	for _, table := range []uint32{fib.TableMain, 100, 1000} {
		for _, r := range s.f.Routes(table) {
			if r.Owner == fib.OwnerFPM && r != before[fmt.Sprint(table, r.Prefix)] {
				t.Errorf("table %d route %s replaced during the resync (want the same object)", table, r.Prefix)
			}
		}
	}
	if got := tableRoutes(s.f, 1000); len(got) != 1 {
		t.Errorf("table 1000: %q", got)
	}
	// Table 2000, which the new session did not deliver at all (zebra
	// 8.4's replay skips tables other than the VRF's own), keeps its route.
	if got := tableRoutes(s.f, 2000); !slices.Equal(got, []string{"10.10.0.0/16 via 192.0.2.200"}) {
		t.Errorf("table 2000 (not replayed) after the sweep: %q, want its route kept", got)
	}
	// Lookups from the rule's source in a prefix table 100 lost fall
	// through to main, as in the kernel.
	lost := fib.Flow{Src: wire.Addr4From(ip("198.18.0.1")), Dst: wire.Addr4From(ip("10.3.0.1")), IIF: s.f.DevIndex("eth1")}
	if nh := s.f.LookupFlow(&lost); nh != nil {
		t.Errorf("10.3.0.1 from 198.18.0.1 after the sweep: %v, want no route", nh)
	}
	_ = netip.Addr{}
}

// After a restart of netfwd, zebra's routes of every table are seeded from
// the kernel (a dump of all tables) into their tables; zebra's replay
// confirms them in place (unchanged) and the sweep removes the one of
// table 100 it does not replay. Other programs' routes in table 100 are
// not taken.
func TestSeedFromKernelTables(t *testing.T) {
	testenv.RequireRoot(t)
	ns := testenv.Netns(t, "seedt")
	for _, c := range [][]string{
		{"link", "add", "v0", "type", "veth", "peer", "name", "v1"},
		{"link", "set", "v0", "up"},
		{"link", "set", "v1", "up"},
		{"address", "add", "192.0.2.2/24", "dev", "v0"},
		{"route", "add", "10.1.0.0/16", "via", "192.0.2.1", "dev", "v0", "proto", "bgp", "metric", "20", "table", "100"},
		{"route", "add", "10.2.0.0/16", "via", "192.0.2.1", "dev", "v0", "proto", "bgp", "metric", "20", "table", "100"},
		{"route", "add", "10.3.0.0/16", "via", "192.0.2.1", "dev", "v0", "proto", "bird", "table", "100"},
		{"route", "add", "blackhole", "10.4.0.0/16", "proto", "196", "metric", "20", "table", "70000"},
		{"route", "add", "10.5.0.0/16", "via", "192.0.2.1", "dev", "v0", "proto", "bgp", "metric", "20"},
	} {
		testenv.Run(t, "ip", append([]string{"-n", ns}, c...)...)
	}
	var links []struct{ Ifindex uint32 }
	json.Unmarshal([]byte(testenv.Run(t, "ip", "-n", ns, "-j", "link", "show", "v0")), &links)
	if len(links) != 1 {
		t.Fatal("no v0")
	}
	v0 := links[0].Ifindex
	var c *rtnl.Conn
	if err := pktio.InNetns(ns, func() (err error) { c, err = rtnl.Open(); return err }); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadTimeout(5 * time.Second)
	ifaceOf := func(i uint32) (string, bool) { return "eth0", i == v0 }
	f := fib.New(fib.Options{Compiled: true})
	s, err := Listen("127.0.0.1:0", Options{FIB: f, Iface: ifaceOf, SweepQuiet: 300 * time.Millisecond, StaleTime: -1,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if n, err := s.SeedFromKernel(c); err != nil || n != 4 {
		t.Fatalf("seeded %d routes, want 4: %v", n, err)
	}
	ts := &testServer{s, f}
	want := []string{
		"10.5.0.0/16 via 192.0.2.1 dev eth0 proto bgp metric 20",
		"10.1.0.0/16 via 192.0.2.1 dev eth0 table 100 proto bgp metric 20",
		"10.2.0.0/16 via 192.0.2.1 dev eth0 table 100 proto bgp metric 20",
		"blackhole 10.4.0.0/16 table 70000 proto 196 metric 20",
	}
	wantRoutes(t, f, want...)

	go s.Serve()
	conn := ts.dial(t)
	var b []byte
	b = AppendNewRoute(b, &ZebraRoute{Prefix: pfx("10.5.0.0/16"), Metric: 20, Gateway: ip("192.0.2.1"), OIF: v0})
	b = AppendNewRoute(b, &ZebraRoute{Prefix: pfx("10.1.0.0/16"), Metric: 20, Gateway: ip("192.0.2.1"), OIF: v0, Table: 100})
	b = AppendNewRoute(b, &ZebraRoute{Prefix: pfx("10.4.0.0/16"), Metric: 20, Protocol: 196, Type: rtnl.RTN_BLACKHOLE, Table: 70000})
	ts.send(t, conn, b)
	if got := s.Stats().C.RoutesUnchanged.Load(); got != 3 {
		t.Errorf("replayed seeded routes: %d unchanged, want 3", got)
	}
	waitFor(t, "the sweep", func() bool { return s.Stats().Sweeps.Load() > 0 })
	wantRoutes(t, f, "10.5.0.0/16 via 192.0.2.1 dev eth0 proto bgp metric 20",
		"10.1.0.0/16 via 192.0.2.1 dev eth0 table 100 proto bgp metric 20",
		"blackhole 10.4.0.0/16 table 70000 proto 196 metric 20")
}
