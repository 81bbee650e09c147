package kmirror

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/rtnl"
	"github.com/netfwd/netfwd/internal/show"
	"github.com/netfwd/netfwd/internal/testenv"
	"github.com/netfwd/netfwd/nexthop"
)

// kernelNS is a namespace with four veth devices and one custom ip rule
// (so the kernel looks up local, then main, in rule order, as netfwd
// always does: see docs/fib.md).
func kernelNS(t *testing.T) string {
	testenv.RequireRoot(t)
	ns := testenv.Netns(t, "kmir")
	for i := range 4 {
		testenv.Run(t, "ip", "-n", ns, "link", "add", fmt.Sprintf("eth%d", i), "type", "veth", "peer", "name", fmt.Sprintf("peer%d", i))
		testenv.Run(t, "ip", "-n", ns, "link", "set", fmt.Sprintf("eth%d", i), "up")
		testenv.Run(t, "ip", "-n", ns, "link", "set", fmt.Sprintf("peer%d", i), "up")
	}
	testenv.Run(t, "ip", "-n", ns, "rule", "add", "pref", "100", "from", "198.18.0.0/15", "table", "100")
	return ns
}

// batch runs lines with `ip -force -batch` in the namespace (the kernel
// refuses what it refuses; the mirror follows what it accepts).
func batch(t *testing.T, ns string, lines []string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "batch")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Output("ip", "-n", ns, "-force", "-batch", file)
}

// gen makes random but mostly valid `ip` lines over a small address space.
type gen struct{ r *rand.Rand }

func (g *gen) addr() string {
	return netip.AddrFrom4([4]byte{10, byte(g.r.IntN(2)), byte(g.r.IntN(4)), byte(g.r.IntN(256))}).String()
}

func (g *gen) prefix() string {
	lens := []int{8, 16, 22, 24, 24, 25, 28, 32}
	p, _ := netip.MustParseAddr(g.addr()).Prefix(lens[g.r.IntN(len(lens))])
	return p.String()
}

// gw is an address in one of the connected subnets 10.0.D.0/24 of ethD.
func (g *gen) gw() (string, string) {
	d := g.r.IntN(4)
	return fmt.Sprintf("10.0.%d.%d", d, 2+g.r.IntN(20)), fmt.Sprintf("eth%d", d)
}

func (g *gen) line() string {
	metric := fmt.Sprintf(" metric %d", g.r.IntN(3)*10)
	proto := []string{"", " proto static", " proto bird", " proto bgp"}[g.r.IntN(4)]
	switch k := g.r.IntN(100); {
	case k < 6:
		d := g.r.IntN(4)
		return fmt.Sprintf("address add 10.0.%d.%d/24 dev eth%d", d, 1+g.r.IntN(3), d)
	case k < 8:
		d := g.r.IntN(4)
		return fmt.Sprintf("address del 10.0.%d.%d/24 dev eth%d", d, 1+g.r.IntN(3), d)
	case k < 14:
		gw, dev := g.gw()
		return fmt.Sprintf("nexthop replace id %d via %s dev %s", 1+g.r.IntN(5), gw, dev)
	case k < 16:
		return fmt.Sprintf("nexthop replace id %d group %d/%d,3", 10+g.r.IntN(2), 1+g.r.IntN(5), 1+g.r.IntN(5))
	case k < 17:
		return "nexthop replace id 20 blackhole"
	case k < 19:
		return fmt.Sprintf("nexthop del id %d", 1+g.r.IntN(5))
	case k < 29:
		return "route del " + g.prefix() + metric
	case k < 32:
		return "route del " + g.prefix() + metric + " table 100"
	}
	verb := []string{"add", "add", "append", "replace", "prepend"}[g.r.IntN(5)]
	l := "route " + verb + " "
	switch k := g.r.IntN(20); {
	case k < 2:
		l += []string{"blackhole ", "unreachable ", "prohibit "}[g.r.IntN(3)] + g.prefix()
	case k < 3:
		l += "local " + g.prefix() + " dev eth1 table local"
	case k < 6:
		l += g.prefix() + fmt.Sprintf(" nhid %d", []int{1, 2, 3, 10, 11, 20}[g.r.IntN(6)])
	case k < 8:
		gw1, dev1 := g.gw()
		gw2, dev2 := g.gw()
		l += g.prefix() + fmt.Sprintf(" nexthop via %s dev %s weight %d nexthop via %s dev %s", gw1, dev1, 1+g.r.IntN(3), gw2, dev2)
	case k < 10:
		l += g.prefix() + " dev " + fmt.Sprintf("eth%d", g.r.IntN(4))
	default:
		gw, dev := g.gw()
		l += g.prefix() + " via " + gw + " dev " + dev
	}
	if g.r.IntN(8) == 0 && !strings.Contains(l, "table local") {
		l += " table 100" // the table the namespace's rule selects
	}
	return l + metric + proto
}

