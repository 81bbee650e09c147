package show_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/apply"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/show"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
)

func setup(t *testing.T, clock l2.Clock, lines ...string) *apply.Controller {
	t.Helper()
	c := apply.New(l3.NewEngine(l3.EngineOptions{Clock: clock}))
	cmds, errs := config.Parse("t.conf", strings.NewReader(strings.Join(lines, "\n")))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := c.Apply(cmds); err != nil {
		t.Fatal(err)
	}
	return c
}

func answer(t *testing.T, c *apply.Controller, line string, asJSON bool) string {
	t.Helper()
	cmd, _, err := config.ParseLine(config.Pos{File: "q", Line: 1}, line)
	if err != nil || cmd.Query == nil {
		t.Fatalf("%q: %v", line, err)
	}
	var b strings.Builder
	if err := show.Answer(&b, c, cmd.Query, asJSON || cmd.JSON); err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	if asJSON || cmd.JSON {
		var v any
		if err := json.Unmarshal([]byte(b.String()), &v); err != nil {
			t.Fatalf("%q: invalid JSON %q", line, b.String())
		}
	}
	return b.String()
}

// `bridge vlan show` and `bridge fdb show` byte for byte as iproute2 prints
// them (trailing spaces included), and their JSON from the same values.
func TestBridgeOutput(t *testing.T) {
	clock := l2.NewManualClock()
	c := setup(t, clock,
		"link add br0 address 02:bb:00:00:00:01 type bridge vlan_filtering 1",
		"link set eth1 master br0",
		"link set eth2 master br0",
		"bridge vlan add dev eth1 vid 10 pvid untagged",
		"bridge vlan add dev eth2 vid 10-12",
		"bridge fdb add 02:00:00:00:00:05 dev eth2 vlan 11 static sticky",
		"bridge fdb add 02:00:00:00:00:01 dev eth1 vlan 10 dynamic",
	)
	want := "port              vlan-id  \n" +
		"eth1              1 Egress Untagged\n" +
		"                  10 PVID Egress Untagged\n\n" +
		"eth2              1 PVID Egress Untagged\n" +
		"                  10\n                  11\n                  12\n\n" +
		"br0               1 PVID Egress Untagged\n\n"
	if got := answer(t, c, "bridge vlan show", false); got != want {
		t.Fatalf("vlan show:\n%q\nwant\n%q", got, want)
	}
	if got := answer(t, c, "bridge -compressvlans vlan show", false); !strings.Contains(got, "                  10-12\n") {
		t.Fatalf("compressed:\n%s", got)
	}
	if got := answer(t, c, "bridge -j -compressvlans vlan show dev eth2", false); got !=
		`[{"ifname":"eth2","vlans":[{"vlan":1,"flags":["PVID","Egress Untagged"]},{"vlan":10,"vlanEnd":12,"flags":[]}]}]`+"\n" {
		t.Fatalf("compressed JSON: %s", got)
	}
	want = "02:00:00:00:00:01 dev eth1 vlan 10 master br0 \n" +
		"02:00:00:00:00:05 dev eth2 vlan 11 sticky master br0 static\n" +
		"02:bb:00:00:00:01 dev br0 master br0 permanent\n" +
		"02:bb:00:00:00:01 dev br0 vlan 1 master br0 permanent\n"
	if got := answer(t, c, "bridge fdb show", false); got != want {
		t.Fatalf("fdb show:\n%q\nwant\n%q", got, want)
	}
	if got := answer(t, c, "fdb show dev eth2", false); got != "02:00:00:00:00:05 dev eth2 vlan 11 sticky master br0 static\n" {
		t.Fatalf("fdb show dev eth2: %q", got)
	}
	if got := answer(t, c, "fdb show br br1", false); got != "" {
		t.Fatalf("fdb show br br1: %q", got)
	}
	js := answer(t, c, "bridge fdb show", true)
	for _, w := range []string{`{"mac":"02:00:00:00:00:05","vlan":11,"dev":"eth2","master":"br0","flags":["sticky"],"state":"static"}`,
		`{"mac":"02:bb:00:00:00:01","dev":"br0","flags":["self"],"state":"permanent"}`} {
		if !strings.Contains(js, w) {
			t.Errorf("fdb JSON lacks %s:\n%s", w, js)
		}
	}
	clock.Advance(301 * time.Second)
	if got := answer(t, c, "bridge fdb show", false); !strings.HasPrefix(got, "02:00:00:00:00:01 dev eth1 vlan 10 master br0 stale\n") {
		t.Fatalf("stale:\n%s", got)
	}
}

