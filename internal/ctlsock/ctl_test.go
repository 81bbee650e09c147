package ctlsock

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/apply"
	"github.com/netfwd/netfwd/l3"
)

func serve(t *testing.T, reload func() error) (string, *apply.Controller) {
	t.Helper()
	c := apply.New(l3.NewEngine(l3.EngineOptions{}))
	path := filepath.Join(t.TempDir(), "ctl.sock")
	s, err := Listen(path, Handler{Ctl: c, Reload: reload})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.Serve(); close(done) }()
	t.Cleanup(func() {
		s.Close()
		<-done
		if _, err := os.Stat(path); err == nil {
			t.Error("socket file left behind")
		}
	})
	return path, c
}

func TestCtlAppliesAndShows(t *testing.T) {
	sock, _ := serve(t, nil)
	st, err := os.Stat(sock)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v %v, want 0600", st.Mode(), err)
	}
	if _, err := Listen(sock, Handler{}); err == nil {
		t.Fatal("a second daemon could take over a live socket")
	}
	lines := []string{
		"address add 192.0.2.1/24 dev eth0",
		"nexthop add id 1 via 192.0.2.9 dev eth0",
		"route add 10.0.0.0/8 nhid 1",
		"link add br0 address 02:bb:00:00:00:01 type bridge vlan_filtering 1",
		"link set eth1 master br0",
		"bridge vlan add dev eth1 vid 10",
		"bridge fdb add 02:00:00:00:00:07 dev eth1 vlan 10 static",
		"neigh add 192.0.2.9 lladdr 02:00:00:00:00:09 dev eth0",
		"route show",
	}
	out, err := Do(sock, lines, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "10.0.0.0/8 nhid 1") {
		t.Fatalf("route show: %q", out)
	}
	for q, want := range map[string]string{
		"route get 10.1.2.3":   `"gateway":"192.0.2.9"`,
		"route show table all": `"type":"local"`,
		"fdb show":             `"mac":"02:00:00:00:00:07"`,
		"vlan show":            `"vlan":10`,
		"neigh show":           `"lladdr":"02:00:00:00:00:09"`,
		"link show":            `"ifname":"eth1","flags"`,
		"address show":         `"local":"192.0.2.1"`,
		"nexthop show":         `"gateway":"192.0.2.9"`,
		"stats":                `"forwarded":0`,
	} {
		out, err := Do(sock, []string{q}, true)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var v any
		if json.Unmarshal([]byte(out), &v) != nil || !strings.Contains(out, want) {
			t.Errorf("%s -j: %q, want valid JSON with %s", q, out, want)
		}
	}
	for q, want := range map[string]string{
		"bridge fdb show":  "02:00:00:00:00:07 dev eth1 vlan 10 master br0 static",
		"bridge vlan show": "eth1",
		"nexthop show":     "id 1 via 192.0.2.9 dev eth0",
		"address show":     "inet 192.0.2.1/24 brd 192.0.2.255 scope global eth0",
		"link show eth1":   "master br0",
		"neigh show":       "192.0.2.9 dev eth0 lladdr 02:00:00:00:00:09 PERMANENT",
	} {
		out, err := Do(sock, []string{q}, false)
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("%s: %q %v, want %q", q, out, err, want)
		}
	}
}

