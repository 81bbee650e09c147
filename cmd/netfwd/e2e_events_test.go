package main

// End-to-end: things that change under a running router. A host moves to
// another port; the primary uplink loses its link and comes back; the
// config file changes and the daemon reloads it on SIGHUP.

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/lab"
	"github.com/netfwd/netfwd/internal/vethlab"
)

// TestE2EMACMove: h2 unplugs from eth2 and plugs into eth5 (same MAC,
// same address; the kernel announces it with a gratuitous ARP,
// arp_notify=1, as hosts and hypervisors do). The bridge moves the FDB
// entry to eth5; h1's traffic (bridged, with h1's ARP cache unchanged) and
// h3's (routed) follow it. Then back again.
func TestE2EMACMove(t *testing.T) {
	spec := lab.Standard()
	h2MAC := spec.Hosts[1].MAC
	spec.Hosts[1].Sysctls = map[string]string{"net.ipv4.conf.all.arp_notify": "1"}
	spec.RouterConfig = append(spec.RouterConfig,
		"link set eth5 master br0",
		"bridge vlan add dev eth5 vid 10 pvid untagged")
	e := newE2E(t, spec, func(n *lab.Net) {
		// h2's second cable, to eth5, unplugged (down) for now.
		h2 := n.Host("h2")
		if err := n.Veth(n.Router, "eth5", nil, h2.NS, "eth1", h2MAC); err != nil {
			t.Fatal(err)
		}
		if n.Spec.HostTxChecksumOff {
			if err := vethlab.TxChecksumOff(h2.NS, "eth1"); err != nil {
				t.Fatal(err)
			}
		}
		if err := n.IP(h2.NS, "link", "set", "eth1", "down"); err != nil {
			t.Fatal(err)
		}
	})
	h2 := e.host("h2")
	fdbOn := func(port string) func() (bool, string) {
		return func() (bool, string) {
			out := e.ctl("fdb show")
			want := fmt.Sprintf("%s dev %s vlan 10 master br0", h2MAC, port)
			n := strings.Count(out, h2MAC.String()+" dev ")
			return strings.Contains(out, want) && n == 1, fmt.Sprintf("want exactly %q:\n%s", want, out)
		}
	}
	e.pingOK("h1", h2IP, 64)
	e.pingOK("h3", h2IP, 63)
	if ok, why := fdbOn("eth2")(); !ok {
		t.Fatalf("before the move: %s", why)
	}
	before := e.scrape()
	move := func(from, to string) {
		t.Helper()
		for _, args := range [][]string{
			{"link", "set", from, "down"},
			{"addr", "flush", "dev", from},
			{"addr", "add", h2IP.String() + "/24", "dev", to},
			{"link", "set", to, "up"}, // arp_notify: a gratuitous ARP now
			{"route", "replace", "default", "via", gw10.String()},
		} {
			if err := e.net.IP(h2.NS, args...); err != nil {
				t.Fatal(err)
			}
		}
	}
	move("eth0", "eth1")
	if ok, why := eventually(3*time.Second, fdbOn("eth5")); !ok {
		t.Fatalf("after the move to eth5: %s", why)
	}
	e.pingOK("h1", h2IP, 64)
	e.pingOK("h3", h2IP, 63)
	moved := e.scrape().Sum(metricFDBMoved) - before.Sum(metricFDBMoved)
	if moved < 1 {
		t.Errorf("%s moved by %v, want at least 1", metricFDBMoved, moved)
	}
	move("eth1", "eth0")
	if ok, why := eventually(3*time.Second, fdbOn("eth2")); !ok {
		t.Fatalf("after moving back to eth2: %s", why)
	}
	e.pingOK("h1", h2IP, 64)
	e.pingOK("h3", h2IP, 63)
}

// failoverSpec is the standard network with a second uplink isp2 on eth6;
// both uplinks hold 198.51.100.1. The primary default route (metric 100)
// goes to isp, the backup (metric 200) to isp2.
func failoverSpec() lab.Spec {
	s := lab.Standard()
	s.Hosts = append(s.Hosts, lab.UplinkHost("isp2", "eth6", netip.MustParsePrefix("192.0.2.1/24"),
		netip.MustParsePrefix("192.0.2.2/24"), mustMAC("02:00:00:00:e0:02"), "02:00:00:00:e0:fd", lab.InternetIP))
	s.RouterConfig[0] = "route add default via 203.0.113.1 dev eth0 metric 100"
	s.RouterConfig = append(s.RouterConfig, "route add default via 192.0.2.1 dev eth6 metric 200")
	return s
}

