package main

// Who may speak FPM to `netfwd run --fpm` (issue 19, item 6), through the
// daemon's flags: a local user other than root and the routing daemons'
// is refused and logged; --fpm-allow-user lets it in.

import (
	"bytes"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/fpm"
	"github.com/netfwd/netfwd/internal/lab"
	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/rtnl"
)

func TestE2EFPMAccess(t *testing.T) {
	const addr = "127.0.0.1:2620"
	e := newE2EArgs(t, lab.Standard(), nil, "--fpm", addr)
	blackhole := func(p string) []byte {
		return fpm.AppendNewRoute(nil, &fpm.ZebraRoute{Prefix: netip.MustParsePrefix(p), Protocol: 196,
			Type: rtnl.RTN_BLACKHOLE})
	}
	// nobody's client: connects, sends its route, waits for the close.
	asNobody := func(stream []byte) string {
		cmd := exec.Command("ip", "netns", "exec", e.net.Router, "setpriv", "--reuid", "65534", "--regid", "65534",
			"--clear-groups", "timeout", "5", "bash", "-c",
			`exec 3<>/dev/tcp/127.0.0.1/2620 || exit 3; echo connected; cat >&3; cat <&3 >/dev/null; echo closed`)
		cmd.Stdin = bytes.NewReader(stream)
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	learned := func(p string) bool { return strings.Contains(e.ctl("route show"), p) }

	out := asNobody(blackhole("198.18.77.0/24"))
	if !strings.Contains(out, "closed") {
		t.Fatalf("nobody's connection was not closed by netfwd: %q", out)
	}
	if ok, _ := eventually(5*time.Second, func() (bool, string) {
		return strings.Contains(e.stderr.String(), "fpm: refused a connection"), ""
	}); !ok || !strings.Contains(e.stderr.String(), "uid=65534") {
		t.Fatalf("refusal not logged with the uid:\n%s", e.stderr)
	}
	if learned("198.18.77.0/24") {
		t.Fatal("nobody's route was installed")
	}
	if n := e.scrape().Sum(metricFPMRefused, "reason", "peer"); n != 1 {
		t.Fatalf("%s{reason=peer} = %v, want 1", metricFPMRefused, n)
	}

	// root (zebra's stand-in here) is allowed by default.
	var c net.Conn
	if err := pktio.InNetns(e.net.Router, func() (err error) { c, err = net.Dial("tcp", addr); return err }); err != nil {
		t.Fatal(err)
	}
	c.Write(blackhole("198.18.78.0/24"))
	if ok, _ := eventually(5*time.Second, func() (bool, string) { return learned("198.18.78.0/24"), "" }); !ok {
		t.Fatalf("root's route not installed:\n%s", e.ctl("route show"))
	}
	c.Close()

	// --fpm-allow-user: nobody is the routing daemon's user now.
	e.stop()
	e.ExtraArgs = append(e.ExtraArgs, "--fpm-allow-user", "0,nobody")
	e.start()
	go asNobody(blackhole("198.18.79.0/24"))
	if ok, _ := eventually(10*time.Second, func() (bool, string) { return learned("198.18.79.0/24"), "" }); !ok {
		t.Fatalf("allowed user's route not installed:\n%s\n%s", e.ctl("route show"), e.stderr)
	}
	if strings.Contains(e.stderr.String(), "refused") {
		t.Fatalf("refused an allowed user:\n%s", e.stderr)
	}
}
