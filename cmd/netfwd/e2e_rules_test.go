package main

// End-to-end: policy routing (`ip rule`) on the forwarding path, between
// real Linux hosts. The standard network with a second uplink, isp2 on
// eth6, which holds the same "Internet" address (198.51.100.1) as the isp:
// which uplink a ping crossed is which host's kernel counted the echo
// request. h1 (10.0.10.0/24) and h3 (10.0.20.0/24) are the two sources
// (h2 shares h1's subnet in the standard network).

import (
	"fmt"
	"testing"

	"github.com/netfwd/netfwd/internal/lab"
)

// TestE2ERuleFromSubnet: `rule add from 10.0.20.0/24 lookup 100` in the
// config file sends h3's traffic to table 100's default route (isp2 on
// eth6) while h1's keeps main's (the isp on eth0); `ctl rule del` puts
// h3's back on eth0; a `prohibit` rule added through ctl answers h1's ping
// with "administratively prohibited" from the router.
func TestE2ERuleFromSubnet(t *testing.T) {
	waitingTest(t)
	spec := combinedSpec()
	spec.RouterConfig = append(spec.RouterConfig,
		"route add default via "+isp2Addr.Addr().String()+" dev eth6 table 100",
		"rule add from 10.0.20.0/24 lookup 100")
	e := newE2E(t, spec, nil)
	isp, isp2 := e.host("isp").NS, e.host("isp2").NS
	rules := func() string {
		out, err := e.ctlErr("rule show")
		if err != nil {
			return err.Error()
		}
		return out
	}
	echos := func() (int64, int64) {
		return kernelCounter(t, isp, "Icmp", "InEchos"), kernelCounter(t, isp2, "Icmp", "InEchos")
	}
	// pingVia pings the Internet address from a host and requires every
	// echo request to have reached the given uplink host and none the
	// other.
	pingVia := func(from, via string) {
		t.Helper()
		a0, b0 := echos()
		e.pingOK(from, lab.InternetIP, 63)
		a1, b1 := echos()
		want := map[string][2]int64{"isp": {3, 0}, "isp2": {0, 3}}[via]
		if a1-a0 != want[0] || b1-b0 != want[1] {
			t.Fatalf("%s -> %s: isp counted %d echo requests, isp2 %d; want all 3 via %s\nrules:\n%s",
				from, lab.InternetIP, a1-a0, b1-b0, via, rules())
		}
	}
	pingVia("h1", "isp")
	pingVia("h3", "isp2")
	pingVia("h1", "isp")

	e.ctl("rule del from 10.0.20.0/24 lookup 100")
	pingVia("h3", "isp")
	pingVia("h1", "isp")

	// A rule's prohibit answers like a prohibit route: from the router's
	// address on the sender's side; other sources are untouched.
	e.ctl(fmt.Sprintf("rule add from %s/32 to %s prohibit", h1IP, lab.InternetIP))
	r := e.ping("h1", lab.InternetIP, lab.PingOptions{Count: 1})
	if r.Received != 0 || len(r.Errors) != 1 || r.ErrorsFrom(gw10, lab.KindProhibited) != 1 {
		t.Fatalf("ping with a prohibit rule: want one %s from %s, got %d replies, errors %+v\n%s",
			lab.KindProhibited, gw10, r.Received, r.Errors, r.Output)
	}
	pingVia("h3", "isp")
}