// TestE2ELinkFailover: the primary uplink's link goes down (the far end,
// as when a cable or the ISP's box fails, and then the router's own
// interface); traffic moves to the backup route, and back when the link
// returns. Which uplink carried the pings is read from each ISP kernel's
// own echo counter.
func TestE2ELinkFailover(t *testing.T) {
	e := newE2E(t, failoverSpec(), nil)
	isp, isp2 := e.host("isp"), e.host("isp2")
	via := func(dev string) func() (bool, string) {
		return func() (bool, string) {
			r := e.routeGet(lab.InternetIP)
			return r["dev"] == dev, fmt.Sprintf("route get %s: %v, want dev %s", lab.InternetIP, r, dev)
		}
	}
	pingVia := func(want *lab.Host, other *lab.Host) {
		t.Helper()
		a0, b0 := kernelCounter(t, want.NS, "Icmp", "InEchos"), kernelCounter(t, other.NS, "Icmp", "InEchos")
		e.pingOK("h1", lab.InternetIP, 63)
		a1, b1 := kernelCounter(t, want.NS, "Icmp", "InEchos"), kernelCounter(t, other.NS, "Icmp", "InEchos")
		if a1-a0 != 3 || b1-b0 != 0 {
			t.Errorf("echo requests: %s got %d (want 3), %s got %d (want 0)", want.Name, a1-a0, other.Name, b1-b0)
		}
	}
	for _, c := range []struct {
		name string
		ns   string // where the link goes down
		dev  string
	}{
		{"far end down", isp.NS, "eth0"},
		{"router side down", e.net.Router, "eth0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if ok, why := eventually(3*time.Second, via("eth0")); !ok {
				t.Fatal(why)
			}
			pingVia(isp, isp2)
			if err := e.net.IP(c.ns, "link", "set", c.dev, "down"); err != nil {
				t.Fatal(err)
			}
			if ok, why := eventually(5*time.Second, via("eth6")); !ok {
				t.Fatalf("after the primary link went down: %s", why)
			}
			pingVia(isp2, isp)
			if err := e.net.IP(c.ns, "link", "set", c.dev, "up"); err != nil {
				t.Fatal(err)
			}
			// An interface taken down loses its routes in Linux: the isp
			// routes the lab back again.
			if err := e.net.IP(isp.NS, "route", "replace", "10.0.0.0/8", "via", lab.UplinkAddr.Addr().String()); err != nil {
				t.Fatal(err)
			}
			if ok, why := eventually(5*time.Second, via("eth0")); !ok {
				t.Fatalf("after the primary link came back: %s", why)
			}
			pingVia(isp, isp2)
		})
	}
	if !e.alive() {
		t.Fatal("the daemon exited")
	}
}

// TestE2EReload: SIGHUP applies the changed file (a route added takes
// effect, removed stops), a file with an error is refused whole (its valid
// lines too) and the running config keeps forwarding; `netfwd ctl reload`
// reports the same errors.
func TestE2EReload(t *testing.T) {
	spec := lab.Standard()
	e := newE2E(t, spec, nil)
	base := spec.Config()
	e.pingOK("h1", lab.InternetIP, 63)
	typeOf := func(want string) func() (bool, string) {
		return func() (bool, string) {
			r := e.routeGet(lab.InternetIP)
			got, _ := r["type"].(string)
			if r["error"] != nil {
				got = fmt.Sprint(r["error"])
			}
			return got == want, fmt.Sprintf("route get %s: %v, want %s", lab.InternetIP, r, want)
		}
	}
	one := lab.PingOptions{Count: 1}

	// A route added.
	e.writeConfig(base + "route add prohibit 198.51.100.0/24\n")
	e.sighup()
	if ok, why := eventually(5*time.Second, typeOf("prohibit")); !ok {
		t.Fatalf("reload did not add the prohibit route: %s", why)
	}
	if r := e.ping("h1", lab.InternetIP, one); r.ErrorsFrom(gw10, lab.KindProhibited) != 1 {
		t.Errorf("after adding the prohibit route: want \"Packet filtered\" from %s, got %+v\n%s", gw10, r.Errors, r.Output)
	}

	// Removed again.
	e.writeConfig(base)
	e.sighup()
	if ok, why := eventually(5*time.Second, typeOf("unicast")); !ok {
		t.Fatalf("reload did not remove the prohibit route: %s", why)
	}
	e.pingOK("h1", lab.InternetIP, 63)

	// The default route removed: no route, net unreachable.
	e.writeConfig(strings.Replace(base, "route add default via 203.0.113.1 dev eth0\n", "", 1))
	e.sighup()
	if ok, why := eventually(5*time.Second, typeOf("network unreachable")); !ok {
		t.Fatalf("reload did not remove the default route: %s", why)
	}
	if r := e.ping("h1", lab.InternetIP, one); r.ErrorsFrom(gw10, lab.KindNetUnreachable) != 1 {
		t.Errorf("without a default route: want \"Destination Net Unreachable\" from %s, got %+v\n%s", gw10, r.Errors, r.Output)
	}
	e.writeConfig(base)
	e.sighup()
	if ok, why := eventually(5*time.Second, typeOf("unicast")); !ok {
		t.Fatalf("reload did not restore the default route: %s", why)
	}

	// A broken file: a valid new line and an invalid one. Refused whole.
	lines := strings.Count(base, "\n")
	broken := base + "route add prohibit 198.51.100.0/24\nroute add 10.99.0.0/33 dev eth0\n"
	e.writeConfig(broken)
	routesBefore := e.ctl("route show table all")
	e.sighup()
	wantErr := fmt.Sprintf("router.conf:%d:", lines+2)
	if ok, why := eventually(5*time.Second, func() (bool, string) {
		return strings.Contains(e.stderr.String(), wantErr), "daemon log lacks " + wantErr
	}); !ok {
		t.Errorf("broken file: %s\n%s", why, lastBytes(e.stderr.String(), 2000))
	}
	time.Sleep(200 * time.Millisecond)
	if !e.alive() {
		t.Fatal("the daemon exited on a broken config")
	}
	if after := e.ctl("route show table all"); after != routesBefore {
		t.Errorf("a refused reload changed the routes:\nbefore:\n%s\nafter:\n%s", routesBefore, after)
	}
	if ok, why := typeOf("unicast")(); !ok {
		t.Errorf("a refused reload applied its valid line: %s", why)
	}
	e.pingOK("h1", lab.InternetIP, 63)
	// The same through the control socket.
	if _, err := e.ctlErr("reload"); err == nil || !strings.Contains(err.Error(), wantErr) {
		t.Errorf("netfwd ctl reload of the broken file: %v, want an error naming %s", err, wantErr)
	}
	e.pingOK("h1", lab.InternetIP, 63)
}
