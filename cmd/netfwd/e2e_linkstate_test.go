package main

// End-to-end: the daemon owns its ports' admin state in the kernel. It
// brings them up at start (and says so per port), `netfwd ctl link set DEV
// down|up` sets the kernel interface down and up as `ip link set` does
// (traffic stops and resumes), and a metrics listener on 127.0.0.1 is
// reachable even when the namespace's lo started down.

import (
	"strings"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/lab"
)

// kernelUp reports whether an interface of the router's namespace is
// administratively up (IFF_UP in `ip link show`).
func (e *e2e) kernelUp(dev string) bool {
	e.t.Helper()
	out, err := e.net.Exec(e.net.Router, "ip", "-o", "link", "show", dev)
	if err != nil {
		e.t.Fatalf("ip link show %s: %v %s", dev, err, out)
	}
	flags := out[strings.Index(out, "<")+1 : strings.Index(out, ">")]
	return strings.Contains(","+flags+",", ",UP,")
}

// TestE2EPortsBroughtUp: the router's ends of every veth are admin down
// when the daemon starts: it brings each up, logs it, and forwards.
func TestE2EPortsBroughtUp(t *testing.T) {
	spec := lab.Standard()
	e := newE2E(t, spec, func(n *lab.Net) {
		for _, p := range spec.RouterPorts() {
			if err := n.IP(n.Router, "link", "set", p, "down"); err != nil {
				t.Fatal(err)
			}
		}
	})
	for _, p := range spec.RouterPorts() {
		if !e.kernelUp(p) {
			t.Errorf("%s is still down in the kernel", p)
		}
		if !strings.Contains(e.stderr.String(), `msg="port interface brought up" dev=`+p) {
			t.Errorf("the log does not say %s was brought up", p)
		}
	}
	e.pingOK("h1", lab.InternetIP, 63)
	e.pingOK("h1", h3IP, 63)
}

// TestE2ECtlLinkSetDownUp: `link set eth0 down` sets the uplink's kernel
// interface down and traffic through it stops; `up` brings both back.
func TestE2ECtlLinkSetDownUp(t *testing.T) {
	e := newE2E(t, lab.Standard(), nil)
	e.pingOK("h1", lab.InternetIP, 63)
	e.ctl("link set eth0 down")
	if e.kernelUp("eth0") {
		t.Fatal("eth0 is still up in the kernel after ctl link set eth0 down")
	}
	ok, why := eventually(5*time.Second, func() (bool, string) {
		out := e.ctl("link show eth0")
		return strings.Contains(out, "state DOWN") && !strings.Contains(out, ",UP"), out
	})
	if !ok {
		t.Errorf("ctl link show after down: %s", why)
	}
	if r := e.ping("h1", lab.InternetIP, lab.PingOptions{Count: 2, Wait: time.Second}); r.Received != 0 {
		t.Fatalf("replies through a port set down: %+v", r)
	}
	e.ctl("link set eth0 up")
	if !e.kernelUp("eth0") {
		t.Fatal("eth0 is still down in the kernel after ctl link set eth0 up")
	}
	ok, why = eventually(10*time.Second, func() (bool, string) {
		r := e.ping("h1", lab.InternetIP, lab.PingOptions{Count: 1, Wait: time.Second})
		return r.Received == 1, r.Output
	})
	if !ok {
		t.Fatalf("no forwarding after link set eth0 up: %s", why)
	}
	e.pingOK("h1", lab.InternetIP, 63)
}

// TestE2EMetricsLoopbackDown: the router's namespace starts with lo down;
// the daemon brings it up (and says so), and the metrics listener on
// 127.0.0.1 answers.
func TestE2EMetricsLoopbackDown(t *testing.T) {
	e := newE2E(t, lab.Standard(), func(n *lab.Net) {
		if err := n.IP(n.Router, "link", "set", "lo", "down"); err != nil {
			t.Fatal(err)
		}
	})
	m := e.scrape()
	if m.Sum(metricPortRxPackets, "port", "eth1") < 0 {
		t.Fatal("no port metrics")
	}
	if !strings.Contains(e.stderr.String(), "brought lo up") {
		t.Errorf("the log does not say lo was brought up")
	}
}

// TestE2EConfigLinkSetDown: a config line `link set eth3 down` (here by a
// reload) sets the kernel interface down and h3 is cut off; the file
// without it brings both back.
func TestE2EConfigLinkSetDown(t *testing.T) {
	spec := lab.Standard()
	e := newE2E(t, spec, nil)
	base := spec.Config()
	e.pingOK("h1", h3IP, 63)
	e.writeConfig(base + "link set eth3 down\n")
	e.ctl("reload")
	if e.kernelUp("eth3") {
		t.Fatal("eth3 is still up in the kernel after a reload with link set eth3 down")
	}
	if r := e.ping("h1", h3IP, lab.PingOptions{Count: 2, Wait: time.Second}); r.Received != 0 {
		t.Fatalf("replies through a port the config sets down: %+v", r)
	}
	e.writeConfig(base)
	e.ctl("reload")
	if !e.kernelUp("eth3") {
		t.Fatal("eth3 is still down in the kernel after the line went")
	}
	ok, why := eventually(10*time.Second, func() (bool, string) {
		r := e.ping("h1", h3IP, lab.PingOptions{Count: 1, Wait: time.Second})
		return r.Received == 1, r.Output
	})
	if !ok {
		t.Fatalf("no forwarding after the reload without link set eth3 down: %s", why)
	}
}
