package kmirror

// The mirror keeps every table of the kernel, each route in its own table
// (issue 29): BIRD's `kernel table 100` lands in netfwd's table 100.

import (
	"fmt"
	"log/slog"
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/testenv"
	"github.com/netfwd/netfwd/wire"
)

// Numbered tables (100, 70000, default) beside main and local; table local
// keeps the namespace's own local and broadcast routes and loopback's; a
// rule of netfwd's selects table 100; a resync after lost notifications
// sweeps the table-100 route the kernel deleted meanwhile and never
// withdraws those it kept (the same *Route objects; a flow through the
// rule never misses). Sync reads the tables before Run.
func TestMirrorTables(t *testing.T) {
	ns := kernelNS(t)
	batch(t, ns, []string{
		"address add 10.0.1.1/24 dev eth1",
		"route add 10.50.0.0/16 via 10.0.1.2 table 100 proto bird metric 32",
		"route add 10.51.0.0/16 via 10.0.1.3 table 100 proto bird metric 32",
		"route add blackhole 10.52.0.0/16 table 100 proto bird",
		"route add 10.50.0.0/16 via 10.0.1.9 proto static", // main: another route at the prefix
		"route add 10.53.0.0/16 via 10.0.1.4 table 70000",
		"route add 10.54.0.0/16 via 10.0.1.5 table default",
	})
	f := fib.New(fib.Options{Compiled: true})
	m, err := New(Options{FIB: f, Netns: ns, Logger: slog.New(slog.DiscardHandler), ReceiveBuffer: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Sync(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := mirrorTable(f); !slices.Equal(got, kernelTable(t, ns)) {
		t.Fatalf("after Sync the mirror differs from the kernel:\n%s", diff(kernelTable(t, ns), got))
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- m.Run(stop) }()
	defer func() {
		close(stop)
		if err := <-done; err != nil {
			t.Errorf("mirror: %v", err)
		}
	}()
	converge(t, ns, m, f)

	routes := func(table uint32) []string {
		var out []string
		for _, r := range f.Routes(table) {
			if r.Owner == fib.OwnerKernel {
				out = append(out, fmt.Sprintf("%s %s %v", r.Type, r.Prefix, r.NH))
			}
		}
		return out
	}
	for table, n := range map[uint32]int{100: 3, 70000: 1, fib.TableDefault: 1} {
		if got := routes(table); len(got) != n {
			t.Errorf("table %d: %q, want %d routes", table, got, n)
		}
	}
	// Table local as the kernel has it: the address's local and broadcast
	// routes, loopback's 127.0.0.0/8 and 127.0.0.1 (converge compared it
	// route for route; these are the ones that must be there).
	local := routes(fib.TableLocal)
	for _, want := range []string{"local 10.0.1.1/32", "broadcast 10.0.1.255/32", "local 127.0.0.0/8", "local 127.0.0.1/32"} {
		if !slices.ContainsFunc(local, func(s string) bool { return len(s) >= len(want) && s[:len(want)] == want }) {
			t.Errorf("table local lacks %q: %q", want, local)
		}
	}

	tx := f.Begin(1)
	if err := tx.AddRule(fib.RuleSpec{Rule: fib.Rule{Priority: 100, Src: netip.MustParsePrefix("198.18.0.0/15"), Table: 100,
		SuppressPrefixLen: -1}, PrioritySet: true, TableSet: true}); err != nil {
		t.Fatal(err)
	}
	tx.Commit()
	flow := fib.Flow{Src: wire.Addr4From(netip.MustParseAddr("198.18.0.1")), Dst: wire.Addr4From(netip.MustParseAddr("10.50.0.1")),
		IIF: f.DevIndex("eth0")}
	want := f.LookupFlow(&flow)
	if want == nil || want.Gateway != netip.MustParseAddr("10.0.1.2") {
		t.Fatalf("10.50.0.1 from 198.18.0.1: %v, want via 10.0.1.2 (table 100)", want)
	}
	if nh := f.Lookup(netip.MustParseAddr("10.50.0.1")); nh == nil || nh.Gateway != netip.MustParseAddr("10.0.1.9") {
		t.Fatalf("10.50.0.1 without the rule: %v, want via 10.0.1.9 (main)", nh)
	}
	var kept *fib.Route
	for _, r := range f.Routes(100) {
		if r.Prefix == netip.MustParsePrefix("10.50.0.0/16") {
			kept = r
		}
	}

	// Lost notifications: the mirror is held on the FIB's writer lock while
	// a burst fills the 4 KiB receive buffer and the kernel deletes
	// 10.51.0.0/16 from table 100; the resync must sweep it.
	readerErr := make(chan string, 1)
	readerStop := make(chan struct{})
	go func() {
		defer close(readerErr)
		for {
			select {
			case <-readerStop:
				return
			default:
			}
			if nh := f.LookupFlow(&flow); nh != want {
				readerErr <- fmt.Sprintf("10.50.0.1 from 198.18.0.1 looked up %v during the resync, want %v", nh, want)
				return
			}
			runtime.Gosched()
		}
	}()
	overruns, swept := m.Stats().Overruns.Load(), m.Stats().SweptRoutes.Load()
	hold := f.Begin(1)
	testenv.Run(t, "ip", "-n", ns, "route", "replace", "10.60.0.0/16", "via", "10.0.1.2", "table", "200")
	time.Sleep(300 * time.Millisecond) // the mirror read it and waits for the lock
	var lines []string
	for i := range 2000 {
		lines = append(lines, fmt.Sprintf("route add 172.%d.%d.0/24 via 10.0.1.7 table 200", 16+i/256, i%256))
	}
	lines = append(lines, "route del 10.51.0.0/16 table 100") // after the buffer filled: lost
	batch(t, ns, lines)
	hold.Abort()
	converge(t, ns, m, f)
	close(readerStop)
	if msg, ok := <-readerErr; ok {
		t.Fatal(msg)
	}
	if m.Stats().Overruns.Load() == overruns || m.Stats().SweptRoutes.Load() == swept {
		t.Fatalf("overruns %d -> %d, swept %d -> %d: the test did not exercise the resync", overruns, m.Stats().Overruns.Load(),
			swept, m.Stats().SweptRoutes.Load())
	}
	if got := routes(100); len(got) != 2 {
		t.Errorf("table 100 after the resync: %q, want 10.50.0.0/16 and the blackhole", got)
	}
	for _, r := range f.Routes(100) {
		if r.Prefix == kept.Prefix && r != kept {
			t.Errorf("10.50.0.0/16 of table 100 replaced by the resync (want the same object)")
		}
	}
	if n := len(f.Routes(200)); n != 2001 {
		t.Errorf("table 200: %d routes, want 2001", n)
	}
}
