package config

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/neigh"
	"github.com/netfwd/netfwd/wire"
)

func parse(t *testing.T, line string) Command {
	t.Helper()
	cmd, ok, err := ParseLine(Pos{"t", 1}, line)
	if err != nil || !ok {
		t.Fatalf("ParseLine(%q) = %v, ok %v", line, err, ok)
	}
	return cmd
}

func TestParseForms(t *testing.T) {
	cases := []struct {
		line string
		ok   bool
	}{
		{"ip route add 10.0.0.0/8 dev eth0", true},
		{"r a 10.0.0.0/8 dev eth0", true},
		{"route add default via 1.2.3.4 dev eth0 metric 5 proto static scope global src 1.1.1.1", true},
		{"route add 10.0.0.0/8 via 1.2.3.4 priority 7", true},
		{"route add 10.0.0.0/8 via 1.2.3.4 preference 7", true},
		{"route del 10.0.0.0/8", true},
		{"route add throw 10.0.0.0/8 table local", true},
		{"route add unreachable 10.0.0.0/8", true},
		{"route add prohibit 10.0.0.0/8", true},
		{"route add 10.0.0.0/8 dev eth0 vrf red", true},
		{"route del 10.0.0.0/8 vrf red", true},
		{"route add 10.0.0.0/8 dev eth0 vrf", false},
		{"route add 10.0.0.0/33 dev eth0", false},
		{"route add 2001:db8::/32 dev eth0", false},
		{"route add 10.0.0.0/8 via", false},
		{"route add 10.0.0.0/8 table nosuch", false},
		{"route add 10.0.0.0/8 dev eth0 bogus", false},
		{"route add dev eth0", false},
		{"route add 10.0.0.0/8 nexthop weight 2", false},
		{"route add 10.0.0.0/8 dev averyveryverylongname", false},
		{"address add 10.0.0.1/24 dev eth0 brd +", true},
		{"address add 10.0.0.1/24", false},
		{"nexthop add id 1 via 10.0.0.2 dev eth0", true},
		{"nexthop add id 1 blackhole", true},
		{"nexthop add id 3 group 1,10/2,20", true},
		{"nexthop add id 3 group 1,300", false},
		{"nexthop add via 10.0.0.2 dev eth0", false},
		{"nexthop del id 3", true},
		{"link set eth0 up", true},
		{"link set dev eth0 down", true},
		{"link add br0 type bridge vlan_filtering 1 ageing_time 30000", true},
		{"link add br0 type bridge flood_defer -1 mcast_prefilter 0", true},
		{"link add link br0 name vlan10 type vlan id 10", true},
		{"link add link br0 name vlan10 type vlan id 5000", false},
		{"link add x type vxlan", false},
		{"link add red type vrf table 10", true},
		{"link add red type vrf table red", false},
		{"link add red type vrf table 0", false},
		{"link add red type vrf", false},
		{"link add red type vrf id 10", false},
		{"link set red type vrf table 11", false},
		{"link set eth0 vrf red", true},
		{"link add eth0 vrf red type bridge", false},
		{"link set dev br0 type bridge ageing_time 100 vlan_filtering 1", true},
		{"link set dev br0 type bridge", false},
		{"link set dev br0 up type bridge ageing_time 100", false},
		{"bridge vlan add dev eth1 vid 10-20", true},
		{"bridge nonsense", false},
		{"bridge fdb add 02:00:00:00:00:01 dev eth1 vlan 10 static", true},
		{"bridge fdb add dev eth1 02:00:00:00:00:01", true},
		{"bridge link set dev eth1 learning off state forwarding", true},
		{"bridge mdb add dev br0 port eth1 grp 01:00:5e:00:00:01", true},
		{"neigh add 10.0.0.2 lladdr 02:00:00:00:00:02 dev eth0 nud stale", true},
		{"neigh add 10.0.0.2 lladdr 02:00:00:00:00:02 dev eth0 nud delay", false},
		{"-6 route add 10.0.0.0/8 dev eth0", false},
		{"   # only a comment", true},
		{"", true},
	}
	for _, c := range cases {
		_, _, err := ParseLine(Pos{"t", 1}, c.line)
		if (err == nil) != c.ok {
			t.Errorf("ParseLine(%q) error = %v, want ok=%t", c.line, err, c.ok)
		}
	}
}

