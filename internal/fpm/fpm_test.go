package fpm

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/rtnl"
	"github.com/netfwd/netfwd/internal/show"
	"github.com/netfwd/netfwd/nexthop"
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func ip(s string) netip.Addr    { return netip.MustParseAddr(s) }

// ifaces maps the recordings' interface index 2 (zebra's namespace) and a
// few more to device names.
func ifaces(i uint32) (string, bool) {
	if i >= 2 && i < 10 {
		return fmt.Sprintf("eth%d", i-2), true
	}
	return "", false
}

type testServer struct {
	*Server
	f *fib.FIB
}

func newServer(t *testing.T, f *fib.FIB, tweak func(*Options)) *testServer {
	t.Helper()
	if f == nil {
		f = fib.New(fib.Options{Compiled: true})
	}
	o := Options{FIB: f, Iface: ifaces, SweepQuiet: 300 * time.Millisecond, StaleTime: -1,
		Logger: slog.New(slog.DiscardHandler)}
	if tweak != nil {
		tweak(&o)
	}
	s, err := Listen("127.0.0.1:0", o)
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	t.Cleanup(func() { s.Close() })
	return &testServer{s, f}
}

func (s *testServer) dial(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// send writes a stream and waits until the server has taken frames more
// frames in total.
func (s *testServer) send(t *testing.T, c net.Conn, stream []byte) {
	t.Helper()
	frames := s.Stats().Frames.Load() + uint64(countFrames(t, stream))
	if _, err := c.Write(stream); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "frames", func() bool { return s.Stats().Frames.Load() >= frames })
}

func countFrames(t *testing.T, b []byte) int {
	n := 0
	for len(b) > 0 {
		_, _, l, err := NextFrame(b)
		if err != nil || l == 0 {
			t.Fatalf("test stream: frame %d: %v", n, err)
		}
		b = b[l:]
		n++
	}
	return n
}

// learned returns the FPM routes as `ip route show` lines, sorted.
func learned(f *fib.FIB) []string {
	var out []string
	for _, r := range f.RoutesOf(fib.OwnerFPM) {
		j := show.RouteOf(r, true)
		out = append(out, j.Text())
	}
	slices.Sort(out)
	return out
}

func wantRoutes(t *testing.T, f *fib.FIB, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := learned(f); !slices.Equal(got, want) {
		t.Fatalf("learned routes:\n got %q\nwant %q", got, want)
	}
}

// Streams recorded from FRR 8.4.4's zebra (dplane_fpm_nl) fed three
// prefixes by BIRD over eBGP: the replay after connecting (nexthop objects,
// the connected route, the BGP routes, an IPv6 route), a withdrawal of all
// three (RTM_DELROUTE, then RTM_DELNEXTHOP) and their return with a new
// nexthop id. With and without nexthop groups.
func TestRecordedZebraStreams(t *testing.T) {
	for _, file := range []string{"zebra-8.4.4-nhg.fpm", "zebra-8.4.4-nonhg.fpm"} {
		t.Run(file, func(t *testing.T) {
			stream, err := os.ReadFile("testdata/" + file)
			if err != nil {
				t.Fatal(err)
			}
			s := newServer(t, nil, nil)
			c := s.dial(t)
			s.send(t, c, stream)
			wantRoutes(t, s.f,
				"198.18.1.0/24 via 10.99.0.2 dev eth0 proto bgp metric 20",
				"198.18.2.0/24 via 10.99.0.2 dev eth0 proto bgp metric 20",
				"203.0.113.0/25 via 10.99.0.2 dev eth0 proto bgp metric 20")
			st := s.Stats()
			sk := st.C.Skipped()
			if sk[SkipFamily] == 0 || sk[SkipKernelProto] == 0 {
				t.Errorf("skips: %v (want the IPv6 route and the connected route counted)", sk)
			}
			if st.C.RoutesDeleted.Load() != 3 || st.C.RoutesAdded.Load() != 6 {
				t.Errorf("added %d deleted %d, want 6 and 3", st.C.RoutesAdded.Load(), st.C.RoutesDeleted.Load())
			}
			if len(st.Malformed()) != 0 {
				t.Errorf("malformed: %v", st.Malformed())
			}
			if nh := s.f.Lookup(ip("198.18.2.77")); nh == nil || nh.Gateway != ip("10.99.0.2") || nh.Dev != "eth0" {
				t.Errorf("lookup: %v", nh)
			}
		})
	}
}

