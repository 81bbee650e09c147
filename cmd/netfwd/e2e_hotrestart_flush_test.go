package main

// `netfwd ctl route flush` and `neigh flush` are durable across a hot
// restart as other ctl changes are: the journal carries the flush line and
// the successor runs it again after its file and the earlier ctl
// requests, so ctl routes, the file's routes and permanent neighbours it
// flushed stay flushed.

import (
	"strings"
	"testing"

	"github.com/netfwd/netfwd/internal/lab"
)

func TestHotRestartKeepsCtlFlush(t *testing.T) {
	waitingTest(t)
	e := newE2E(t, lab.Standard(), nil)
	e.ctl("route add 198.51.100.0/24 via 203.0.113.1 dev eth0 proto static",
		"route add 198.51.101.0/24 via 203.0.113.1 dev eth0 proto static",
		"route add 198.51.102.0/24 via 203.0.113.1 dev eth0")
	e.ctl("neigh add 10.0.20.98 lladdr 02:00:00:00:20:98 dev vlan20 nud permanent",
		"neigh add 10.0.20.99 lladdr 02:00:00:00:20:99 dev vlan20 nud permanent")
	if n := e.ctl("neigh show nud permanent"); !strings.Contains(n, "10.0.20.98") || !strings.Contains(n, "10.0.20.99") {
		t.Fatalf("neigh show nud permanent lacks ctl's permanent neighbours:\n%s", n)
	}
	e.ctl("route flush proto static", "ip route flush type unreachable") // ctl's routes, a file's route
	e.ctl("neigh flush dev vlan20 nud permanent")
	e.ctl("route add 198.51.103.0/24 via 203.0.113.1 dev eth0 proto static") // after the flush: stays
	check := func(when string) {
		t.Helper()
		routes := e.ctl("route show")
		for _, gone := range []string{"198.51.100.0/24", "198.51.101.0/24", "10.67.0.0/16"} {
			if strings.Contains(routes, gone) {
				t.Errorf("%s: flushed route %s is back:\n%s", when, gone, routes)
			}
		}
		for _, kept := range []string{"198.51.102.0/24", "198.51.103.0/24", "10.66.0.0/16", "10.68.0.0/16"} {
			if !strings.Contains(routes, kept) {
				t.Errorf("%s: route %s missing:\n%s", when, kept, routes)
			}
		}
		if n := e.ctl("neigh show nud permanent"); strings.Contains(n, "10.0.20.98") || strings.Contains(n, "10.0.20.99") {
			t.Errorf("%s: flushed permanent neighbours are back:\n%s", when, n)
		}
	}
	check("before the hot restart")
	before := journalSnapshot(e)
	e.hotRestart()
	check("after the hot restart")
	for q, b := range journalSnapshot(e) {
		if before[q] != b {
			t.Errorf("`ctl %s` after the hot restart differs:\nbefore:\n%s\nafter:\n%s", q, before[q], b)
		}
	}
	e.hotRestart() // the successor hands the flushes on
	check("after a second hot restart")
}
