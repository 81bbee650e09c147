package lab

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/testenv"
)

// TestDemoWithGoTools runs the lab's checks as on a machine without ping
// and iperf3: the Go pinger and the Blaster stand in, and every check
// passes.
func TestDemoWithGoTools(t *testing.T) {
	testenv.RequireRoot(t)
	var out bytes.Buffer
	rep, err := RunDemo(t.Context(), DemoOptions{Out: &out, GoTools: true, Throughput: time.Second,
		Metrics: "127.0.0.1:0", Ctl: t.TempDir() + "/ctl.sock"})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if rep.Failed() > 0 || len(rep.Checks) < 15 {
		t.Errorf("%d of %d checks failed\n%s", rep.Failed(), len(rep.Checks), out.String())
	}
	if rep.Throughput == nil || rep.Throughput.Tool != "blaster" || rep.Throughput.DeliveredPPS <= 0 {
		t.Errorf("throughput: %+v", rep.Throughput)
	}
	for _, want := range []string{"pinging with netfwd's Go pinger", "Time to live exceeded", "Packet filtered", "using netfwd's built-in 64-byte UDP blaster"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// The diagram names the real namespaces and keeps its right-hand column
// (the corners and bars) in one column whatever their length.
func TestTopologyTextAligned(t *testing.T) {
	for _, prefix := range []string{"nf1", "nfab12cdef"} {
		text := topologyText(prefix+"-r", []string{prefix + "-h1", prefix + "-h2", prefix + "-h3", prefix + "-isp"})
		col := -1
		for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
			r := []rune(line)
			i := -1
			for j, c := range r {
				if strings.ContainsRune("┐┤┘│", c) {
					i = j
					break
				}
			}
			if strings.Contains(line, "the Internet") {
				continue
			}
			if i < 0 {
				t.Fatalf("%s: line without the column: %q\n%s", prefix, line, text)
			}
			if col >= 0 && i != col {
				t.Errorf("%s: column at %d, want %d: %q\n%s", prefix, i, col, line, text)
			}
			col = i
		}
		for _, ns := range []string{prefix + "-h1", prefix + "-isp", prefix + "-r"} {
			if !strings.Contains(text, "namespace "+ns) {
				t.Errorf("no namespace %s in\n%s", ns, text)
			}
		}
	}
}
