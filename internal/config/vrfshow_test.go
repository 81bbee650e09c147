package config

import (
	"strings"
	"testing"
)

func TestVRFQueries(t *testing.T) {
	for line, want := range map[string]VRFShow{
		"vrf": {}, "ip vrf show": {}, "vrf l": {}, "vrf list red": {VRF: "red"}, "vrf s blue": {VRF: "blue"},
	} {
		c, _, err := ParseLine(Pos{"t", 1}, line)
		if q, ok := c.Query.(VRFShow); err != nil || !ok || q != want {
			t.Errorf("%q: %v %#v, want %#v", line, err, c.Query, want)
		}
	}
	c, _, err := ParseLine(Pos{"t", 1}, "route get 10.0.0.1 vrf red from 10.0.0.2")
	if q, ok := c.Query.(RouteGet); err != nil || !ok || q.VRF != "red" || q.Dst != "10.0.0.1" {
		t.Errorf("route get vrf: %v %#v", err, c.Query)
	}
	c, _, err = ParseLine(Pos{"t", 1}, "route show vrf red proto static")
	if q, ok := c.Query.(RouteShow); err != nil || !ok || q.VRF != "red" || q.NoLocal {
		t.Errorf("route show vrf: %v %#v", err, c.Query)
	}
	c, _, err = ParseLine(Pos{"t", 1}, "route flush vrf red")
	if q, ok := c.Query.(RouteFlush); err != nil || !ok || q.VRF != "red" {
		t.Errorf("route flush vrf: %v %#v", err, c.Query)
	}
	for line, want := range map[string]string{
		"vrf exec red ping":     `vrf command "exec" is not supported`,
		"vrf identify":          `vrf command "identify" is not supported`,
		"vrf show red blue":     `unexpected "blue"`,
		"vrf show a/b":          "invalid device name",
		"route get 1.2.3.4 vrf": `"vrf" needs a value`,
	} {
		if _, _, err := ParseLine(Pos{"t", 1}, line); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", line, err, want)
		}
	}
	c, _, err = ParseLine(Pos{"t", 1}, "vrf help")
	if h, ok := c.Query.(Help); err != nil || !ok || !strings.Contains(h.Text, "show") {
		t.Errorf("vrf help: %v %#v", err, c.Query)
	}
}
