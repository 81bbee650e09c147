package daemon

import (
	"slices"
	"strings"
	"testing"
)

// Both ways a reload reads a file: checked whole on scratch engines (up to
// verifyLines lines) and diffed as text (larger files; verifyLines 0 sends
// every file there). Each opens the ports a file names, forwards as the
// file says, and refuses a bad file with every problem as FILE:LINE: a line
// that does not parse and a line that does not apply.
func TestReloadBothWays(t *testing.T) {
	for _, asText := range []bool{false, true} {
		name := "checked-whole"
		if asText {
			name = "as-text"
		}
		t.Run(name, func(t *testing.T) {
			if asText {
				defer func(v int) { verifyLines = v }(verifyLines)
				verifyLines = 0
			}
			tp := newTopo(t)
			if err := tp.lab.IP(tp.h2, "addr", "add", "10.9.0.2/32", "dev", "lo"); err != nil {
				t.Fatal(err)
			}
			base := tp.baseConfig()
			tp.writeConfig(t, base[0]) // r2 is not a port yet
			d := tp.start(t)
			if slices.Contains(d.Ports(), tp.r2) {
				t.Fatalf("ports %v before the reload names %s", d.Ports(), tp.r2)
			}
			tp.writeConfig(t, append(base, "route add 10.9.0.0/16 via 10.2.0.2")...)
			if err := d.Reload(); err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(d.Ports(), tp.r2) {
				t.Fatalf("ports %v: the reload did not open %s", d.Ports(), tp.r2)
			}
			if err := tp.ping(tp.h1, "10.9.0.2", 2); err != nil {
				t.Fatalf("after the reload: %v", err)
			}
			tp.writeConfig(t, append(base, "route add 10.9.0.0/16 via 10.2.0.2",
				"route add 10.8.0.0/33 via 10.2.0.2", "route add 10.7.0.0/16 via 172.31.0.1")...)
			err := d.Reload()
			if err == nil || !strings.Contains(err.Error(), "router.conf:4: ") || !strings.Contains(err.Error(), "router.conf:5: ") {
				t.Fatalf("bad file: want errors of lines 4 and 5, got %v", err)
			}
			if err := tp.ping(tp.h1, "10.9.0.2", 2); err != nil {
				t.Fatalf("after a refused reload: %v", err)
			}
			tp.writeConfig(t, base...)
			if err := d.Reload(); err != nil {
				t.Fatal(err)
			}
			if err := tp.ping(tp.h1, "10.9.0.2", 1); err == nil {
				t.Fatal("10.9.0.2 still reachable after its route left the file")
			}
		})
	}
}