// start runs a mirror of ns into a fresh FIB.
func start(t *testing.T, ns string, tweak func(*Options)) (*Mirror, *fib.FIB) {
	t.Helper()
	f := fib.New(fib.Options{Compiled: true})
	o := Options{FIB: f, Netns: ns, Logger: slog.New(slog.DiscardHandler)}
	if tweak != nil {
		tweak(&o)
	}
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- m.Run(stop) }()
	t.Cleanup(func() {
		close(stop)
		if err := <-done; err != nil {
			t.Errorf("mirror: %v", err)
		}
	})
	return m, f
}

// kernelTable is the kernel's tables (all of them), one canonical line per
// route (numbers for types, protocols and scopes).
func kernelTable(t *testing.T, ns string) []string {
	out := testenv.Run(t, "ip", "-4", "-n", ns, "-j", "-N", "route", "show", "table", "all")
	var routes []struct {
		Type, Dst, Gateway, Dev, Table, Protocol, Scope, Prefsrc string
		Metric                                                   uint32
		Nexthops                                                 []struct {
			Gateway, Dev string
			Weight       int
		}
	}
	if err := json.Unmarshal([]byte(out), &routes); err != nil {
		t.Fatalf("ip -j route show: %v\n%s", err, out)
	}
	var lines []string
	for _, r := range routes {
		def := func(s, d string) string {
			if s == "" {
				return d
			}
			return s
		}
		table := def(r.Table, "254") // every table: the mirror keeps them all
		dst := r.Dst
		if dst == "default" {
			dst = "0.0.0.0/0"
		} else if !strings.Contains(dst, "/") {
			dst += "/32"
		}
		typ := def(r.Type, "1")
		gw, dev := r.Gateway, r.Dev
		if typ != "1" && typ != "2" && typ != "3" {
			dev = "" // error routes: the kernel names lo
		}
		paths := ""
		for _, h := range r.Nexthops {
			paths += fmt.Sprintf(" [%s %s %d]", h.Gateway, h.Dev, h.Weight)
		}
		lines = append(lines, fmt.Sprintf("%s %s type %s proto %s scope %s metric %d src %s via %s dev %s%s", table, dst, typ,
			def(r.Protocol, "3"), def(r.Scope, "0"), r.Metric, r.Prefsrc, gw, dev, paths))
	}
	slices.Sort(lines)
	return lines
}

var rtnTypes = map[fib.Type]int{fib.Unicast: 1, fib.Local: 2, fib.Broadcast: 3, fib.Blackhole: 6, fib.Unreachable: 7, fib.Prohibit: 8, fib.Throw: 9}

// mirrorTable is the FIB's kernel-owned routes in the same form.
func mirrorTable(f *fib.FIB) []string {
	var lines []string
	for _, r := range f.RoutesOf(fib.OwnerKernel) {
		src := ""
		if r.Src.IsValid() {
			src = r.Src.String()
		}
		gw, dev, paths := "", "", ""
		if nh := r.NH; nh != nil && (r.Type == fib.Unicast || r.Type == fib.Local || r.Type == fib.Broadcast) {
			if nh.Group != nil {
				for _, m := range nh.Group.Members {
					mg := ""
					if m.NH.Gateway.IsValid() {
						mg = m.NH.Gateway.String()
					}
					paths += fmt.Sprintf(" [%s %s %d]", mg, m.NH.Dev, m.Weight)
				}
			} else {
				if nh.Gateway.IsValid() {
					gw = nh.Gateway.String()
				}
				dev = nh.Dev
			}
		}
		lines = append(lines, fmt.Sprintf("%d %s type %d proto %d scope %d metric %d src %s via %s dev %s%s", r.Table, r.Prefix,
			rtnTypes[r.Type], r.Proto, r.Scope, r.Metric, src, gw, dev, paths))
	}
	slices.Sort(lines)
	return lines
}