func TestCtlAllOrNothing(t *testing.T) {
	sock, c := serve(t, nil)
	if _, err := Do(sock, []string{"address add 192.0.2.1/24 dev eth0"}, false); err != nil {
		t.Fatal(err)
	}
	before := c.Snapshot(nil)
	out, err := Do(sock, []string{
		"route add 10.0.0.0/8 via 192.0.2.9",
		"route add 10.1.0.0/16 via 203.0.113.1",
		"route frobnicate",
		"route show",
	}, false)
	if err == nil || !IsRequestError(err) || out != "" {
		t.Fatalf("want a refusal, got %q %v", out, err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "ctl:3:") {
		t.Fatalf("errors: %s", msg)
	}
	// Syntax errors are reported before anything is applied; then the
	// semantic ones, with their lines.
	_, err = Do(sock, []string{"route add 10.0.0.0/8 via 192.0.2.9", "route add 10.1.0.0/16 via 203.0.113.1"}, false)
	if err == nil || !strings.HasPrefix(err.Error(), "ctl:2: ") {
		t.Fatalf("semantic error: %v", err)
	}
	if c.Snapshot(nil) != before {
		t.Fatal("a refused request changed the state")
	}
	if _, err := Do(sock, []string{"reload"}, false); err == nil || !strings.Contains(err.Error(), "ctl:1: reload") {
		t.Fatalf("reload without a file: %v", err)
	}
}

func TestCtlReload(t *testing.T) {
	calls := 0
	sock, _ := serve(t, func() error { calls++; return nil })
	if _, err := Do(sock, []string{"reload"}, false); err != nil || calls != 1 {
		t.Fatal(err, calls)
	}
}

// `link set dev BR type bridge OPTIONS` changes a running bridge (docs/l2.md).
func TestCtlSetsBridgeOptions(t *testing.T) {
	sock, c := serve(t, nil)
	if _, err := Do(sock, []string{
		"link add br0 address 02:bb:00:00:00:01 type bridge",
		"link set eth1 master br0",
	}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := Do(sock, []string{"link set dev br0 type bridge vlan_filtering 1 ageing_time 1000 vlan_default_pvid 7 fdb_max_learned 9"}, false); err != nil {
		t.Fatalf("link set type bridge refused: %v", err)
	}
	br := c.Engine().Domain().Bridge("br0")
	if !br.VLANFiltering() || br.AgeingTime() != 10*time.Second || br.HostPVID() != 7 {
		t.Fatalf("bridge: filtering %v ageing %v pvid %d", br.VLANFiltering(), br.AgeingTime(), br.HostPVID())
	}
	if n, _ := c.FDBMaxLearned("br0"); n != 9 {
		t.Fatalf("fdb_max_learned %d", n)
	}
	// The port still has the default VLAN untouched: it moves to 7, as in Linux.
	if p := c.Engine().Domain().Port("eth1"); p.PVID() != 7 {
		t.Fatalf("eth1 pvid %d, want 7", p.PVID())
	}
	for line, want := range map[string]string{
		"link set dev nosuch type bridge ageing_time 100":        "no such bridge",
		"link set dev br0 type bridge stp_state 1":               `bridge option "stp_state" is not supported`,
		"link set dev br0 type bridge address 02:00:00:00:00:01": `bridge option "address" (`,
	} {
		if _, err := Do(sock, []string{line}, false); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", line, err, want)
		}
	}
}

// A query answered with a failure is served (ok, its answer in the output,
// -j's error object included) and carries ip's exit status: 2 for a lookup
// that fails, 1 for an invalid address; every query of the request is
// answered. A refused request stays a *RequestError.
func TestCtlFailedQueryStatus(t *testing.T) {
	sock, _ := serve(t, nil)
	if _, err := Do(sock, []string{"address add 192.0.2.1/24 dev eth0", "route add 10.0.0.0/8 via 192.0.2.9"}, false); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		lines  []string
		status int
		out    string
	}{
		{[]string{"route get 10.1.2.3"}, 0, `"gateway":"192.0.2.9"`},
		{[]string{"route get 9.9.9.9"}, 2, `{"dst":"9.9.9.9","error":"network unreachable"}` + "\n"},
		{[]string{"route get 9.9.9.9", "route get 10.1.2.3"}, 2, `{"dst":"9.9.9.9","error":"network unreachable"}` + "\n" + `{"dst":"10.1.2.3","type":"unicast"`},
		{[]string{"route get nonsense"}, 1, `{"dst":"nonsense","error":"invalid IPv4 address"}`},
		{[]string{"route show"}, 0, `"dst":"10.0.0.0/8"`},
		{[]string{"stats"}, 0, `"arp_expired":0,"arp_in":0,"arp_queued":0,"arp_released":0,`}, // held for ARP
	} {
		out, status, err := DoStatus(sock, c.lines, true)
		if err != nil || status != c.status || !strings.Contains(out, c.out) {
			t.Errorf("%v: status %d err %v out %q, want status %d with %q", c.lines, status, err, out, c.status, c.out)
		}
	}
	// On the wire: the status field, absent when 0.
	resp := Handler{Ctl: apply.New(l3.NewEngine(l3.EngineOptions{}))}.Do(Request{Lines: []string{"route get 9.9.9.9"}})
	if !resp.OK || resp.Status != 2 || len(resp.Errors) != 0 {
		t.Errorf("response %+v", resp)
	}
	if _, status, err := DoStatus(sock, []string{"route get"}, false); !IsRequestError(err) || status != 0 {
		t.Errorf("a refused request: status %d err %v", status, err)
	}
}