// Multipath (RTA_MULTIPATH and nexthop groups with weights), the error
// route types, blackhole nexthop objects, and what is skipped: IPv6,
// unknown message types, protobuf frames; a numbered table is kept.
func TestRouteKinds(t *testing.T) {
	s := newServer(t, nil, nil)
	c := s.dial(t)
	var b []byte
	b = AppendNexthop(b, &rtnl.Nexthop{Family: rtnl.AF_INET, ID: 1, OIF: 2, Gateway: ip("192.0.2.1")}, false)
	b = AppendNexthop(b, &rtnl.Nexthop{Family: rtnl.AF_INET, ID: 2, OIF: 3, Gateway: ip("198.18.0.1")}, false)
	b = AppendNexthop(b, &rtnl.Nexthop{ID: 10, Group: []rtnl.GroupMember{{ID: 1, Weight: 1}, {ID: 2, Weight: 3}}}, false)
	b = AppendNexthop(b, &rtnl.Nexthop{ID: 11, Blackhole: true}, false)
	b = AppendNexthop(b, &rtnl.Nexthop{Family: rtnl.AF_INET6, ID: 12, OIF: 2}, false)
	b = AppendNewRoute(b, &ZebraRoute{Prefix: pfx("10.1.0.0/16"), Metric: 20, NHID: 10})
	b = AppendNewRoute(b, &ZebraRoute{Prefix: pfx("10.2.0.0/16"), Metric: 20, Paths: []rtnl.NextHop{
		{Weight: 2, OIF: 2, Gateway: ip("192.0.2.5")}, {Weight: 1, OIF: 4, Gateway: ip("203.0.113.5")}}})
	b = AppendNewRoute(b, &ZebraRoute{Prefix: pfx("10.3.0.0/16"), Protocol: 196, Type: rtnl.RTN_UNREACHABLE})
	b = AppendNewRoute(b, &ZebraRoute{Prefix: pfx("10.4.0.0/16"), Protocol: 196, Type: rtnl.RTN_PROHIBIT})
	b = AppendNewRoute(b, &ZebraRoute{Prefix: pfx("10.5.0.0/16"), Protocol: 196, Type: rtnl.RTN_BLACKHOLE})
	b = AppendNewRoute(b, &ZebraRoute{Prefix: pfx("10.6.0.0/16"), Metric: 20, NHID: 11})
	b = AppendNewRoute(b, &ZebraRoute{Prefix: pfx("10.7.0.0/16"), Metric: 20, NHID: 12})                          // IPv6 nexthop: unknown id
	b = AppendNewRoute(b, &ZebraRoute{Prefix: pfx("10.8.0.0/16"), Metric: 20, NHID: 99})                          // never defined
	b = AppendNewRoute(b, &ZebraRoute{Prefix: pfx("10.9.0.0/16"), Metric: 20, Gateway: ip("192.0.2.1"), OIF: 42}) // unknown ifindex
	b = AppendNewRoute(b, &ZebraRoute{Prefix: pfx("10.10.0.0/16"), Metric: 20, NHID: 1, Table: 100})
	b = AppendNewRoute(b, &ZebraRoute{Prefix: pfx("10.11.0.0/16"), Metric: 20, NHID: 1, Type: rtnl.RTN_MULTICAST})
	v6 := rtnl.Route{Family: rtnl.AF_INET6, DstLen: 32, Table: 254, Protocol: 186, Type: rtnl.RTN_UNICAST, Dst: ip("2001:db8::"), OIF: 2}
	b = appendFramed(b, func(m []byte) []byte { return rtnl.AppendRoute(m, rtnl.RTM_NEWROUTE, 0, 0, &v6) })
	link := rtnl.Link{Index: 2, Name: "eth0"}
	b = appendFramed(b, func(m []byte) []byte { return rtnl.AppendLink(m, rtnl.RTM_NEWLINK, 0, 0, &link) })
	b = append(b, Version, TypeProtobuf, 0, 8, 1, 2, 3, 4)
	s.send(t, c, b)
	wantRoutes(t, s.f,
		"10.1.0.0/16 proto bgp metric 20\n\tnexthop via 192.0.2.1 dev eth0 weight 1\n\tnexthop via 198.18.0.1 dev eth1 weight 3",
		"10.2.0.0/16 proto bgp metric 20\n\tnexthop via 192.0.2.5 dev eth0 weight 2\n\tnexthop via 203.0.113.5 dev eth2 weight 1",
		"unreachable 10.3.0.0/16 proto 196",
		"prohibit 10.4.0.0/16 proto 196",
		"blackhole 10.5.0.0/16 proto 196",
		"blackhole 10.6.0.0/16 proto bgp metric 20",
		"10.10.0.0/16 via 192.0.2.1 dev eth0 table 100 proto bgp metric 20") // every table, as the kernel
	if nh := s.f.Lookup(ip("10.6.1.1")); nh == nil || nh.Kind != nexthop.Blackhole {
		t.Errorf("nhid blackhole: %v", nh)
	}
	g := s.f.Lookup(ip("10.1.2.3"))
	if g == nil || g.Group == nil || len(g.Group.Members) != 2 || g.Group.Members[1].Weight != 3 {
		t.Fatalf("group: %v", g)
	}
	sk := s.Stats().C.Skipped()
	for reason, n := range map[string]uint64{SkipFamily: 2, SkipNexthopID: 2, SkipIface: 1, SkipType: 1, SkipMessage: 1} {
		if sk[reason] != n {
			t.Errorf("skipped %s: %d, want %d (all: %v)", reason, sk[reason], n, sk)
		}
	}
	if s.Stats().SkippedFrames.Load() != 1 {
		t.Errorf("protobuf frame not counted")
	}
}