// converge waits until the mirror's table equals the kernel's and returns
// the last difference if it does not within the timeout.
func converge(t *testing.T, ns string, m *Mirror, f *fib.FIB) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		k := kernelTable(t, ns)
		if m.Stats().Synced.Load() && !m.Stats().Resyncing.Load() {
			got := mirrorTable(f)
			if slices.Equal(k, got) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("mirror differs from the kernel (%d kernel routes, %d mirrored):\n%s", len(k), len(got), diff(k, got))
			}
		} else if time.Now().After(deadline) {
			t.Fatal("mirror never synced")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func diff(want, got []string) string {
	var b strings.Builder
	for _, l := range want {
		if !slices.Contains(got, l) {
			fmt.Fprintf(&b, "  missing: %s\n", l)
		}
	}
	for _, l := range got {
		if !slices.Contains(want, l) {
			fmt.Fprintf(&b, "  stale:   %s\n", l)
		}
	}
	return b.String()
}

// routeGets compares `ip route get` with netfwd's on probes inside every
// route.
func routeGets(t *testing.T, ns string, f *fib.FIB, r *rand.Rand) {
	t.Helper()
	var probes []netip.Addr
	for _, rt := range f.Routes(fib.TableAll) {
		probes = append(probes, rt.Prefix.Addr(), fib.LastAddr(rt.Prefix))
	}
	for range 100 {
		probes = append(probes, netip.AddrFrom4([4]byte{10, byte(r.IntN(2)), byte(r.IntN(4)), byte(r.IntN(256))}))
	}
	checked := 0
	for _, a := range probes {
		if !strings.HasPrefix(a.String(), "10.") {
			continue
		}
		out, err := testenv.Output("ip", "-n", ns, "-j", "route", "get", a.String())
		ktype, kgw, kdev, ksrc := "", "", "", ""
		if err != nil {
			switch {
			case strings.Contains(out, "Invalid argument"):
				ktype = "blackhole"
			case strings.Contains(out, "No route to host"):
				ktype = "unreachable"
			case strings.Contains(out, "Permission denied"):
				ktype = "prohibit"
			case strings.Contains(out, "Network is unreachable"):
				ktype = "none"
			default:
				t.Fatalf("ip route get %s: %v %s", a, err, out)
			}
		} else {
			var ks []struct{ Type, Gateway, Dev, Prefsrc string }
			if json.Unmarshal([]byte(out), &ks) != nil || len(ks) != 1 {
				t.Fatalf("ip route get %s: %s", a, out)
			}
			ktype, kgw, kdev, ksrc = ks[0].Type, ks[0].Gateway, ks[0].Dev, ks[0].Prefsrc
			if ktype == "" {
				ktype = "unicast"
			}
		}
		var o struct{ Type, Gateway, Dev, Prefsrc, Error string }
		line := show.AppendRouteGet(nil, f, a.String(), true)
		if err := json.Unmarshal(line, &o); err != nil {
			t.Fatal(err)
		}
		if o.Error == "network unreachable" {
			o.Type = "none"
		}
		if o.Type != ktype {
			t.Errorf("%s: kernel %s, netfwd %s", a, ktype, line)
			continue
		}
		if ktype == "unicast" || ktype == "local" || ktype == "broadcast" {
			if kgw != o.Gateway || ktype != "local" && kdev != o.Dev || ksrc != o.Prefsrc {
				t.Errorf("%s: kernel via %q dev %q src %q, netfwd %s", a, kgw, kdev, ksrc, line)
			}
		}
		checked++
	}
	if checked < 100 {
		t.Fatalf("only %d probes compared", checked)
	}
}

// The mirror follows random `ip` configuration: after the initial dump
// and after each batch of changes (notifications), its table equals the
// kernel's tables (main, local and 100) route for route, and `route get` answers
// as `ip route get` does.
func TestMirrorFollowsKernel(t *testing.T) {
	ns := kernelNS(t)
	g := &gen{r: rand.New(rand.NewPCG(7, 7))}
	var lines []string
	for d := range 4 {
		lines = append(lines, fmt.Sprintf("address add 10.0.%d.1/24 dev eth%d", d, d))
	}
	for range 400 {
		lines = append(lines, g.line())
	}
	batch(t, ns, lines)
	m, f := start(t, ns, nil)
	converge(t, ns, m, f)
	routeGets(t, ns, f, g.r)
	for round := range 5 {
		lines = lines[:0]
		for range 200 {
			lines = append(lines, g.line())
		}
		batch(t, ns, lines)
		converge(t, ns, m, f)
		routeGets(t, ns, f, g.r)
		t.Logf("round %d: %d routes, %d resyncs, skipped %v", round, len(mirrorTable(f)), m.Stats().Resyncs.Load(), m.Stats().C.Skipped())
	}
}

// A receive buffer too small for a burst overruns (ENOBUFS): the mirror
// resyncs and ends with 0 stale and 0 missing routes. Bursts: 3000 routes
// added, all deleted, added back through another gateway. For the last two
// the test holds the FIB's writer lock, so the mirror stops reading and
// loses additions and deletions for certain: the resync must both add and
// sweep.
func TestMirrorOverrunResync(t *testing.T) {
	ns := kernelNS(t)
	testenv.Run(t, "ip", "-n", ns, "address", "add", "10.0.0.1/24", "dev", "eth0")
	m, f := start(t, ns, func(o *Options) { o.ReceiveBuffer = 4096 })
	converge(t, ns, m, f)
	for round, op := range []string{"add", "del", "add"} {
		var lines []string
		for i := range 3000 {
			l := fmt.Sprintf("route %s 172.%d.%d.0/24", op, 16+i/256, i%256)
			if op == "add" {
				l += fmt.Sprintf(" via 10.0.0.%d", 2+round)
			}
			lines = append(lines, l)
		}
		if round == 0 {
			batch(t, ns, lines)
		} else {
			hold := f.Begin(1)
			// One notification first, so the mirror reads it and blocks
			// on the lock before the burst.
			testenv.Run(t, "ip", "-n", ns, "route", "replace", "172.31.255.0/24", "via", "10.0.0.2", "metric", fmt.Sprint(round))
			time.Sleep(300 * time.Millisecond)
			batch(t, ns, lines)
			hold.Abort()
		}
		converge(t, ns, m, f)
		t.Logf("%s: %d routes, %d overruns, %d resyncs, %d routes swept", op, len(f.RoutesOf(fib.OwnerKernel)),
			m.Stats().Overruns.Load(), m.Stats().Resyncs.Load(), m.Stats().SweptRoutes.Load())
	}
	if m.Stats().Overruns.Load() < 2 || m.Stats().SweptRoutes.Load() < 1000 {
		t.Fatalf("%d overruns, %d routes swept: the test did not exercise the resync", m.Stats().Overruns.Load(), m.Stats().SweptRoutes.Load())
	}
}

// Neighbours reach the hook; nexthop objects are shared by content.
func TestMirrorNeighboursAndNexthops(t *testing.T) {
	ns := kernelNS(t)
	testenv.Run(t, "ip", "-n", ns, "address", "add", "10.0.1.1/24", "dev", "eth1")
	got := make(chan NeighUpdate, 16)
	m, f := start(t, ns, func(o *Options) {
		o.Neigh = func(u NeighUpdate) error { got <- u; return nil }
	})
	converge(t, ns, m, f)
	testenv.Run(t, "ip", "-n", ns, "neigh", "add", "10.0.1.7", "lladdr", "02:00:00:00:01:07", "dev", "eth1", "nud", "permanent")
	select {
	case u := <-got:
		if u.Dev != "eth1" || u.IP != netip.MustParseAddr("10.0.1.7") || u.State != "permanent" || u.MAC != [6]byte{2, 0, 0, 0, 1, 7} {
			t.Fatalf("neighbour: %+v", u)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no neighbour update")
	}
	testenv.Run(t, "ip", "-n", ns, "neigh", "del", "10.0.1.7", "dev", "eth1")
	select {
	case u := <-got:
		if !u.Delete || u.IP != netip.MustParseAddr("10.0.1.7") {
			t.Fatalf("neighbour delete: %+v", u)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no neighbour delete")
	}
	// Two ids with the same content are one object; routes through either
	// follow the kernel.
	batch(t, ns, []string{"nexthop add id 1 via 10.0.1.9 dev eth1", "nexthop add id 2 via 10.0.1.9 dev eth1",
		"route add 10.8.0.0/16 nhid 1", "route add 10.9.0.0/16 nhid 2"})
	converge(t, ns, m, f)
	if a, b := f.Lookup(netip.MustParseAddr("10.8.0.1")), f.Lookup(netip.MustParseAddr("10.9.0.1")); a == nil || a != b {
		t.Fatalf("lookups: %v %v", a, b)
	}
	batch(t, ns, []string{"nexthop replace id 2 via 10.0.1.10 dev eth1"})
	converge(t, ns, m, f)
	batch(t, ns, []string{"nexthop del id 1"})
	converge(t, ns, m, f)
	_ = nexthop.Unicast
	_ = rtnl.AF_INET
}
