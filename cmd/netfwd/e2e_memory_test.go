package main

// End-to-end: the daemon's resident memory (docs/reliability.md, item 7).
// Its rings and buffers are mapped and touched when a port opens, so an
// idle daemon already holds what a busy one does: TestMemoryIdleTwoPorts
// bounds a small router at rest on both backends, TestE2EManyPorts
// (e2e_faults_test.go) the
// growth per port of a router with 48 ports and traffic on every port.
//
// The race detector multiplies memory use: the bounds are asserted only
// in a binary built without it (.ci/run runs these tests once so).

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/lab"
)

const (
	// idleTwoPortsLimitKB is the RSS of an idle 2-port daemon with the
	// defaults: 64 MB.
	idleTwoPortsLimitKB = 64 * 1000 * 1000 / 1024
	// perPortLimitKB is what a port may add to the daemon's RSS, rings,
	// buffers and state included: 16 MiB.
	perPortLimitKB = 16 * 1024
)

// rssKB is the daemon's resident memory: anonymous, file-backed (the
// AF_PACKET rings and the AF_XDP UMEM count here) and shared.
func rssKB(t *testing.T, pid int) int {
	t.Helper()
	return procStatusKB(t, pid, "RssAnon") + procStatusKB(t, pid, "RssFile") + procStatusKB(t, pid, "RssShmem")
}

// routedPorts is a lab of n routed ports pN, each with one host mN on
// 10.100.N.0/24.
func routedPorts(n int) lab.Spec {
	spec := lab.Spec{}
	for i := range n {
		h := lab.UplinkHost(fmt.Sprintf("m%d", i), fmt.Sprintf("p%d", i),
			netip.MustParsePrefix(fmt.Sprintf("10.100.%d.2/24", i)), netip.MustParsePrefix(fmt.Sprintf("10.100.%d.1/24", i)),
			mustMAC(fmt.Sprintf("02:00:00:00:64:%02x", i)), fmt.Sprintf("02:00:00:01:64:%02x", i))
		h.Gateway = netip.MustParseAddr(fmt.Sprintf("10.100.%d.1", i))
		spec.Hosts = append(spec.Hosts, h)
	}
	return spec
}

// settledRSS reads rssKB after the daemon's start-up garbage is collected
// or returned: the lowest of a few readings over a second.
func settledRSS(t *testing.T, pid int) int {
	t.Helper()
	low := rssKB(t, pid)
	for range 4 {
		time.Sleep(250 * time.Millisecond)
		low = min(low, rssKB(t, pid))
	}
	return low
}

// TestMemoryIdleTwoPorts: a daemon with the defaults and two ports holds
// at most 64 MB at rest, with AF_PACKET (it held 165 MB with 64 MiB of
// rings a port) and with AF_XDP (94 MB with a 64 MiB UMEM a worker).
func TestMemoryIdleTwoPorts(t *testing.T) {
	for _, io := range []string{"auto", "afxdp"} {
		t.Run(io, func(t *testing.T) {
			t.Setenv("NETFWD_TEST_IO", io) // newE2E's --io
			e := newE2E(t, routedPorts(2), nil)
			e.pingOK("m0", netip.MustParseAddr("10.100.1.2"), 63)
			pid := e.daemonPid()
			rss := settledRSS(t, pid)
			t.Logf("idle, 2 ports (%s): RSS %d KiB (%.1f MiB; RssAnon %d, RssFile %d KiB)", io, rss, float64(rss)/1024,
				procStatusKB(t, pid, "RssAnon"), procStatusKB(t, pid, "RssFile"))
			if raceEnabled() {
				t.Skip("race detector: memory not asserted (.ci/run runs this test without it)")
			}
			if rss > idleTwoPortsLimitKB {
				t.Errorf("idle 2-port daemon (%s): RSS %d KiB, want at most %d KiB (64 MB)", io, rss, idleTwoPortsLimitKB)
			}
		})
	}
}