// A malformed frame closes the connection and applies nothing of itself
// (the frames before it stay applied); zebra's reconnection works.
func TestMalformedFrame(t *testing.T) {
	s := newServer(t, nil, nil)
	c := s.dial(t)
	var b []byte
	b = AppendNexthop(b, &rtnl.Nexthop{Family: rtnl.AF_INET, ID: 1, OIF: 2, Gateway: ip("192.0.2.1")}, false)
	b = AppendNewRoute(b, &ZebraRoute{Prefix: pfx("10.1.0.0/16"), Metric: 20, NHID: 1})
	// A frame with a good route and a truncated second message.
	good := rtnl.AppendRoute(nil, rtnl.RTM_NEWROUTE, rtnl.NLM_F_CREATE|rtnl.NLM_F_REPLACE, 0,
		&rtnl.Route{Family: rtnl.AF_INET, DstLen: 16, Table: 254, Protocol: 186, Type: rtnl.RTN_UNICAST, Dst: ip("10.2.0.0"), NHID: 1})
	bad := slices.Clone(good)
	bad[0] = byte(len(bad) + 8) // the header claims more bytes than there are
	b = AppendFrame(b, append(slices.Clone(good), bad...))
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "malformed frame", func() bool { return len(s.Stats().Malformed()) > 0 })
	waitFor(t, "close", func() bool { return !s.Stats().Connected.Load() })
	wantRoutes(t, s.f, "10.1.0.0/16 via 192.0.2.1 dev eth0 proto bgp metric 20")
	if m := s.Stats().Malformed(); m["bad_netlink_message_length"] != 1 {
		t.Fatalf("malformed: %v", m)
	}
	// Zebra reconnects and replays.
	c2 := s.dial(t)
	var r []byte
	r = AppendNexthop(r, &rtnl.Nexthop{Family: rtnl.AF_INET, ID: 3, OIF: 2, Gateway: ip("192.0.2.1")}, false)
	r = AppendNewRoute(r, &ZebraRoute{Prefix: pfx("10.1.0.0/16"), Metric: 20, NHID: 3})
	r = AppendNewRoute(r, &ZebraRoute{Prefix: pfx("10.2.0.0/16"), Metric: 20, NHID: 3})
	s.send(t, c2, r)
	wantRoutes(t, s.f, "10.1.0.0/16 via 192.0.2.1 dev eth0 proto bgp metric 20",
		"10.2.0.0/16 via 192.0.2.1 dev eth0 proto bgp metric 20")
}

