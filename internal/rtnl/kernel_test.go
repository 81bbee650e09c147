package rtnl

import (
	"errors"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/testenv"
)

// The kernel's own messages: dumps and notifications of routes, nexthop
// objects and links in a fresh namespace decode to what `ip` configured.
func TestKernelMessages(t *testing.T) {
	testenv.RequireRoot(t)
	ns := testenv.Netns(t, "rtnl")
	run := func(args ...string) { testenv.Run(t, "ip", append([]string{"-n", ns}, args...)...) }
	run("link", "add", "e0", "type", "veth", "peer", "name", "p0")
	run("link", "set", "e0", "up")
	run("link", "set", "p0", "up")
	run("address", "add", "192.0.2.1/24", "dev", "e0")
	run("nexthop", "add", "id", "7", "via", "192.0.2.2", "dev", "e0")
	run("nexthop", "add", "id", "8", "group", "7,3")
	run("route", "add", "198.51.100.0/24", "nhid", "8", "proto", "bgp", "metric", "20")
	run("route", "add", "203.0.113.0/24", "via", "192.0.2.3", "dev", "e0", "proto", "12")
	run("route", "add", "10.0.0.0/8", "nexthop", "via", "192.0.2.4", "dev", "e0", "weight", "2", "nexthop", "via", "192.0.2.5", "dev", "e0")
	run("route", "add", "blackhole", "10.9.0.0/16")

	var c *Conn
	if err := pktio.InNetns(ns, func() (err error) { c, err = Open(RTNLGRP_IPV4_ROUTE, RTNLGRP_LINK); return }); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadTimeout(2 * time.Second)
	links := NewLinkTable()
	if err := c.Dump(RTM_GETLINK, AF_UNSPEC, func(h Header, b []byte) error { return links.Apply(h.Type, b) }, nil); err != nil {
		t.Fatal(err)
	}
	e0, ok := links.Index("e0")
	if !ok {
		t.Fatal("e0 not in the link dump")
	}
	routes := map[string]Route{}
	err := c.Dump(RTM_GETROUTE, AF_INET, func(h Header, b []byte) error {
		var r Route
		if err := r.Decode(b); err != nil {
			return err
		}
		p, _ := r.Prefix()
		routes[p.String()] = r
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := routes["198.51.100.0/24"]; r.NHID != 8 || r.Protocol != 186 || r.Priority != 20 || r.Table != 254 {
		t.Errorf("nhid route: %+v", r)
	}
	if r := routes["203.0.113.0/24"]; r.Gateway != ip("192.0.2.3") || r.OIF != e0 || r.Protocol != 12 {
		t.Errorf("gateway route: %+v", r)
	}
	if r := routes["10.0.0.0/8"]; len(r.Multipath) != 2 || r.Multipath[0].Weight != 2 || r.Multipath[1].Gateway != ip("192.0.2.5") || r.Multipath[1].OIF != e0 {
		t.Errorf("multipath route: %+v", r)
	}
	if r := routes["10.9.0.0/16"]; r.Type != RTN_BLACKHOLE {
		t.Errorf("blackhole route: %+v", r)
	}
	if r := routes["192.0.2.1/32"]; r.Type != RTN_LOCAL || r.Table != 255 || r.Prefsrc != ip("192.0.2.1") {
		t.Errorf("local route: %+v", r)
	}
	nhs := map[uint32]Nexthop{}
	err = c.Dump(RTM_GETNEXTHOP, AF_UNSPEC, func(h Header, b []byte) error {
		var n Nexthop
		if err := n.Decode(b); err != nil {
			return err
		}
		nhs[n.ID] = n
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := nhs[7]; n.Gateway != ip("192.0.2.2") || n.OIF != e0 {
		t.Errorf("nexthop 7: %+v", n)
	}
	if n := nhs[8]; len(n.Group) != 1 || n.Group[0] != (GroupMember{ID: 7, Weight: 3}) {
		t.Errorf("nexthop 8: %+v", n)
	}

	// Notifications.
	run("route", "add", "198.18.0.0/15", "via", "192.0.2.9", "metric", "7")
	run("route", "del", "198.18.0.0/15", "via", "192.0.2.9", "metric", "7")
	var seen []uint16
	deadline := time.Now().Add(5 * time.Second)
	for len(seen) < 2 && time.Now().Before(deadline) {
		b, err := c.Receive()
		if errors.Is(err, ErrTimeout) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for len(b) > 0 {
			h, body, rest, err := NextMessage(b)
			if err != nil {
				t.Fatal(err)
			}
			b = rest
			var r Route
			if h.Type != RTM_NEWROUTE && h.Type != RTM_DELROUTE || r.Decode(body) != nil {
				continue
			}
			if p, _ := r.Prefix(); p == pfx("198.18.0.0/15") && r.Priority == 7 && r.Gateway == ip("192.0.2.9") {
				seen = append(seen, h.Type)
			}
		}
	}
	if len(seen) != 2 || seen[0] != RTM_NEWROUTE || seen[1] != RTM_DELROUTE {
		t.Fatalf("notifications: %v", seen)
	}
}
