package main

// End-to-end: a device the configuration names must exist. Under `netfwd
// run` a port is a real interface of the daemon's namespace: a line naming
// one that is not there is refused with iproute2's words, on the control
// socket, in the config file at start and at reload, and nothing changes;
// an interface that exists but was not a port yet becomes one when a ctl
// line names it.

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/lab"
	"github.com/netfwd/netfwd/internal/testenv"
)

const noEth9 = `Cannot find device "eth9"`

// TestE2ECtlMissingDevice: every ctl line naming eth9, which the router's
// namespace does not have, exits non-zero with `Cannot find device "eth9"`
// and leaves `link show` as it was.
func TestE2ECtlMissingDevice(t *testing.T) {
	e := newE2E(t, lab.Standard(), nil)
	links := e.ctl("link show")
	for _, line := range []string{
		"route add 10.8.0.0/16 dev eth9",
		"route add 10.8.0.0/16 via 203.0.113.1 dev eth9",
		"address add 10.7.0.1/24 dev eth9",
		"nexthop add id 9 via 203.0.113.1 dev eth9",
		"link set eth9 up",
		"link set eth9 master br0",
		"neigh add 10.0.10.99 lladdr 02:00:00:00:10:99 dev eth9",
		"bridge vlan add dev eth9 vid 10",
		"bridge fdb add 02:00:00:00:10:99 dev eth9 master",
	} {
		_, err := e.ctlErr(line)
		if err == nil || !strings.Contains(err.Error(), "ctl:1: "+noEth9) {
			t.Errorf("netfwd ctl %s: %v, want exit 1 and ctl:1: %s", line, err, noEth9)
		}
	}
	if after := e.ctl("link show"); after != links {
		t.Errorf("link show changed:\nbefore:\n%s\nafter:\n%s", links, after)
	}
	e.pingOK("h1", lab.InternetIP, 63)
}

// TestE2ECtlNewPort: an interface of the namespace that is not a port yet
// becomes an open port when a ctl line names it: a host behind it reaches
// the router and the other hosts at once.
func TestE2ECtlNewPort(t *testing.T) {
	var hostNS string
	e := newE2E(t, lab.Standard(), func(n *lab.Net) {
		var err error
		if hostNS, err = n.Lab.AddNetns("-h5"); err != nil {
			t.Fatal(err)
		}
		if err := n.Veth(n.Router, "eth5", nil, hostNS, "eth0", nil); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"addr", "add", "10.5.0.2/24", "dev", "eth0"}, {"route", "add", "default", "via", "10.5.0.1"}} {
			if err := n.IP(hostNS, args...); err != nil {
				t.Fatal(err)
			}
		}
	})
	e.ctl("address add 10.5.0.1/24 dev eth5")
	if out := e.ctl("link show eth5"); !strings.Contains(out, "eth5") {
		t.Fatalf("eth5 is not a port: %s", out)
	}
	if !strings.Contains(e.stderr.String(), "dev=eth5") {
		t.Errorf("the log does not say eth5 was opened:\n%s", lastBytes(e.stderr.String(), 2000))
	}
	for _, dst := range []netip.Addr{netip.MustParseAddr("10.5.0.1"), h1IP} {
		ok, why := eventually(5*time.Second, func() (bool, string) {
			r, err := lab.Ping(hostNS, dst, lab.PingOptions{Count: 1, Wait: time.Second})
			if err != nil {
				return false, err.Error()
			}
			return r.Received == 1, r.Output
		})
		if !ok {
			t.Errorf("ping 10.5.0.2 -> %s through the new port: %s", dst, why)
		}
	}
}

// TestE2EConfigMissingDevice: a config file naming eth9 is refused at
// start with FILE:LINE: Cannot find device "eth9" (exit 1, nothing left
// behind), and at reload (the running configuration kept).
func TestE2EConfigMissingDevice(t *testing.T) {
	testenv.RequireRoot(t, "ping")
	spec := lab.Standard()
	n, err := lab.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	dir := t.TempDir()
	conf := filepath.Join(dir, "router.conf")
	base := spec.Config()
	line := strings.Count(base, "\n") + 2
	if err := os.WriteFile(conf, []byte(base+"route add 10.9.0.0/16 via 203.0.113.1\nroute add 10.8.0.0/16 dev eth9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	cmd := exec.Command("ip", "netns", "exec", n.Router, exe, "run", "--config", conf,
		"--ctl", filepath.Join(dir, "ctl.sock"), "--metrics", "127.0.0.1:0", "--io", testIO())
	cmd.Env = append(os.Environ(), "NETFWD_TEST_MAIN=1")
	out, err := runBounded(cmd, 20*time.Second)
	want := fmt.Sprintf("%s:%d: %s", conf, line, noEth9)
	if err == nil || !strings.Contains(out, want) {
		t.Fatalf("netfwd run with eth9 in the config: %v, want exit 1 and %q:\n%s", err, want, out)
	}
	if strings.Contains(out, "port opened") {
		t.Errorf("ports were opened before the refusal:\n%s", out)
	}

	// At reload.
	e := newE2E(t, spec, nil)
	links, routes := e.ctl("link show"), e.ctl("route show table all")
	e.writeConfig(base + "route add 10.9.0.0/16 via 203.0.113.1\naddress add 10.7.0.1/24 dev eth9\n")
	want = fmt.Sprintf("router.conf:%d: %s", line, noEth9)
	if _, err := e.ctlErr("reload"); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("netfwd ctl reload: %v, want %s", err, want)
	}
	if l, r := e.ctl("link show"), e.ctl("route show table all"); l != links || r != routes {
		t.Errorf("a refused reload changed the configuration:\n%s\n%s", l, r)
	}
	e.pingOK("h1", lab.InternetIP, 63)
}