// A keyword at the end of a line names itself in the error, in every parser
// that reads "keyword value" arguments.
func TestMissingValueNamesKeyword(t *testing.T) {
	for line, key := range map[string]string{
		"nexthop add id":                       "id",
		"nexthop add id 1 via":                 "via",
		"nexthop add id 1 group":               "group",
		"link set eth0 mtu":                    "mtu",
		"link set eth0 master":                 "master",
		"link add br0 type":                    "type",
		"link add br0 type bridge ageing_time": "ageing_time",
		"bridge vlan add dev":                  "dev",
		"bridge fdb add 02:00:00:00:00:01 dev": "dev",
		"route show table":                     "table",
		"neigh show dev":                       "dev",
	} {
		_, _, err := ParseLine(Pos{"t", 1}, line)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q needs a value", key)) {
			t.Errorf("ParseLine(%q) = %v, want %q needs a value", line, err, key)
		}
	}
}

// iproute2's abbreviation rule, with iproute2's own examples: the first
// keyword in iproute2's table order that the word is a prefix of wins, and
// the keywords iproute2 compares exactly are never abbreviated. Every line
// is compared with its unabbreviated form.
func TestAbbreviations(t *testing.T) {
	same := []struct{ short, long string }{
		// objects (ip.c): r is route (before rule), a address, l link, n neigh
		{"r a 10.0.0.0/8 dev eth0", "route add 10.0.0.0/8 dev eth0"},
		{"ro add 10.0.0.0/8 dev eth0", "route add 10.0.0.0/8 dev eth0"},
		{"rou show", "route show"},
		{"a a 10.0.0.1/24 dev eth0", "address add 10.0.0.1/24 dev eth0"},
		{"addr add 10.0.0.1/24 dev eth0", "address add 10.0.0.1/24 dev eth0"},
		{"n show", "neigh show"},
		{"neighbor show", "neigh show"},
		{"l set eth0 up", "link set eth0 up"},
		{"nex show", "nexthop show"},
		{"nh show", "nexthop show"},
		// commands: s is show, g get, d delete, r replace, c change, ls lst
		{"route s", "route show"},
		{"route ls", "route show"},
		{"route", "route show"},
		{"ip r g 10.1.2.3", "route get 10.1.2.3"},
		{"route d 10.0.0.0/8", "route delete 10.0.0.0/8"},
		{"route r 10.0.0.0/8 dev eth0", "route replace 10.0.0.0/8 dev eth0"},
		{"route chg 10.0.0.0/8 dev eth0", "route change 10.0.0.0/8 dev eth0"},
		{"route ap 10.0.0.0/8 dev eth0", "route append 10.0.0.0/8 dev eth0"},
		{"neigh r 10.0.0.2 lladdr 02:00:00:00:00:02 dev eth0", "neigh replace 10.0.0.2 lladdr 02:00:00:00:00:02 dev eth0"},
		{"link c eth0 down", "link set eth0 down"},
		{"link s eth0 up", "link set eth0 up"}, // set comes before show in iplink.c
		// route arguments (iproute_modify): m metric, t table (tos is
		// exact), pro protocol, types abbreviate (b broadcast, u unreachable)
		{"route add 10.0.0.0/8 dev eth0 m 5", "route add 10.0.0.0/8 dev eth0 metric 5"},
		{"route add 10.0.0.0/8 dev eth0 t 100", "route add 10.0.0.0/8 dev eth0 table 100"},
		// `vrf NAME` and `table T`: the last one wins (iproute_modify)
		{"route add 10.0.0.0/8 dev eth0 t 100 vrf red", "route add 10.0.0.0/8 dev eth0 vrf red"},
		{"route add 10.0.0.0/8 dev eth0 vrf red t 100", "route add 10.0.0.0/8 dev eth0 table 100"},
		{"route add 10.0.0.0/8 dev eth0 pro static", "route add 10.0.0.0/8 dev eth0 protocol static"},
		{"route add 10.0.0.0/8 dev eth0 p 7", "route add 10.0.0.0/8 dev eth0 metric 7"},
		{"route add u 10.0.0.0/8", "route add unreachable 10.0.0.0/8"},
		{"route add bl 10.0.0.0/8", "route add blackhole 10.0.0.0/8"},
		{"route add b 10.0.0.255 dev eth0 table local", "route add broadcast 10.0.0.255 dev eth0 table local"},
		{"route add to 10.0.0.0/8 oif eth0", "route add 10.0.0.0/8 dev eth0"},
		// rules (iprule.c): p is pref, ta table (t is tun_id); from, to,
		// lookup are exact; an unknown word is a rule type (b: broadcast, a nop)
		{"ru a p 10 from 10.0.0.0/8 ta 5", "rule add preference 10 from 10.0.0.0/8 table 5"},
		{"rule add b", "rule add nop"},
		{"ru s", "rule show"},
		// queries
		{"ip -j r s", "-json route show"},
		{"ip --json route show t all", "-j route show table all"},
		{"link show up", "link show up"},
		{"l sh dev eth0", "link show eth0"},
		{"n show nud perm", "neigh show nud permanent"},
		{"bridge f s br br0", "bridge fdb show br br0"},
		{"fd s", "bridge fdb show"},
		{"vl s", "bridge vlan show"},
		{"bridge -com v s", "bridge -compressvlans vlan show"},
		{"st", "stats"},
		// bridge lines: fdb l(ocal) is permanent, t(emp) static
		{"bridge fdb a 02:00:00:00:00:01 dev eth1 t", "bridge fdb add 02:00:00:00:00:01 dev eth1 static"},
		{"bridge fdb a 02:00:00:00:00:01 dev eth1 l", "bridge fdb add 02:00:00:00:00:01 dev eth1 permanent"},
		{"bridge v a dev eth1 vid 10", "bridge vlan add dev eth1 vid 10"},
		{"bridge l set dev eth1 flood off", "bridge link set dev eth1 flood off"},
		// link arguments: m master, n nomaster (name is exact), a address
		{"link set eth1 m br0", "link set eth1 master br0"},
		{"link set eth1 n", "link set eth1 nomaster"},
		{"link set eth1 a 02:00:00:00:00:09", "link set eth1 address 02:00:00:00:00:09"},
		{"link add br0 ty bridge vlan_f 1 a 100", "link add br0 type bridge vlan_filtering 1 ageing_time 100"},
		{"link add red ty vrf t 10", "link add red type vrf table 10"},
	}
	for _, c := range same {
		a, b := parse(t, c.short), parse(t, c.long)
		a.Text, b.Text = "", ""
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%q parsed as %+v, %q as %+v", c.short, describe(a), c.long, describe(b))
		}
	}
	// Abbreviations that name a keyword iproute2 has and netfwd does not are
	// refused as that keyword, not taken for a later one netfwd knows.
	for line, want := range map[string]string{
		"nt show":                        `object "nt" (ntable) is not supported`,
		"rule add fr 10.0.0.0/8":         `unknown keyword "fr" (did you mean "from"?)`,
		"rule add pref 5 t 5":            `rule argument "t" (tun_id) is not supported`,
		"m show":                         `object "m" (maddress) is not supported`,
		"route add 10.0.0.0/8 dev e s 1": `route argument "s" (ssthresh) is not supported`,
		"route add 10.0.0.0/8 tos 1":     `route argument "tos" is not supported`,
		"route f":                        `"route flush" requires arguments`,
		"route add any dev eth0":         `route type "any" (anycast) is not supported`,
		"ip -d link show":                `option "-d" (-details) is not supported`,
		"bridge -c vlan show":            `bridge option "-c" (-color) is not supported`,
		"link show down":                 `argument "down" is not supported`,
		"route frobnicate":               `unknown route command "frobnicate"`,
		"tb show":                        `unknown object "tb"`,
	} {
		_, _, err := ParseLine(Pos{"t", 1}, line)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseLine(%q) = %v, want %q", line, err, want)
		}
	}
}

