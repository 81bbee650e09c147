package main

// Packet trace end to end: each kind of path a frame can take, traced with
// `netfwd ctl -j trace`, and the trace checked against what the frame
// actually did (which host got it, which ISP's kernel counted the echo,
// which ARP request went out, which ICMP error came back).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/lab"
)

// traceRec is a trace record as `-j` prints it.
type traceRec struct {
	Seq   uint64
	Port  string
	Frame string
	Steps []struct {
		Step   string
		Detail string
	}
	Outputs []struct {
		Port      string
		VLAN      uint16
		Len       int
		Frame     string
		Generated bool
	}
	Result string
}

func (r traceRec) step(name string) string {
	var ds []string
	for _, s := range r.Steps {
		if s.Step == name {
			ds = append(ds, s.Detail)
		}
	}
	return strings.Join(ds, "; ")
}

func (r traceRec) String() string {
	b, _ := json.MarshalIndent(r, "", "  ")
	return string(b)
}

// traceDuring traces one frame of port matching filter while act runs.
func (e *e2e) traceDuring(port, filter string, act func()) traceRec {
	e.t.Helper()
	var out, errb bytes.Buffer
	done := make(chan int, 1)
	line := fmt.Sprintf("trace port %s count 1 filter %s", port, filter)
	go func() {
		done <- dispatch([]string{"ctl", "--ctl", e.CtlPath, "-j", line}, strings.NewReader(""), &out, &errb)
	}()
	time.Sleep(300 * time.Millisecond) // the session is registered
	act()
	select {
	case code := <-done:
		if code != 0 {
			e.t.Fatalf("%s: exit %d: %s", line, code, errb.String())
		}
	case <-time.After(10 * time.Second):
		e.t.Fatalf("%s: no frame traced in 10 s", line)
	}
	var r traceRec
	if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &r); err != nil {
		e.t.Fatalf("%s: %v: %q", line, err, out.String())
	}
	e.t.Logf("%s:\n%s", line, r)
	return r
}

var (
	ecmpPrefix = netip.MustParsePrefix("198.18.5.0/24")
	ecmpDst    = netip.MustParseAddr("198.18.5.1")
	noHost     = netip.MustParseAddr("203.0.113.77") // on eth0's subnet, nobody answers ARP
)

// traceSpec: the standard network, a second uplink isp2 on eth6, both ISPs
// holding 198.18.5.1 behind an ECMP group of the two (a BGP prefix).
func traceSpec() lab.Spec {
	s := lab.Standard()
	s.Hosts[3].Loopback = append(s.Hosts[3].Loopback, netip.PrefixFrom(ecmpDst, 32))
	s.Hosts = append(s.Hosts, lab.UplinkHost("isp2", "eth6", netip.MustParsePrefix("192.0.2.1/24"),
		netip.MustParsePrefix("192.0.2.2/24"), mustMAC("02:00:00:00:e0:02"), "02:00:00:00:e0:fd", ecmpDst))
	s.RouterConfig = append(s.RouterConfig,
		"nexthop add id 1 via 203.0.113.1 dev eth0",
		"nexthop add id 2 via 192.0.2.1 dev eth6",
		"nexthop add id 10 group 1/2",
		"route add "+ecmpPrefix.String()+" nhid 10 proto bgp")
	return s
}

