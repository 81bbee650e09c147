package main

import (
	"strings"
	"testing"

	"github.com/netfwd/netfwd/internal/hostpath"
)

func TestParsePuntLimit(t *testing.T) {
	for _, c := range []struct {
		in    string
		class hostpath.Class
		want  hostpath.Limit
		err   bool
	}{
		{in: "other=2000/200", class: hostpath.ClassOther, want: hostpath.Limit{Rate: 2000, Burst: 200}},
		{in: "routing=500", class: hostpath.ClassRouting, want: hostpath.Limit{Rate: 500, Burst: 100}},
		{in: "neigh=2", class: hostpath.ClassNeigh, want: hostpath.Limit{Rate: 2, Burst: 1}},
		{in: "bgp=100", err: true},
		{in: "other", err: true},
		{in: "other=-5", err: true},
		{in: "other=NaN", err: true},
		{in: "other=10/0", err: true},
		{in: "other=10/x", err: true},
	} {
		var l hostpath.Limits
		err := parsePuntLimit(&l, c.in)
		if (err != nil) != c.err {
			t.Errorf("%q: err %v, want error %v", c.in, err, c.err)
			continue
		}
		if err == nil && l[c.class] != c.want {
			t.Errorf("%q: %v, want %v", c.in, l[c.class], c.want)
		}
	}
}

// TestRunNoNAPIBusyPoll: the daemon no longer offers NAPI busy polling
// (--xdp-napi-busy-poll collapsed forwarding to a tenth of what it was
// without it, docs/bench-veth.md): the flag is refused before anything
// opens.
func TestRunNoNAPIBusyPoll(t *testing.T) {
	var out strings.Builder
	rc := runDaemon([]string{"--config", "/nonexistent", "--xdp-napi-busy-poll", "20us"}, nil, &out, &out)
	if rc != 2 || !strings.Contains(out.String(), "xdp-napi-busy-poll") {
		t.Fatalf("rc %d, want 2 and the flag named:\n%s", rc, out.String())
	}
	if strings.Contains(runUsage, "napi") {
		t.Errorf("the usage still offers it: %s", runUsage)
	}
}