func describe(c Command) string {
	switch {
	case c.Route != nil:
		return fmt.Sprintf("route %+v", *c.Route)
	case c.Addr != nil:
		return fmt.Sprintf("address %+v", *c.Addr)
	case c.Link != nil:
		return fmt.Sprintf("link %+v", *c.Link)
	case c.Neigh != nil:
		return c.Neigh.String()
	case c.Bridge != nil:
		return c.Bridge.Op.String()
	case c.Nexthop != nil:
		return fmt.Sprintf("nexthop %+v", *c.Nexthop)
	case c.Rule != nil:
		return fmt.Sprintf("rule %+v", *c.Rule)
	case c.Query != nil:
		return fmt.Sprintf("query %T%+v json=%v", c.Query, c.Query, c.JSON)
	}
	return "nothing"
}

// Queries are typed values of the same reader.
func TestQueries(t *testing.T) {
	for line, want := range map[string]Query{
		"route show":                 RouteShow{RouteFilter{Table: fib.TableMain}},
		"route show table all":       RouteShow{RouteFilter{Table: fib.TableAll}},
		"ip r s t local":             RouteShow{RouteFilter{Table: fib.TableLocal}},
		"route show dev eth1":        RouteShow{RouteFilter{Table: fib.TableMain, Dev: "eth1"}},
		"route show proto kernel":    RouteShow{RouteFilter{Table: fib.TableMain, Proto: fib.ProtoKernel}},
		"route show 10.2.0.0/24":     RouteShow{RouteFilter{Table: fib.TableMain, Root: pfx("10.2.0.0/24"), Match: pfx("10.2.0.0/24")}},
		"route show root 10.0.0.0/8": RouteShow{RouteFilter{Table: fib.TableMain, Root: pfx("10.0.0.0/8")}},
		"r s match 10.2.3.4":         RouteShow{RouteFilter{Table: fib.TableMain, Match: pfx("10.2.3.4/32")}},
		"route show type blackhole scope host": RouteShow{RouteFilter{Table: fib.TableMain, Type: fib.Blackhole, TypeSet: true,
			Scope: fib.ScopeHost, ScopeSet: true}},
		"route flush table all proto static": RouteFlush{RouteFilter{Table: fib.TableAll, Proto: fib.ProtoStatic}},
		"route get 10.1.2.3 from 10.0.0.1 iif eth1 oif eth2": RouteGet{Dst: "10.1.2.3", From: netip.MustParseAddr("10.0.0.1"),
			IIf: "eth1", OIf: "eth2"},
		"neigh flush dev eth0":               NeighFlush{Dev: "eth0"},
		"neigh flush":                        NeighFlush{},
		"monitor":                            Monitor{Objects: MonitorAll},
		"monitor all":                        Monitor{Objects: MonitorAll, All: true},
		"monitor route neigh":                Monitor{Objects: MonitorRoute | MonitorNeigh},
		"ip mon fdb link":                    Monitor{Objects: MonitorFDB | MonitorLink},
		"bridge monitor fdb":                 Monitor{Objects: MonitorFDB},
		"-s link":                            LinkShow{Stats: true},
		"ip -br link show dev eth1":          LinkShow{ListFilter: ListFilter{Dev: "eth1"}, Brief: true},
		"-br addr":                           AddrShow{Brief: true},
		"route get to 10.1.2.3":              RouteGet{Dst: "10.1.2.3"},
		"route get nonsense":                 RouteGet{Dst: "nonsense"},
		"link show up":                       LinkShow{ListFilter: ListFilter{Up: true}},
		"link show eth1":                     LinkShow{ListFilter: ListFilter{Dev: "eth1"}},
		"link show dev eth1 up":              LinkShow{ListFilter: ListFilter{Dev: "eth1", Up: true}},
		"address show dev eth0":              AddrShow{ListFilter: ListFilter{Dev: "eth0"}},
		"addr":                               AddrShow{},
		"link show master br0":               LinkShow{ListFilter: ListFilter{Master: "br0"}},
		"address show vrf red up":            AddrShow{ListFilter: ListFilter{Master: "red", VRF: true, Up: true}},
		"nexthop show id 4":                  NexthopShow{ID: 4},
		"neigh show dev eth0 nud all":        NeighShow{Dev: "eth0", NUD: uint16(NUDAll)},
		"neigh show nud stale nud reachable": NeighShow{NUD: uint16(neigh.NUDStale | neigh.NUDReachable)},
		"neigh show nud none":                NeighShow{NUD: uint16(NUDNone)},
		"bridge fdb show br br0 brport eth1": FDBShow{Bridge: "br0", Port: "eth1"},
		"fdb show dev eth2":                  FDBShow{Port: "eth2"},
		"bridge vlan show dev eth1":          VLANShow{Dev: "eth1"},
		"bridge -compressvlans vlan":         VLANShow{Compress: true},
		"stats":                              Stats{},
		"reload":                             Reload{},
	} {
		if got := parse(t, line).Query; !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %#v, want %#v", line, got, want)
		}
	}
	if c := parse(t, "ip -j neigh show"); !c.JSON {
		t.Error("-j not seen")
	}
	for _, bad := range []string{"route get", "route get 1.1.1.1 2.2.2.2", "route show 10.0.0.0/8 10.0.0.0/9x", "link show eth0 eth1",
		"neigh show nud bogus", "bridge link show", "reload now", "stats now"} {
		if _, _, err := ParseLine(Pos{"t", 1}, bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// `link set ... address` refuses what Linux refuses with EADDRNOTAVAIL.
func TestLinkAddressMustBeUnicast(t *testing.T) {
	for _, mac := range []string{"ff:ff:ff:ff:ff:ff", "01:00:5e:00:00:01", "00:00:00:00:00:00", "33:33:00:00:00:01"} {
		for _, line := range []string{"link set dev eth1 address " + mac, "link add br0 address " + mac + " type bridge"} {
			_, _, err := ParseLine(Pos{"t", 1}, line)
			if err == nil || !strings.Contains(err.Error(), "cannot assign requested address") {
				t.Errorf("%q: %v, want cannot assign requested address", line, err)
			}
		}
	}
	c := parse(t, "link set dev eth1 address 02:00:00:00:00:09")
	if c.Link.Address.String() != "02:00:00:00:00:09" {
		t.Fatal(c.Link.Address)
	}
}

// Error output quotes at most a short prefix of the input, and a file with
// many bad lines reports MaxErrors of them and counts the rest.
func TestErrorsBounded(t *testing.T) {
	huge := strings.Repeat("\x01\xfe", 5<<20) // 10 MiB, binary
	for _, line := range []string{huge, "route add " + huge, "route add 10.0.0.0/8 dev " + huge,
		"link set eth0 address " + huge, "bridge fdb add " + huge + " dev eth0", "neigh add " + huge + " dev eth0"} {
		_, _, err := ParseLine(Pos{"t", 1}, line)
		if err == nil {
			t.Fatalf("%.40q... accepted", line)
		}
		if n := len(err.Error()); n > 400 {
			t.Errorf("error of %d bytes for a %d-byte line: %.200s", n, len(line), err)
		}
	}
	// 20 MB of binary "lines".
	var b strings.Builder
	for i := range 80000 {
		fmt.Fprintf(&b, "\x7f%s%d\n", strings.Repeat("\xff", 250), i)
	}
	cmds, errs := Parse("bin.conf", strings.NewReader(b.String()))
	if len(cmds) != 0 || len(errs) != MaxErrors+1 {
		t.Fatalf("%d commands, %d errors", len(cmds), len(errs))
	}
	total := 0
	for _, e := range errs {
		total += len(e.Error())
	}
	if total > 64<<10 {
		t.Fatalf("%d bytes of errors", total)
	}
	if last := errs[len(errs)-1].Error(); last != "bin.conf:80000: 79900 more errors up to this line not shown" {
		t.Fatalf("last error %q", last)
	}
	// A line longer than MaxLine ends the file with one error.
	_, errs = Parse("long.conf", strings.NewReader("route add 10.0.0.0/8 dev eth0\n"+strings.Repeat("x", 2*MaxLine)+"\n"))
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), "long.conf:2: line longer than") {
		t.Fatalf("%v", errs)
	}
}