// Routes: `ip route show` text and `ip -j route show` JSON of one value.
func TestRouteOutput(t *testing.T) {
	c := setup(t, nil,
		"address add 192.0.2.1/24 dev eth0",
		"nexthop add id 1 via 192.0.2.9 dev eth0",
		"route add 10.0.0.0/8 nhid 1",
		"route add 10.1.0.0/16 via 192.0.2.7 dev eth0 metric 20 proto bgp onlink",
		"route add 10.2.0.0/16 nexthop via 192.0.2.7 weight 2 nexthop via 192.0.2.8",
		"route add blackhole 10.66.0.0/16",
		"route add default via 192.0.2.254",
	)
	want := "default via 192.0.2.254 dev eth0\n" +
		"10.0.0.0/8 nhid 1 via 192.0.2.9 dev eth0\n" +
		"10.1.0.0/16 via 192.0.2.7 dev eth0 proto bgp metric 20 onlink\n" +
		"10.2.0.0/16\n\tnexthop via 192.0.2.7 dev eth0 weight 2\n\tnexthop via 192.0.2.8 dev eth0 weight 1\n" +
		"blackhole 10.66.0.0/16\n" +
		"192.0.2.0/24 dev eth0 proto kernel scope link src 192.0.2.1\n"
	if got := answer(t, c, "route show", false); got != want {
		t.Fatalf("route show:\n%s\nwant\n%s", got, want)
	}
	js := answer(t, c, "ip -j route show", false)
	for _, w := range []string{
		`{"dst":"10.1.0.0/16","gateway":"192.0.2.7","dev":"eth0","protocol":"bgp","metric":20,"flags":["onlink"]}`,
		`{"dst":"10.2.0.0/16","flags":[],"nexthops":[{"gateway":"192.0.2.7","dev":"eth0","weight":2,"flags":[]},{"gateway":"192.0.2.8","dev":"eth0","weight":1,"flags":[]}]}`,
		`{"type":"blackhole","dst":"10.66.0.0/16","flags":[]}`,
	} {
		if !strings.Contains(js, w) {
			t.Errorf("route JSON lacks %s:\n%s", w, js)
		}
	}
	all := answer(t, c, "route show table all", false)
	if !strings.Contains(all, "local 192.0.2.1 dev eth0 table local proto kernel scope host src 192.0.2.1\n") {
		t.Fatalf("table all:\n%s", all)
	}
	// A link going down marks its routes and nexthops.
	c2 := setup(t, nil, "address add 192.0.2.1/24 dev eth0", "nexthop add id 1 via 192.0.2.9 dev eth0",
		"route add 10.0.0.0/8 nhid 1", "link set eth0 down")
	if got := answer(t, c2, "nexthop show", false); got != "id 1 via 192.0.2.9 dev eth0 dead linkdown\n" {
		t.Fatalf("nexthop show: %q", got)
	}
	if got := answer(t, c2, "nexthop show", true); got != `[{"id":1,"gateway":"192.0.2.9","dev":"eth0","flags":["dead","linkdown"]}]`+"\n" {
		t.Fatalf("nexthop show -j: %q", got)
	}
}

// links and addresses, with `up` filtering on the admin state.
func TestLinkAndAddressOutput(t *testing.T) {
	c := setup(t, nil,
		"address add 192.0.2.1/24 dev eth0",
		"address add 198.51.100.1/24 dev eth1",
		"address add 192.0.2.2/24 dev eth0",
		"link set eth1 down address 02:00:00:00:00:11",
	)
	if got := answer(t, c, "address show", false); got != "2: eth0\n"+
		"    inet 192.0.2.1/24 brd 192.0.2.255 scope global eth0\n"+
		"    inet 192.0.2.2/24 brd 192.0.2.255 scope global secondary eth0\n"+
		"3: eth1\n    inet 198.51.100.1/24 brd 198.51.100.255 scope global eth1\n" {
		t.Fatalf("address show:\n%s", got)
	}
	if got := answer(t, c, "address show up", false); strings.Contains(got, "eth1") || !strings.Contains(got, "eth0") {
		t.Fatalf("address show up:\n%s", got)
	}
	if got := answer(t, c, "link show eth1", false); got != "3: eth1: <BROADCAST,MULTICAST,LOWER_UP> mtu 1500 state DOWN kind port\n"+
		"    link/ether 02:00:00:00:00:11\n" {
		t.Fatalf("link show eth1:\n%q", got)
	}
	if got := answer(t, c, "ip -j link show up", false); strings.Contains(got, "eth1") || !strings.Contains(got, `"ifname":"eth0"`) {
		t.Fatalf("link show up: %s", got)
	}
	var b strings.Builder
	if err := show.Answer(&b, c, config.LinkShow{ListFilter: config.ListFilter{Dev: "nosuch"}}, false); err == nil || err.Error() != `Device "nosuch" does not exist.` {
		t.Fatalf("unknown device: %v", err)
	}
}