// After a reconnect (a zebra restart: new nexthop ids) zebra replays what
// it still has: replayed routes never change (the nexthop objects are found
// by content), forwarding keeps using the routes not replayed yet, and the
// sweep after the quiet period removes the ones not replayed.
func TestReconnectSweep(t *testing.T) {
	s := newServer(t, nil, func(o *Options) { o.SweepQuiet = 400 * time.Millisecond })
	c := s.dial(t)
	session := func(nhid uint32, prefixes ...string) []byte {
		var b []byte
		b = AppendNexthop(b, &rtnl.Nexthop{Family: rtnl.AF_INET, ID: nhid, OIF: 2, Gateway: ip("192.0.2.1")}, false)
		for _, p := range prefixes {
			b = AppendNewRoute(b, &ZebraRoute{Prefix: pfx(p), Metric: 20, NHID: nhid})
		}
		return b
	}
	s.send(t, c, session(5, "10.1.0.0/16", "10.2.0.0/16", "10.3.0.0/16"))
	waitFor(t, "first sweep", func() bool { return s.Stats().Sweeps.Load() == 1 })
	c.Close()
	waitFor(t, "disconnect", func() bool { return !s.Stats().Connected.Load() })

	// The replayed routes must never change: their *Route objects stay the
	// same, and a reader looking them up throughout the resync always gets
	// the same nexthop (never none, never another object).
	before := map[netip.Prefix]*fib.Route{}
	for _, r := range s.f.Routes(fib.TableMain) {
		before[r.Prefix] = r
	}
	probes := []netip.Addr{ip("10.1.0.1"), ip("10.2.0.1")}
	want := []*nexthop.Nexthop{s.f.Lookup(probes[0]), s.f.Lookup(probes[1])}
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
			for i, a := range probes {
				if nh := s.f.Lookup(a); nh != want[i] {
					readerErr <- fmt.Sprintf("%s looked up %v during the resync, want %v", a, nh, want[i])
					return
				}
			}
			runtime.Gosched()
		}
	}()
	c2 := s.dial(t)
	s.send(t, c2, session(77, "10.1.0.0/16", "10.2.0.0/16"))
	// Before the sweep the route not replayed still forwards.
	if nh := s.f.Lookup(ip("10.3.0.1")); nh == nil {
		t.Fatal("10.3.0.0/16 gone before the sweep")
	}
	if got := s.Stats().C.RoutesUnchanged.Load(); got != 2 {
		t.Fatalf("replayed routes: %d unchanged, want 2", got)
	}
	waitFor(t, "second sweep", func() bool { return s.Stats().Sweeps.Load() == 2 })
	wantRoutes(t, s.f, "10.1.0.0/16 via 192.0.2.1 dev eth0 proto bgp metric 20",
		"10.2.0.0/16 via 192.0.2.1 dev eth0 proto bgp metric 20")
	close(stop)
	if msg, ok := <-readerErr; ok {
		t.Fatal(msg)
	}
	for _, r := range s.f.Routes(fib.TableMain) {
		if r != before[r.Prefix] {
			t.Errorf("route %s replaced during the resync (want the same object: unchanged)", r.Prefix)
		}
	}
	if s.Stats().SweptRoutes.Load() != 1 {
		t.Fatalf("swept %d", s.Stats().SweptRoutes.Load())
	}
}

// A lost session's routes go when no new session starts within StaleTime.
func TestStaleTimeout(t *testing.T) {
	s := newServer(t, nil, func(o *Options) { o.StaleTime = 300 * time.Millisecond })
	c := s.dial(t)
	var b []byte
	b = AppendNewRoute(b, &ZebraRoute{Prefix: pfx("10.1.0.0/16"), Metric: 20, Gateway: ip("192.0.2.1"), OIF: 2})
	s.send(t, c, b)
	wantRoutes(t, s.f, "10.1.0.0/16 via 192.0.2.1 dev eth0 proto bgp metric 20")
	c.Close()
	waitFor(t, "stale flush", func() bool { return s.Stats().StaleFlushes.Load() == 1 })
	wantRoutes(t, s.f)
	tx := s.f.Begin(1)
	if n := tx.Nexthops().Len(); n != 0 {
		t.Errorf("%d nexthops left", n)
	}
	tx.Abort()
}