func TestQuote(t *testing.T) {
	if q := Quote("eth0"); q != `"eth0"` {
		t.Fatal(q)
	}
	q := Quote(strings.Repeat("é", 100))
	if !strings.HasSuffix(q, `... (200 bytes)`) || len(q) > 100 || strings.Contains(q, `\x`) {
		t.Fatal(q)
	}
}

// The bridge ops a line produces.
func TestBridgeOps(t *testing.T) {
	for line, want := range map[string]l2.Op{
		"bridge fdb replace 02:00:00:00:00:01 dev eth1 vlan 10 sticky static": l2.FDBAdd{MAC: wire.MAC{2, 0, 0, 0, 0, 1}, Dev: "eth1", VID: 10, HasVID: true, Kind: l2.FDBStatic, Sticky: true, Replace: true},
		"bridge fdb del 02:00:00:00:00:01 dev eth1":                           l2.FDBDel{MAC: wire.MAC{2, 0, 0, 0, 0, 1}, Dev: "eth1"},
		"bridge vlan del dev br0 vid 10-12 self":                              l2.VLANDel{Dev: "br0", VID: 10, VIDEnd: 12, Self: true},
		"bridge link set dev eth1 state 2 isolated on":                        l2.LinkSet{Dev: "eth1", State: new(l2.PortState(2)), Set: l2.FlagIsolated},
		"bridge mdb del dev br0 port eth1 grp 01:00:5e:00:00:01 vid 10":       l2.MDBDel{Bridge: "br0", Port: "eth1", Group: wire.MAC{1, 0, 0x5e, 0, 0, 1}, VID: 10},
	} {
		if got := parse(t, line).Bridge.Op; !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %#v, want %#v", line, got, want)
		}
	}
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// TestHelp: help at every level comes from the keyword tables: the
// commands and arguments the parser takes are listed, unsupported ones not.
func TestHelp(t *testing.T) {
	for line, want := range map[string][]string{
		"help":            {"OBJECT := { address | route | rule | neighbor | link | monitor | vrf | nexthop | help | stats | bridge | fdb | vlan | reload | capture | trace }", "-json"},
		"?":               {"OBJECT := "},
		"route help":      {"Usage: route { add | change | replace | append | delete | show | get | flush | help }", "route get: tos from iif mark oif vrf sport dport ipproto"},
		"r h":             {"Usage: route {"},
		"route show help": {"route show: table vrf protocol scope type dev to", "route prefix selector: root match exact"},
		"ip route add ?":  {"route add: src via metric"},
		"neigh help":      {"neigh flush: dev nud"},
		"bridge fdb help": {"Usage: bridge fdb {", "bridge fdb show: dev br"},
		"bridge help":     {"OBJECT := { link | fdb | mdb | vlan | monitor | help }"},
		"ip bridge ?":     {"Usage: bridge [ OPTIONS ]"},
		"ip bridge fdb ?": {"Usage: bridge fdb {"},
		"fdb help":        {"Usage: bridge fdb {"},
		"monitor help":    {"Usage: monitor { link | route | neigh | all | help | fdb }"},
		"link help":       {"link add: up down name link address mtu master vrf nomaster type dev"},
	} {
		c, ok, err := ParseLine(Pos{"t", 1}, line)
		if err != nil || !ok {
			t.Fatalf("%q: %v", line, err)
		}
		h, isHelp := c.Query.(Help)
		if !isHelp {
			t.Fatalf("%q: %T, want Help", line, c.Query)
		}
		for _, w := range want {
			if !strings.Contains(h.Text, w) {
				t.Errorf("%q: no %q in\n%s", line, w, h.Text)
			}
		}
		if strings.Contains(h.Text, "prepend") || strings.Contains(h.Text, "save") {
			t.Errorf("%q lists an unsupported keyword:\n%s", line, h.Text)
		}
	}
}
