package show_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/apply"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/show"
	"github.com/netfwd/netfwd/l2"
)

// `rule show` as iproute2 prints it (the kernel comparison is
// cmd/netfwd's TestKernelRuleDifferential); `route get` with the flow
// selectors the rules choose by.
func TestRuleShowAndRouteGet(t *testing.T) {
	c := setup(t, l2.NewManualClock(),
		"address add 192.0.2.1/24 dev eth0",
		"address add 198.51.100.1/24 dev eth1",
		"route add default via 192.0.2.9 dev eth0",
		"route add default via 198.51.100.9 dev eth1 table 100",
		"rule add pref 10 from 10.1.0.0/16 lookup 100",
		"rule add pref 11 fwmark 0x20/0xf0 lookup 100",
		"rule add pref 12 iif eth1 ipproto udp dport 53 blackhole",
		"rule add pref 13 iif eth1 tos 0x10 prohibit",
		"rule add pref 14 iif eth1 sport 1000-2000 unreachable",
		"rule add pref 15 goto 99",
	)
	want := "0:\tfrom all lookup local\n10:\tfrom 10.1.0.0/16 lookup 100\n11:\tfrom all fwmark 0x20/0xf0 lookup 100\n" +
		"12:\tfrom all iif eth1 ipproto udp dport 53 blackhole\n13:\tfrom all tos 0x10 iif eth1 prohibit\n" +
		"14:\tfrom all iif eth1 sport 1000-2000 unreachable\n15:\tfrom all goto 99 [unresolved]\n" +
		"32766:\tfrom all lookup main\n32767:\tfrom all lookup default\n"
	if got := answer(t, c, "ip rule", false); got != want {
		t.Errorf("rule show:\n%s\nwant:\n%s", got, want)
	}
	if got, want := answer(t, c, "-j rule list pref 12", false),
		`[{"priority":12,"src":"all","iif":"eth1","ipproto":"udp","dport":53,"action":"blackhole"}]`+"\n"; got != want {
		t.Errorf("rule show -j:\n%s\nwant:\n%s", got, want)
	}
	for q, want := range map[string]string{
		"route get 8.8.8.8":                                        "8.8.8.8 via 192.0.2.9 dev eth0 src 192.0.2.1\n",
		"route get 8.8.8.8 from 10.1.2.3":                          "8.8.8.8 from 10.1.2.3 via 198.51.100.9 dev eth1 table 100\n",
		"route get 8.8.8.8 mark 0x25":                              "8.8.8.8 via 198.51.100.9 dev eth1 table 100 src 198.51.100.1 mark 0x25\n",
		"route get 8.8.8.8 mark 5":                                 "8.8.8.8 via 192.0.2.9 dev eth0 src 192.0.2.1 mark 5\n",
		"route get 8.8.8.8 from 203.0.113.5 iif eth1 dsfield 10":   "prohibit 8.8.8.8 from 203.0.113.5 iif eth1\n",
		"route get 8.8.8.8 iif eth1 ipproto udp dport 53":          "blackhole 8.8.8.8 iif eth1\n",
		"-j route get 8.8.8.8 iif eth1 ipproto 17 dport 53 mark 1": `{"dst":"8.8.8.8","type":"blackhole","mark":1,"iif":"eth1"}` + "\n",
		"route get 8.8.8.8 iif eth1 ipproto udp sport 1500":        "8.8.8.8: network unreachable\n",
		"-j route get 8.8.8.8 from 10.1.0.1": `{"dst":"8.8.8.8","type":"unicast","table":"100","prefix":"0.0.0.0/0",` +
			`"gateway":"198.51.100.9","dev":"eth1","metric":0,"from":"10.1.0.1"}` + "\n",
	} {
		cmd, _, err := config.ParseLine(config.Pos{File: "q", Line: 1}, q)
		if err != nil {
			t.Fatalf("%q: %v", q, err)
		}
		var b strings.Builder
		err = show.Answer(&b, c, cmd.Query, cmd.JSON)
		var failed *show.Failed
		if err != nil && !errors.As(err, &failed) {
			t.Fatalf("%q: %v", q, err)
		}
		if b.String() != want {
			t.Errorf("%q:\n got %q\nwant %q", q, b.String(), want)
		}
		wantFail := strings.Contains(want, "blackhole") || strings.Contains(want, "prohibit") || strings.Contains(want, "unreachable")
		if (failed != nil) != wantFail {
			t.Errorf("%q: status %v, want a failure: %v", q, failed, wantFail)
		}
	}
	// `netfwd route get` lines carry the selectors too.
	f := c.Engine().FIB()
	if got, _ := show.RouteGet(nil, f, "8.8.8.8 from 10.1.9.9", false); string(got) != "8.8.8.8 from 10.1.9.9 via 198.51.100.9 dev eth1 table 100\n" {
		t.Errorf("route get line: %q", got)
	}
	if got, st := show.RouteGet(nil, f, "8.8.8.8 frm 10.1.9.9", true); st != show.StatusInvalid || !strings.Contains(string(got), `"error":`) {
		t.Errorf("bad route get line: %q %d", got, st)
	}
}

// The FIB alone (route get --config) answers with rules as the engine does.
func TestRuleLoadFIB(t *testing.T) {
	f := fib.New(fib.Options{Compiled: true})
	text := "route add blackhole 10.0.0.0/8 table 7\nrule add pref 5 to 10.0.0.0/8 lookup 7\nrule add pref 6 to 10.0.0.0/8 prohibit\n"
	if err := apply.LoadFIB(f, "r.conf", strings.NewReader(text), 0); err != nil {
		t.Fatal(err)
	}
	if got, st := show.RouteGet(nil, f, "10.1.1.1", false); string(got) != "blackhole 10.1.1.1 table 7\n" || st != show.StatusFailed {
		t.Errorf("route get: %q %d", got, st)
	}
	if err := apply.LoadFIB(f, "r.conf", strings.NewReader("rule del pref 5\n"), 0); err != nil {
		t.Fatal(err)
	}
	if got, _ := show.RouteGet(nil, f, "10.1.1.1", true); string(got) != `{"dst":"10.1.1.1","type":"prohibit"}`+"\n" {
		t.Errorf("route get: %q", got)
	}
	if err := apply.LoadFIB(f, "r.conf", strings.NewReader("rule add pref 7 lookup 7\nrule add pref 7 frob\n"), 0); err == nil ||
		!strings.Contains(err.Error(), "r.conf:2:") {
		t.Errorf("bad file: %v", err)
	}
	if len(f.Rules()) != 4 {
		t.Errorf("a refused file changed the rules: %v", f.Rules())
	}
}