// Route selectors, brief forms and route get's from/iif/oif on a small
// configuration (the namespace tests check the same against a daemon).
func TestSelectorsAndBrief(t *testing.T) {
	c := setup(t, nil,
		"address add 10.0.0.1/24 dev eth0",
		"address add 10.1.0.1/24 dev eth1",
		"route add default via 10.0.0.2 dev eth0",
		"route add 10.2.0.0/24 via 10.1.0.2 proto static",
		"route add 10.2.1.0/24 via 10.1.0.2 metric 5",
		"route add blackhole 10.66.0.0/16")
	for line, want := range map[string]string{
		"route show dev eth1":          "10.1.0.0/24 proto kernel scope link src 10.1.0.1\n10.2.0.0/24 via 10.1.0.2 proto static\n10.2.1.0/24 via 10.1.0.2 metric 5\n",
		"route show proto static":      "10.2.0.0/24 via 10.1.0.2 dev eth1\n",
		"route show 10.2.0.0/24":       "10.2.0.0/24 via 10.1.0.2 dev eth1 proto static\n",
		"route show exact 10.2.0.0/23": "",
		"route show root 10.2.0.0/23":  "10.2.0.0/24 via 10.1.0.2 dev eth1 proto static\n10.2.1.0/24 via 10.1.0.2 dev eth1 metric 5\n",
		"route show match 10.2.1.7":    "default via 10.0.0.2 dev eth0\n10.2.1.0/24 via 10.1.0.2 dev eth1 metric 5\n",
		"route show type blackhole":    "blackhole 10.66.0.0/16\n",
		"route show table local scope host": "local 10.0.0.1 dev eth0 proto kernel src 10.0.0.1\n" +
			"local 10.1.0.1 dev eth1 proto kernel src 10.1.0.1\n",
		"route get 10.2.1.9 oif eth0":               "10.2.1.9 via 10.0.0.2 dev eth0 src 10.0.0.1\n",
		"route get 10.2.1.9 from 10.0.0.7 iif eth0": "10.2.1.9 from 10.0.0.7 via 10.1.0.2 dev eth1 metric 5 iif eth0\n",
		"-br addr": "eth0             UP             10.0.0.1/24 \neth1             UP             10.1.0.1/24 \n",
	} {
		if got := answer(t, c, line, false); got != want {
			t.Errorf("%s:\n got %q\nwant %q", line, got, want)
		}
	}
	if got := answer(t, c, "-br link show eth0", false); !strings.HasPrefix(got, "eth0             UP             ") ||
		!strings.HasSuffix(got, " <BROADCAST,MULTICAST,UP,LOWER_UP> \n") {
		t.Errorf("-br link: %q", got)
	}
	if got := answer(t, c, "-j -br link show eth0", false); !strings.Contains(got, `[{"ifname":"eth0","operstate":"UP","address":`) {
		t.Errorf("-j -br link: %q", got)
	}
	if got := answer(t, c, "-j -s link show eth0", false); !strings.Contains(got, `"stats64":{"rx":{"bytes":0,"packets":0,"errors":0,"dropped":0,"over_errors":0,"multicast":0,"missed_errors":0},"tx":{"bytes":0,"packets":0,"errors":0,"dropped":0,"carrier_errors":0,"collisions":0}}`) {
		t.Errorf("-j -s link: %q", got)
	}
}

// ringState is a controller whose ports have receive rings that lost
// frames (the daemon's State: show.RingDropper).
type ringState struct {
	*apply.Controller
	drops map[string]uint64
}

func (s ringState) RingDrops(dev string) uint64 { return s.drops[dev] }

// A port's ring drops are `-s link`'s RX missed, where `ip -s link` puts a
// NIC's ring overflows: the text's missed column and stats64.rx's
// missed_errors (ip -j -s -s link's name). Interfaces without rings (the
// State has none, or not a port) show 0.
func TestLinkStatsMissedIsRingDrops(t *testing.T) {
	c := setup(t, nil, "address add 192.0.2.1/24 dev eth0", "address add 198.51.100.1/24 dev eth1")
	st := ringState{c, map[string]uint64{"eth0": 12181}}
	text := func(s show.State, dev string) string {
		t.Helper()
		var b strings.Builder
		if err := show.Answer(&b, s, config.LinkShow{ListFilter: config.ListFilter{Dev: dev}, Stats: true}, false); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	const header = "    RX:  bytes packets errors dropped  missed   mcast           \n"
	if got, want := text(st, "eth0"), header+"             0       0      0       0   12181       0 \n"; !strings.Contains(got, want) {
		t.Errorf("-s link show eth0:\n%s\nwant the RX block\n%s", got, want)
	}
	for _, s := range []show.State{st, c} {
		if got, want := text(s, "eth1"), header+"             0       0      0       0       0       0 \n"; !strings.Contains(got, want) {
			t.Errorf("-s link show eth1 (%T):\n%s\nwant\n%s", s, got, want)
		}
	}
	var b strings.Builder
	if err := show.Answer(&b, st, config.LinkShow{Stats: true}, true); err != nil {
		t.Fatal(err)
	}
	var links []struct {
		Ifname  string
		Stats64 struct {
			RX map[string]uint64 `json:"rx"`
		}
	}
	if err := json.Unmarshal([]byte(b.String()), &links); err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if v, ok := l.Stats64.RX["missed_errors"]; !ok || v != st.drops[l.Ifname] {
			t.Errorf("-j -s link: %s rx %v, want missed_errors %d", l.Ifname, l.Stats64.RX, st.drops[l.Ifname])
		}
	}
	if len(links) != 2 {
		t.Errorf("-j -s link: %s", b.String())
	}
}
