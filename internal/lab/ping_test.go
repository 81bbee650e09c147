package lab

// The lab's tools checked against Linux itself: the standard network with
// the Linux kernel as the router (LinuxRouter), pinged with iputils ping and
// with the Go pinger. Both must see the same replies and the same ICMP
// errors from the same addresses, so the Go fallback `netfwd-lab` uses on
// machines without ping reports what ping would.

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/testenv"
)

// buildLinux builds spec with Linux as the router, removed when the test
// ends.
func buildLinux(t *testing.T, spec Spec) *Net {
	t.Helper()
	testenv.RequireRoot(t, "ping")
	n, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	if err := n.LinuxRouter(); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPingToolsAgreeOnLinuxRouter(t *testing.T) {
	// Linux rate-limits ICMP errors per destination host (a burst of 5-6,
	// then one a second; the unreachable-route budget is global-only
	// net.ipv4.route.error_cost): every case and tool pings from a host of
	// its own, so every error is sent.
	spec := Standard()
	for i := range 16 {
		spec.Hosts = append(spec.Hosts, AccessHost(fmt.Sprintf("e%d", i), fmt.Sprintf("eth%d", 10+i), 10,
			fmt.Sprintf("10.0.10.%d/24", 100+i), fmt.Sprintf("02:00:00:00:10:%02x", 100+i)))
	}
	n := buildLinux(t, spec)
	gw := VLAN10Addr.Addr()
	h2 := netip.MustParseAddr("10.0.10.12")
	h3 := netip.MustParseAddr("10.0.20.13")
	cases := []struct {
		name      string
		dst       netip.Addr
		ttl       int
		replies   int
		errFrom   netip.Addr
		errKind   string
		replyFrom netip.Addr
	}{
		{name: "same VLAN", dst: h2, replies: 2, replyFrom: h2},
		{name: "across VLANs", dst: h3, replies: 2, replyFrom: h3},
		{name: "uplink", dst: InternetIP, replies: 2, replyFrom: InternetIP},
		{name: "ttl 1", dst: InternetIP, ttl: 1, errFrom: gw, errKind: KindTTLExceeded},
		{name: "ttl 2", dst: InternetIP, ttl: 2, replies: 2, replyFrom: InternetIP},
		{name: "unreachable route", dst: UnreachIP, errFrom: gw, errKind: KindHostUnreachable},
		{name: "prohibit route", dst: ProhibitIP, errFrom: gw, errKind: KindProhibited},
		{name: "blackhole route", dst: BlackholeIP},
	}
	next := 0
	for _, c := range cases {
		for _, tool := range []string{"ping", "go"} {
			from := n.Host(fmt.Sprintf("e%d", next))
			next++
			t.Run(c.name+"/"+tool, func(t *testing.T) {
				r, err := Ping(from.NS, c.dst, PingOptions{Count: 2, TTL: c.ttl, Tool: tool})
				if err != nil {
					t.Fatal(err)
				}
				if r.Tool != tool || r.Sent != 2 || r.Received != c.replies {
					t.Errorf("tool %s sent %d received %d, want %s 2 %d\n%s", r.Tool, r.Sent, r.Received, tool, c.replies, r.Output)
				}
				if c.replies > 0 && r.ReplyFrom != c.replyFrom {
					t.Errorf("reply from %v, want %v\n%s", r.ReplyFrom, c.replyFrom, r.Output)
				}
				wantErrs := 0
				if c.errKind != "" {
					wantErrs = 2
				}
				if len(r.Errors) != wantErrs || (wantErrs > 0 && r.ErrorsFrom(c.errFrom, c.errKind) != wantErrs) {
					t.Errorf("errors %+v, want %d x %s from %v\n%s", r.Errors, wantErrs, c.errKind, c.errFrom, r.Output)
				}
			})
		}
	}
}

func TestThroughputToolsOnLinuxRouter(t *testing.T) {
	n := buildLinux(t, Standard())
	h1, h3 := n.Host("h1"), n.Host("h3")
	// Resolve h1's gateway first, as a host would before sending.
	if _, err := Ping(h1.NS, h3.Addr.Addr(), PingOptions{Count: 1}); err != nil {
		t.Fatal(err)
	}
	b, err := Blast(t.Context(), h1, h3, BridgeMAC, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("blaster through Linux: %v", b)
	if b.DeliveredPPS < 10000 || b.Loss > 0.5 {
		t.Errorf("blaster through Linux: %v; want at least 10 kpps, loss under 50%%", b)
	}
	if !testenv.Have(t, "iperf3") {
		return
	}
	r, err := Iperf3(t.Context(), h1.NS, h3.NS, h3.Addr.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("iperf3 through Linux: %v", r)
	if r.Gbps < 0.1 {
		t.Errorf("iperf3 through Linux %v, want at least 0.1 Gbit/s", r)
	}
}