// route flush and neigh flush delete what their selector takes, in one
// batch, and nothing else.
func TestCtlFlush(t *testing.T) {
	sock, _ := serve(t, nil)
	if _, err := Do(sock, []string{
		"address add 192.0.2.1/24 dev eth0", "address add 198.51.100.1/24 dev eth1",
		"route add 10.1.0.0/16 via 192.0.2.9", "route add 10.2.0.0/16 via 198.51.100.9",
		"route add 10.3.0.0/16 via 198.51.100.9 proto static", "route add 10.4.0.0/16 via 192.0.2.9 table 7",
		"neigh add 192.0.2.5 lladdr 02:00:00:00:00:05 dev eth0 nud reachable",
		"neigh add 192.0.2.6 lladdr 02:00:00:00:00:06 dev eth0",
		"neigh add 198.51.100.5 lladdr 02:00:00:00:00:07 dev eth1 nud stale",
	}, false); err != nil {
		t.Fatal(err)
	}
	show := func(line string) string {
		out, err := Do(sock, []string{line}, false)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if _, err := Do(sock, []string{"route flush dev eth1 proto static", "neigh flush dev eth0"}, false); err != nil {
		t.Fatal(err)
	}
	if got := show("route show"); strings.Contains(got, "10.3.0.0") || !strings.Contains(got, "10.2.0.0/16") || !strings.Contains(got, "10.1.0.0/16") {
		t.Errorf("after route flush dev eth1 proto static:\n%s", got)
	}
	if got := show("neigh show"); got != "192.0.2.6 dev eth0 lladdr 02:00:00:00:00:06 PERMANENT\n198.51.100.5 dev eth1 lladdr 02:00:00:00:00:07 STALE\n" {
		t.Errorf("after neigh flush dev eth0:\n%s", got)
	}
	if _, err := Do(sock, []string{"route flush root 10.0.0.0/8 table all", "neigh flush nud all"}, false); err != nil {
		t.Fatal(err)
	}
	if got := show("route show table all"); strings.Contains(got, "10.") || !strings.Contains(got, "192.0.2.0/24") {
		t.Errorf("after route flush root 10.0.0.0/8 table all:\n%s", got)
	}
	if got := show("neigh show nud all"); got != "" {
		t.Errorf("after neigh flush nud all:\n%s", got)
	}
	if _, err := Do(sock, []string{"neigh flush dev eth9"}, false); err == nil {
		t.Error("neigh flush of a missing device accepted")
	}
	// route flush vrf: the VRF's table, its local and broadcast routes
	// kept (iproute2's typemask); an unknown VRF is refused.
	if _, err := Do(sock, []string{"link add red type vrf table 10", "link set eth2 master red",
		"address add 10.9.0.1/24 dev eth2", "route add 10.5.0.0/16 via 10.9.0.9 table 10"}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := Do(sock, []string{"route flush vrf red"}, false); err != nil {
		t.Fatal(err)
	}
	if got := show("route show table 10"); strings.Contains(got, "10.5.0.0") || !strings.Contains(got, "local 10.9.0.1") {
		t.Errorf("after route flush vrf red:\n%s", got)
	}
	if _, err := Do(sock, []string{"route flush vrf blue"}, false); err == nil {
		t.Error("route flush of a missing VRF accepted")
	}
}

// The handler's RingDrops reach `-s link` as each port's RX missed
// (stats64 rx.missed_errors), asked per device; without it they are 0.
func TestCtlLinkMissedFromRingDrops(t *testing.T) {
	c := apply.New(l3.NewEngine(l3.EngineOptions{}))
	resp := Handler{Ctl: c}.Do(Request{Lines: []string{"address add 192.0.2.1/24 dev eth0"}})
	if !resp.OK {
		t.Fatalf("%+v", resp)
	}
	var asked []string
	drops := func(dev string) uint64 {
		asked = append(asked, dev)
		if dev == "eth0" {
			return 12181
		}
		return 0
	}
	for _, tc := range []struct {
		h    Handler
		want string
	}{{Handler{Ctl: c, RingDrops: drops}, `"missed_errors":12181`}, {Handler{Ctl: c}, `"missed_errors":0`}} {
		resp := tc.h.Do(Request{Lines: []string{"-s link show dev eth0"}, JSON: true})
		if !resp.OK || !strings.Contains(resp.Output, tc.want) {
			t.Errorf("-j -s link show dev eth0: %+v, want %s", resp, tc.want)
		}
	}
	if len(asked) != 1 || asked[0] != "eth0" {
		t.Errorf("RingDrops asked for %q", asked)
	}
}
