package apply

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/show"
)

func fmtRoute(r *fib.Route) string {
	j := show.RouteOf(r, true)
	return j.Text()
}

const good = `# a router
address add 10.0.10.1/24 dev vlan10
address add 203.0.113.2/24 dev eth0
nexthop add id 1 via 203.0.113.1 dev eth0
nexthop add id 2 via 203.0.113.9 dev eth0
nexthop add id 3 group 1/2,3
nexthop add id 4 blackhole
route add 198.51.100.0/24 nhid 3
route add default via 203.0.113.1 dev eth0 metric 100
route add local 10.9.0.0/16 dev eth0 table local
route add blackhole 10.66.0.0/16
route add 10.77.0.1 dev eth0      # a bare address is a /32
route append 10.88.0.0/16 nexthop via 203.0.113.1 weight 2 nexthop via 203.0.113.9
link set eth3 down
link add br0 type bridge vlan_filtering 1
bridge vlan add dev eth1 vid 10 pvid untagged
`

func TestLoadGood(t *testing.T) {
	f := fib.New(fib.Options{})
	if err := LoadFIB(f, "good.conf", strings.NewReader(good), 0); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range f.Routes(fib.TableAll) {
		got = append(got, fmtRoute(r))
	}
	want := []string{
		"default via 203.0.113.1 dev eth0 metric 100",
		"10.0.10.0/24 dev vlan10 proto kernel scope link src 10.0.10.1",
		"blackhole 10.66.0.0/16",
		"10.77.0.1 dev eth0 scope link",
		"10.88.0.0/16\n\tnexthop via 203.0.113.1 dev eth0 weight 2\n\tnexthop via 203.0.113.9 dev eth0 weight 1",
		"198.51.100.0/24 nhid 3",
		"203.0.113.0/24 dev eth0 proto kernel scope link src 203.0.113.2",
		"local 10.0.10.1 dev vlan10 table local proto kernel scope host src 10.0.10.1",
		"broadcast 10.0.10.255 dev vlan10 table local proto kernel scope link src 10.0.10.1",
		"local 10.9.0.0/16 dev eth0 table local scope host",
		"local 203.0.113.2 dev eth0 table local proto kernel scope host src 203.0.113.2",
		"broadcast 203.0.113.255 dev eth0 table local proto kernel scope link src 203.0.113.2",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("routes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A bad file reports every bad line as FILE:LINE: reason and changes nothing.
func TestLoadBadAppliesNothing(t *testing.T) {
	f := fib.New(fib.Options{})
	if err := LoadFIB(f, "base.conf", strings.NewReader("address add 192.0.2.1/24 dev eth0\nroute add 10.0.0.0/8 via 192.0.2.9\n"), 0); err != nil {
		t.Fatal(err)
	}
	before := dump(f)
	version := f.Version()
	bad := `route add 172.16.0.0/12 via 192.0.2.5
route add 10.0.0.0/8 via 192.0.2.9
route add 10.1.0.0/16 via 198.18.0.1
route frobnicate 10.0.0.0/8
route add 10.2.0.1/8 dev eth0
address add 192.0.2.1/24 dev eth0
nexthop add id 7 group 99
route add 10.3.0.0/16 nhid 42
route add 10.4.0.0/16 via 192.0.2.7 metric x
gibberish
route add 10.5.0.0/16 via 192.0.2.7
`
	err := LoadFIB(f, "bad.conf", strings.NewReader(bad), 0)
	if err == nil {
		t.Fatal("bad file loaded without error")
	}
	wantLines := []string{"bad.conf:2:", "bad.conf:3:", "bad.conf:4:", "bad.conf:5:", "bad.conf:6:", "bad.conf:7:", "bad.conf:8:", "bad.conf:9:", "bad.conf:10:"}
	msg := err.Error()
	for _, w := range wantLines {
		if !strings.Contains(msg, w) {
			t.Errorf("error does not name %s:\n%s", w, msg)
		}
	}
	for _, ok := range []string{"bad.conf:1:", "bad.conf:11:"} {
		if strings.Contains(msg, ok) {
			t.Errorf("error names good line %s:\n%s", ok, msg)
		}
	}
	if n := strings.Count(msg, "\n") + 1; n != len(wantLines) {
		t.Errorf("%d errors reported, want %d:\n%s", n, len(wantLines), msg)
	}
	var ce *config.Error
	if !errors.As(err, &ce) {
		t.Errorf("errors are not *config.Error")
	}
	if after := dump(f); after != before || f.Version() != version {
		t.Fatalf("bad file changed the FIB:\nbefore %s\nafter %s", before, after)
	}
}

func dump(f *fib.FIB) string {
	var b strings.Builder
	for _, r := range f.Routes(fib.TableAll) {
		b.WriteString(fmtRoute(r))
		b.WriteByte('\n')
	}
	return b.String()
}

// A batch with very many bad lines reports config.MaxErrors of them and
// counts the rest: reload errors stay small enough to log.
func TestApplyErrorsBounded(t *testing.T) {
	var b strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&b, "route add 10.%d.%d.0/24 via 192.0.2.9\n", i/256, i%256) // no route to the gateway
	}
	cmds, errs := config.Parse("big.conf", strings.NewReader(b.String()))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	err := newTestController().Apply(cmds)
	if err == nil {
		t.Fatal("accepted")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != config.MaxErrors+1 || !strings.HasPrefix(lines[0], "big.conf:1: ") ||
		lines[len(lines)-1] != "big.conf:5000: 4900 more errors up to this line not shown" {
		t.Fatalf("%d lines, first %q, last %q", len(lines), lines[0], lines[len(lines)-1])
	}
}