// Nexthop replace moves the routes that use the id (and groups containing
// it); nexthop delete removes them, as in the kernel.
func TestNexthopCascade(t *testing.T) {
	s := newServer(t, nil, nil)
	c := s.dial(t)
	var b []byte
	b = AppendNexthop(b, &rtnl.Nexthop{Family: rtnl.AF_INET, ID: 5, OIF: 2, Gateway: ip("192.0.2.1")}, false)
	b = AppendNexthop(b, &rtnl.Nexthop{Family: rtnl.AF_INET, ID: 6, OIF: 3, Gateway: ip("198.18.0.1")}, false)
	b = AppendNexthop(b, &rtnl.Nexthop{ID: 10, Group: []rtnl.GroupMember{{ID: 5, Weight: 1}, {ID: 6, Weight: 1}}}, false)
	b = AppendNewRoute(b, &ZebraRoute{Prefix: pfx("10.1.0.0/16"), Metric: 20, NHID: 5})
	b = AppendNewRoute(b, &ZebraRoute{Prefix: pfx("10.2.0.0/16"), Metric: 20, NHID: 10})
	b = AppendNexthop(b, &rtnl.Nexthop{Family: rtnl.AF_INET, ID: 5, OIF: 2, Gateway: ip("192.0.2.2")}, false)
	s.send(t, c, b)
	wantRoutes(t, s.f, "10.1.0.0/16 via 192.0.2.2 dev eth0 proto bgp metric 20",
		"10.2.0.0/16 proto bgp metric 20\n\tnexthop via 192.0.2.2 dev eth0 weight 1\n\tnexthop via 198.18.0.1 dev eth1 weight 1")
	b = AppendNexthop(nil, &rtnl.Nexthop{ID: 6}, true)
	s.send(t, c, b)
	wantRoutes(t, s.f, "10.1.0.0/16 via 192.0.2.2 dev eth0 proto bgp metric 20",
		"10.2.0.0/16 proto bgp metric 20\n\tnexthop via 192.0.2.2 dev eth0 weight 1")
	b = AppendNexthop(nil, &rtnl.Nexthop{ID: 5}, true)
	s.send(t, c, b)
	wantRoutes(t, s.f)
}

// Zebra's routes beside the configuration's: same prefix and metric, both
// stay; the configured one decides; each side deletes only its own.
func TestConfigAndFPMOwnership(t *testing.T) {
	f := fib.New(fib.Options{})
	tx := f.Begin(1)
	if err := tx.AddAddress("eth0", pfx("192.0.2.10/24")); err != nil {
		t.Fatal(err)
	}
	if err := tx.AddRoute(fib.RouteSpec{Prefix: pfx("10.1.0.0/16"), Gateway: ip("192.0.2.99"), Metric: 20, MetricSet: true}); err != nil {
		t.Fatal(err)
	}
	tx.Commit()
	s := newServer(t, f, nil)
	c := s.dial(t)
	b := AppendNewRoute(nil, &ZebraRoute{Prefix: pfx("10.1.0.0/16"), Metric: 20, Gateway: ip("192.0.2.1"), OIF: 2})
	s.send(t, c, b)
	if nh := f.Lookup(ip("10.1.0.1")); nh.Gateway != ip("192.0.2.99") {
		t.Fatalf("the configured route must decide: %v", nh)
	}
	tx = f.Begin(1)
	err := tx.DelRoute(fib.RouteSpec{Prefix: pfx("10.1.0.0/16"), Gateway: ip("192.0.2.1")})
	if !strings.Contains(fmt.Sprint(err), "learned from fpm") {
		t.Fatalf("config delete of the FPM route: %v", err)
	}
	tx.Abort()
	s.send(t, c, AppendDelRoute(nil, &ZebraRoute{Prefix: pfx("10.1.0.0/16"), Metric: 20}))
	s.send(t, c, AppendDelRoute(nil, &ZebraRoute{Prefix: pfx("10.1.0.0/16"), Metric: 20}))
	if got := len(f.Routes(fib.TableMain)); got != 2 { // connected + the configured route
		t.Fatalf("routes: %v", f.Routes(fib.TableMain))
	}
	if s.Stats().C.Skipped()[SkipNoRoute] != 1 {
		t.Fatalf("second delete: %v", s.Stats().C.Skipped())
	}
}