// TestE2ETrace: bridged in a VLAN, routed between VLANs, routed into an
// ECMP prefix, to an unresolved neighbour, TTL expiring, punted to the
// host path: each trace names its steps, and they match what happened.
func TestE2ETrace(t *testing.T) {
	waitingTest(t)
	e := newE2EArgs(t, traceSpec(), nil, "--host-path", "--punt-echo")
	h2IP, h3IP := netip.MustParseAddr("10.0.10.12"), netip.MustParseAddr("10.0.20.13")
	// Neighbours resolved, FDB learned: the traced frames meet a warm router.
	e.pingOK("h1", h2IP, 64)
	e.pingOK("h1", h3IP, 63)
	e.pingOK("h1", lab.InternetIP, 63)
	e.pingOK("h1", ecmpDst, 63)

	t.Run("bridged", func(t *testing.T) {
		var res lab.PingResult
		r := e.traceDuring("eth1", "icmp and dst host "+h2IP.String(), func() { res = e.ping("h1", h2IP, lab.PingOptions{Count: 1}) })
		if res.Received != 1 {
			t.Errorf("the ping was not answered: %+v", res)
		}
		if !strings.Contains(r.step("in"), "vlan 10") || !strings.Contains(r.step("fdb"), "hit") || !strings.Contains(r.step("fdb"), "eth2") ||
			r.Result != "bridged" || len(r.Outputs) != 1 || r.Outputs[0].Port != "eth2" || r.Outputs[0].VLAN != 0 || r.step("router") != "" {
			t.Errorf("trace of a frame bridged h1 -> h2:\n%s", r)
		}
	})

	t.Run("routed between VLANs", func(t *testing.T) {
		var res lab.PingResult
		r := e.traceDuring("eth1", "icmp and dst host "+h3IP.String(), func() { res = e.ping("h1", h3IP, lab.PingOptions{Count: 1}) })
		if res.Received != 1 || res.ReplyTTL != 63 {
			t.Errorf("the ping: %+v", res)
		}
		if !strings.Contains(r.step("fdb"), "own address") || !strings.Contains(r.step("router"), "in vlan10") ||
			!strings.Contains(r.step("fib"), "10.0.20.0/24") || !strings.Contains(r.step("nexthop"), "dev vlan20") ||
			!strings.Contains(r.step("neighbour"), "REACHABLE") || !strings.Contains(r.step("ttl/mtu"), "ttl 64 -> 63") ||
			r.Result != "forwarded" || len(r.Outputs) != 1 || r.Outputs[0].Port != "eth3" {
			t.Errorf("trace of a frame routed vlan10 -> vlan20:\n%s", r)
		}
	})

	t.Run("ECMP into a BGP prefix", func(t *testing.T) {
		isp, isp2 := e.host("isp"), e.host("isp2")
		a0, b0 := kernelCounter(t, isp.NS, "Icmp", "InEchos"), kernelCounter(t, isp2.NS, "Icmp", "InEchos")
		r := e.traceDuring("eth1", "icmp and dst host "+ecmpDst.String(), func() { e.ping("h1", ecmpDst, lab.PingOptions{Count: 1}) })
		a1, b1 := kernelCounter(t, isp.NS, "Icmp", "InEchos"), kernelCounter(t, isp2.NS, "Icmp", "InEchos")
		fibStep, ecmp := r.step("fib"), r.step("ecmp")
		if !strings.Contains(fibStep, ecmpPrefix.String()) || !strings.Contains(fibStep, "proto bgp") || !strings.Contains(fibStep, "nexthop id 10") ||
			!strings.Contains(ecmp, "group of 2") || r.Result != "forwarded" || len(r.Outputs) != 1 {
			t.Fatalf("trace into the ECMP prefix:\n%s", r)
		}
		// The member the trace names is the ISP whose kernel got the echo.
		switch {
		case strings.Contains(ecmp, "via 203.0.113.1 dev eth0"):
			if a1-a0 != 1 || b1-b0 != 0 || r.Outputs[0].Port != "eth0" {
				t.Errorf("trace chose isp (eth0); echoes isp +%d isp2 +%d, output %s", a1-a0, b1-b0, r.Outputs[0].Port)
			}
		case strings.Contains(ecmp, "via 192.0.2.1 dev eth6"):
			if a1-a0 != 0 || b1-b0 != 1 || r.Outputs[0].Port != "eth6" {
				t.Errorf("trace chose isp2 (eth6); echoes isp +%d isp2 +%d, output %s", a1-a0, b1-b0, r.Outputs[0].Port)
			}
		default:
			t.Errorf("ecmp step names no member: %q", ecmp)
		}
	})

	t.Run("unresolved neighbour", func(t *testing.T) {
		rec := e.recorder("isp")
		r := e.traceDuring("eth1", "icmp and dst host "+noHost.String(), func() { e.ping("h1", noHost, lab.PingOptions{Count: 1}) })
		if _, err := rec.WaitFor(2*time.Second, func(f lab.Frame) bool { return f.ARP && f.ARPOp == 1 && f.ARPTPA == noHost }); err != nil {
			t.Errorf("no ARP request for %s on eth0: %v", noHost, err)
		}
		nb := r.step("neighbour")
		arpOut := false
		for _, o := range r.Outputs {
			arpOut = arpOut || o.Generated && o.Port == "eth0" && strings.Contains(o.Frame, "ARP request who-has "+noHost.String())
		}
		if r.Result != "queued: waiting for ARP" || !strings.Contains(nb, "queued") || !strings.Contains(nb, "ARP request sent") || !arpOut {
			t.Errorf("trace to an unresolved neighbour:\n%s", r)
		}
	})

	t.Run("TTL expiring", func(t *testing.T) {
		var res lab.PingResult
		r := e.traceDuring("eth1", "icmp and dst host "+lab.InternetIP.String(), func() {
			res = e.ping("h1", lab.InternetIP, lab.PingOptions{Count: 1, TTL: 1})
		})
		icmpBack := false
		for _, o := range r.Outputs {
			icmpBack = icmpBack || o.Generated && o.Port == "eth1" && strings.Contains(o.Frame, "ICMP type 11 code 0")
		}
		if !strings.Contains(r.step("ttl/mtu"), "expires") || !strings.Contains(r.step("icmp"), "ttl exceeded") ||
			!strings.HasPrefix(r.Result, "dropped: router ttl_expired") || !icmpBack {
			t.Errorf("trace of a TTL 1 packet:\n%s", r)
		}
		if len(res.Errors) == 0 || !strings.Contains(res.Output, "exceeded") {
			t.Errorf("the ping saw no time exceeded: %s", res.Output)
		}
	})

	t.Run("punted to the host path", func(t *testing.T) {
		gw := netip.MustParseAddr("10.0.10.1")
		var res lab.PingResult
		r := e.traceDuring("eth1", "icmp and dst host "+gw.String(), func() { res = e.ping("h1", gw, lab.PingOptions{Count: 1}) })
		if res.Received != 1 {
			t.Errorf("the kernel's answer through the twin did not come back: %+v", res)
		}
		if !strings.Contains(r.step("fib"), "local") || !strings.Contains(r.step("local"), "punted to the host path") ||
			r.Result != "punted to the host path" {
			t.Errorf("trace of a ping to the router with --punt-echo:\n%s", r)
		}
	})

	t.Run("text", func(t *testing.T) {
		var out, errb bytes.Buffer
		done := make(chan int, 1)
		go func() {
			done <- dispatch([]string{"ctl", "--ctl", e.CtlPath, "trace port eth1 count 1 filter icmp"}, strings.NewReader(""), &out, &errb)
		}()
		time.Sleep(300 * time.Millisecond)
		e.ping("h1", h3IP, lab.PingOptions{Count: 1})
		if code := <-done; code != 0 || !strings.Contains(out.String(), "trace 1: eth1 in") || !strings.Contains(out.String(), "result     forwarded") ||
			!strings.Contains(errb.String(), "1 frames traced") {
			t.Errorf("text trace: exit %d\n%s\n%s", code, out.String(), errb.String())
		}
	})
}
