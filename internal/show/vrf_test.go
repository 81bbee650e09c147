package show_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/show"
	"github.com/netfwd/netfwd/l2"
)

// `vrf show` byte for byte as iproute2 prints it, `route show vrf` (the
// VRF's table without local and broadcast routes), `route get ... vrf`
// (the lookup in the VRF even from no port of it) and their errors.
func TestVRFOutput(t *testing.T) {
	c := setup(t, l2.NewManualClock())
	if got, want := answer(t, c, "vrf", false), "Name              Table\n-----------------------\nNo VRF has been configured\n"; got != want {
		t.Errorf("vrf show, none:\n%q\nwant\n%q", got, want)
	}
	if got := answer(t, c, "vrf show", true); got != "[]\n" {
		t.Errorf("vrf -j, none: %q", got)
	}
	c = setup(t, l2.NewManualClock(),
		"link add red type vrf table 10",
		"link add blue type vrf table 4000000000",
		"link set eth1 master red",
		"link set eth2 master blue",
		"address add 10.0.0.1/24 dev eth1",
		"address add 10.0.0.1/24 dev eth2",
		"route add default via 10.0.0.7 dev eth1 table 10",
		"route add default via 10.0.0.9 dev eth2 table 4000000000",
	)
	want := "Name              Table\n-----------------------\nblue             4000000000\nred                 10\n"
	if got := answer(t, c, "vrf show", false); got != want {
		t.Errorf("vrf show:\n%q\nwant\n%q", got, want)
	}
	if got, want := answer(t, c, "-j vrf list", false), `[{"name":"blue","table":4000000000},{"name":"red","table":10}]`+"\n"; got != want {
		t.Errorf("vrf -j: %q, want %q", got, want)
	}
	links := answer(t, c, "-s link", false)
	for _, want := range []string{"red: <NOARP,MASTER,UP,LOWER_UP> mtu 65575 state UP kind vrf\n", "eth1: <", "master red\n", "master blue\n"} {
		if !strings.Contains(links, want) {
			t.Errorf("link show lacks %q:\n%s", want, links)
		}
	}
	if got := answer(t, c, "link show dev blue", true); !strings.Contains(got, `"ifname":"blue"`) || !strings.Contains(got, `"kind":"vrf"`) {
		t.Errorf("link show dev blue: %s", got)
	}
	// link show / address show master|vrf: only the devices enslaved to it.
	for line, want := range map[string][]string{
		"link show vrf red":        {"eth1"},
		"link show master blue":    {"eth2"},
		"-br address show vrf red": {"eth1"},
	} {
		got := answer(t, c, line, false)
		for _, dev := range []string{"eth1", "eth2"} {
			if strings.Contains(got, dev) != slices.Contains(want, dev) {
				t.Errorf("%s: %q, want only %v", line, got, want)
			}
		}
	}
	for line, want := range map[string]string{
		"link show vrf eth1":      "Not a valid VRF name: eth1",
		"link show master nosuch": `Device "nosuch" does not exist.`,
		"address show vrf nosuch": "Not a valid VRF name: nosuch",
	} {
		cmd, _, err := config.ParseLine(config.Pos{File: "q", Line: 1}, line)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if err := show.Answer(&strings.Builder{}, c, cmd.Query, false); err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %q", line, err, want)
		}
	}
	if got := answer(t, c, "vrf show red", false); got != "red 10\n" {
		t.Errorf("vrf show red: %q", got)
	}
	if got, want := answer(t, c, "route show vrf red", false), "default via 10.0.0.7 dev eth1\n10.0.0.0/24 dev eth1 proto kernel scope link src 10.0.0.1\n"; got != want {
		t.Errorf("route show vrf red:\n%q\nwant\n%q", got, want)
	}
	if got := answer(t, c, "route show table 10", false); !strings.Contains(got, "local 10.0.0.1 dev eth1") {
		t.Errorf("route show table 10 lacks the local route:\n%s", got)
	}
	for vrf, want := range map[string]string{"red": "10.0.0.7 dev eth1 table 10", "blue": "10.0.0.9 dev eth2 table 4000000000"} {
		if got := answer(t, c, "route get 198.51.100.1 vrf "+vrf, false); !strings.Contains(got, "via "+want) {
			t.Errorf("route get vrf %s: %q, want via %s", vrf, got, want)
		}
	}
	for line, want := range map[string]string{
		"route get 198.51.100.1":           "route get failed", // main has no route
		"vrf show green":                   "Invalid VRF",
		"route show vrf green":             `argument "green" is wrong: Invalid VRF`,
		"route get 198.51.100.1 vrf green": `argument "green" is wrong: Invalid VRF`,
	} {
		cmd, _, err := config.ParseLine(config.Pos{File: "q", Line: 1}, line)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if err := show.Answer(&strings.Builder{}, c, cmd.Query, false); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", line, err, want)
		}
	}
}

// `link show master BRIDGE` lists the bridge's ports, not the VRF's devices.
func TestLinkShowMasterBridge(t *testing.T) {
	c := setup(t, l2.NewManualClock(),
		"link add br0 type bridge",
		"link set eth1 master br0",
		"link set eth2 master br0",
		"link add red type vrf table 10",
		"link set eth3 master red",
		"address add 10.0.0.1/24 dev eth3",
	)
	got := answer(t, c, "-j link show master br0", false)
	for dev, want := range map[string]bool{"eth1": true, "eth2": true, "eth3": false, "red": false} {
		if strings.Contains(got, `"ifname":"`+dev+`"`) != want {
			t.Errorf("link show master br0 lists %s: %v; want %v\n%s", dev, !want, want, got)
		}
	}
}