// A stream longer than a batch is applied in several transactions, all of
// it, without waiting for more data.
func TestBatchLimits(t *testing.T) {
	s := newServer(t, nil, func(o *Options) { o.MaxBatch = 7 })
	c := s.dial(t)
	var b []byte
	var want []string
	for i := range 100 {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 0}), 16)
		b = AppendNewRoute(b, &ZebraRoute{Prefix: p, Metric: 20, Gateway: ip("192.0.2.1"), OIF: 2})
		want = append(want, p.String()+" via 192.0.2.1 dev eth0 proto bgp metric 20")
	}
	s.send(t, c, b)
	wantRoutes(t, s.f, want...)
	if n := s.Stats().Batches.Load(); n < 100/7 {
		t.Fatalf("%d transactions for 100 messages in batches of 7", n)
	}
}

// The sweep after a reconnect waits until the new session has delivered a
// route of every protocol it would sweep: zebra replays its static routes
// at once and BGP routes only once bgpd has re-established its sessions.
func TestSweepWaitsForEveryProtocol(t *testing.T) {
	s := newServer(t, nil, func(o *Options) { o.SweepQuiet = 200 * time.Millisecond; o.SweepMax = 5 * time.Second })
	route := func(p string, proto uint8) []byte {
		return AppendNewRoute(nil, &ZebraRoute{Prefix: pfx(p), Protocol: proto, Metric: 20, Gateway: ip("192.0.2.1"), OIF: 2})
	}
	c := s.dial(t)
	s.send(t, c, append(route("10.1.0.0/16", 186), route("10.2.0.0/16", 196)...))
	waitFor(t, "first sweep", func() bool { return s.Stats().Sweeps.Load() == 1 })
	c.Close()
	waitFor(t, "disconnect", func() bool { return !s.Stats().Connected.Load() })
	c2 := s.dial(t)
	s.send(t, c2, route("10.2.0.0/16", 196)) // static first
	time.Sleep(800 * time.Millisecond)
	if n := s.Stats().Sweeps.Load(); n != 1 {
		t.Fatalf("swept before any BGP route was replayed (%d sweeps)", n)
	}
	s.send(t, c2, route("10.3.0.0/16", 186)) // BGP, but not 10.1.0.0/16
	waitFor(t, "second sweep", func() bool { return s.Stats().Sweeps.Load() == 2 })
	wantRoutes(t, s.f, "10.2.0.0/16 via 192.0.2.1 dev eth0 proto 196 metric 20",
		"10.3.0.0/16 via 192.0.2.1 dev eth0 proto bgp metric 20")
}

// waitEnded waits until the n-th session has started and ended.
func (s *testServer) waitEnded(t *testing.T, n uint64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("session %d to end", n), func() bool {
		return s.Stats().Connections.Load() >= n && !s.Stats().Connected.Load()
	})
}

// Marks are a byte and come round again after 255 sessions: a route the
// first session installed and nobody confirmed since must still be swept
// by the session that gets the first mark again (issue 19, item 7: the
// sweep logged removed=0 kept=2 and 198.18.201.0/24 stayed).
func TestSweepAfterMarkWraps(t *testing.T) {
	s := newServer(t, nil, func(o *Options) { o.SweepQuiet = 200 * time.Millisecond })
	route := func(p string) []byte {
		return AppendNewRoute(nil, &ZebraRoute{Prefix: pfx(p), Metric: 20, Gateway: ip("192.0.2.1"), OIF: 2})
	}
	c := s.dial(t)
	s.send(t, c, append(route("198.18.201.0/24"), route("198.18.202.0/24")...))
	waitFor(t, "first sweep", func() bool { return s.Stats().Sweeps.Load() == 1 })
	c.Close()
	s.waitEnded(t, 1)
	for i := range uint64(254) { // marks 2..255: sessions that send nothing
		c := s.dial(t)
		waitFor(t, "session", func() bool { return s.Stats().Connections.Load() >= i+2 })
		c.Close()
		s.waitEnded(t, i+2)
	}
	if s.Stats().Sweeps.Load() != 1 {
		t.Fatalf("%d sweeps by the empty sessions", s.Stats().Sweeps.Load())
	}
	c = s.dial(t) // the first mark again
	s.send(t, c, route("198.18.202.0/24"))
	waitFor(t, "the sweep of the 256th session", func() bool { return s.Stats().Sweeps.Load() == 2 })
	wantRoutes(t, s.f, "198.18.202.0/24 via 192.0.2.1 dev eth0 proto bgp metric 20")
	if n := s.Stats().SweptRoutes.Load(); n != 1 {
		t.Fatalf("swept %d routes, want 1", n)
	}
}
