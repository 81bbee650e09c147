package main

// Differential test of `ip rule` against the Linux kernel: the same rule
// lines (a fixed list covering every selector and action netfwd has, then
// random ones) go to a fresh namespace with `ip -batch` and to netfwd's
// reader and applier. Both must refuse the same lines, and `ip rule show`
// and `ip -j rule show` (with and without selectors) must be byte for byte
// what netfwd's `rule show` prints. The namespace has the devices the
// rules name (the kernel would print [detached] for others, which netfwd
// never does) and no VRF driver (no l3mdev rules).

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/apply"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/show"
	"github.com/netfwd/netfwd/internal/testenv"
)

// ruleLines covers the grammar: abbreviations, every selector and action,
// defaults, and lines both must refuse.
var ruleLines = []string{
	"rule add from 10.1.0.0/16 lookup 100",
	"rule add pref 10 from 10.1.2.3/16 to 192.0.2.0/24 table 101",
	"ru add priority 20 not to 198.18.0.0/15 tos 0x10 iif eth0 oif eth1 goto 30",
	"rule a order 25 fwmark 5 lookup main suppress_prefixlength 0 proto static",
	"rule add pref 26 fwmark 0/0xff dsfield 8 ipproto tcp sport 1-100 dport 22 nop",
	"rule add pref 27 fwmark 0x10/0x0f ipproto 200 prohibit",
	"rule add pref 28 from 10.0.0.1 to 10.0.0.2/32 unreachable",
	"rule add pref 29 blackhole table 7",
	"rule add pref 31 dev eth1 type blackhole",
	"rule add pref 32 iif lo lookup default proto 99",
	"rule add pref 33 goto 40 table 5",
	"rule add pref 34 b",
	"rule add pref 35 fwmark 0xffffffff/0xffffffff ipproto 17 lookup 9",
	"rule add pref 35 ipproto udp sport 53 lookup 9",
	"rule add pref 35 ipproto udp lookup 9 proto static", // the protocol tells it apart
	"rule add pref 35 goto 38 lookup 9",
	"rule add pref 35 goto 39 lookup 9", // EEXIST: the target is not compared
	"rule add pref 36 from 0.0.0.0/0 to all lookup 300 sup_pl 24",
	"rule add pref 37 tos 1c type unreachable",
	"rule add pref 38 ipproto icmp lookup local",
	"rule add fwmark 3 lookup 4",
	// Twice, no EEXIST: the second takes one below the first's priority.
	"rule add fwmark 3 lookup 4",
	"rule add pref 50 sport 0 lookup 5",     // Invalid sport range
	"rule add pref 50 dport 65535 lookup 5", // Invalid dport range
	"rule add pref 50 tos 0x20 lookup 5",    // Invalid tos
	"rule add pref 50 goto 40",              // Backward goto
	"rule add pref 50 local",                // Missing goto target
	"rule add pref 50 from 10.0.0.0/33 lookup 5",
	"rule del pref 50",           // nothing there
	"rule del fwmark 3 lookup 4", // the first such
	"rule add pref 60 fwmark 7/0xff lookup 8",
	"rule del fwmark 7", // a bare mark compares every bit: no match
	"rule add pref 61 fwmark 7 lookup 8",
	"rule del fwmark 7", // deletes pref 61
	"rule add pref 40 from 10.9.0.0/16 lookup 9",
	"rule add pref 41 from 10.9.0.0/16 lookup 9 proto boot",
	"rule add pref 42 not from 10.9.0.0/16 lookup 9",
	"rule flush from 10.9.0.0/16 protocol boot",
	"rule add pref 43 to 10.8.0.0/16 oif eth0 lookup 9",
	"rule delete to 10.8.0.0/16 oif eth0",
}

// ruleShowQueries are the selectors compared.
var ruleShowQueries = []string{
	"", "pref 20", "not", "from 10.1.0.0/16", "from 10.0.0.0/8", "to 192.0.2.0/24", "10.0.0.0/8",
	"table 9", "lookup main", "fwmark 5", "fwmark 0/0xff", "iif eth0", "dev eth1", "oif eth1", "tos 0x10",
	"ipproto udp", "sport 53", "dport 22", "protocol static", "from all",
}

func TestKernelRuleDifferential(t *testing.T) {
	testenv.RequireRoot(t)
	waitingTest(t)
	for seed := range 3 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { kernelRuleRound(t, uint64(seed)) })
	}
}

func kernelRuleRound(t *testing.T, seed uint64) {
	ns := testenv.Netns(t, "nfr")
	for i := range 3 {
		testenv.Run(t, "ip", "-n", ns, "link", "add", fmt.Sprintf("eth%d", i), "type", "veth", "peer", "name", fmt.Sprintf("peer%d", i))
	}
	lines := ruleLines
	if seed > 0 {
		r := rand.New(rand.NewPCG(seed, 29))
		lines = nil
		for range 120 {
			lines = append(lines, randomRuleLine(r))
		}
	}
	// One ip command a line: iproute2 exits on a bad argument (invarg),
	// which would end a -batch run there.
	kernelFailed := map[int]string{}
	for i, l := range lines {
		if out, err := testenv.Output("ip", append([]string{"-n", ns}, strings.Fields(l)...)...); err != nil {
			kernelFailed[i+1] = strings.TrimSpace(out)
		}
	}
	f := fib.New(fib.Options{})
	ours := map[int]string{}
	for i, l := range lines {
		if err := apply.LoadFIB(f, "rules.batch", strings.NewReader(strings.Repeat("\n", i)+l+"\n"), 1); err != nil {
			ours[i+1] = err.Error()
		}
	}
	for n := 1; n <= len(lines); n++ {
		k, kf := kernelFailed[n]
		o, of := ours[n]
		if kf != of {
			t.Errorf("line %d %q: kernel failed=%t (%s), netfwd failed=%t (%s)", n, lines[n-1], kf, k, of, o)
		}
	}
	t.Logf("%d lines, %d refused by both", len(lines), len(ours))
	compared := 0
	for _, sel := range ruleShowQueries {
		for _, j := range []string{"", "-j"} {
			args := append([]string{"-n", ns}, strings.Fields(j+" rule show "+sel)...)
			want := testenv.Run(t, "ip", args...)
			cmd, _, err := config.ParseLine(config.Pos{File: "q", Line: 1}, j+" rule show "+sel)
			q, ok := cmd.Query.(config.RuleShow)
			if err != nil || !ok {
				t.Fatalf("rule show %s: %v %#v", sel, err, cmd.Query)
			}
			var b strings.Builder
			if err := show.Rules(&b, f, q.RuleFilter, cmd.JSON); err != nil {
				t.Fatal(err)
			}
			if b.String() != want {
				t.Errorf("`ip %s rule show %s` differs:\nkernel:\n%s\nnetfwd:\n%s", j, sel, want, b.String())
			}
			compared++
		}
	}
	t.Logf("%d listings compared", compared)
}

// randomRuleLine is one random `rule add` or `rule del` line over a small
// space, so that adds collide, deletes find rules and gotos resolve.
func randomRuleLine(r *rand.Rand) string {
	pick := func(opts ...string) string { return opts[r.IntN(len(opts))] }
	var w []string
	op := pick("add", "add", "add", "add", "del")
	w = append(w, "rule", op)
	if r.IntN(3) > 0 {
		w = append(w, "pref", fmt.Sprint(10*(1+r.IntN(8))))
	}
	if r.IntN(2) == 0 {
		w = append(w, "not")
	}
	sels := []func() []string{
		func() []string {
			return []string{"from", pick("10.0.0.0/8", "10.1.0.0/16", "10.1.2.3/24", "192.0.2.7", "all")}
		},
		func() []string { return []string{"to", pick("198.18.0.0/15", "203.0.113.0/24", "10.2.0.0/16")} },
		func() []string { return []string{"tos", pick("0x04", "0x10", "1c")} },
		func() []string { return []string{"fwmark", pick("1", "0x10/0xf0", "0/0xff", "0x7")} },
		func() []string { return []string{pick("iif", "dev"), pick("eth0", "eth1", "lo")} },
		func() []string { return []string{"oif", pick("eth1", "eth2")} },
		func() []string { return []string{"ipproto", pick("tcp", "udp", "17", "icmp")} },
		func() []string { return []string{pick("sport", "dport"), pick("22", "1000-2000", "53")} },
		func() []string { return []string{"protocol", pick("static", "bgp", "kernel", "unspec")} },
	}
	for _, i := range r.Perm(len(sels))[:r.IntN(3)] {
		w = append(w, sels[i]()...)
	}
	switch r.IntN(8) {
	case 0:
		w = append(w, "goto", fmt.Sprint(10*(1+r.IntN(9))))
	case 1:
		w = append(w, "nop")
	case 2:
		w = append(w, pick("blackhole", "unreachable", "prohibit"))
	case 3:
		w = append(w, "lookup", pick("100", "main", "local"), "suppress_prefixlength", pick("0", "24"))
	default:
		if op == "add" || r.IntN(2) == 0 {
			w = append(w, pick("lookup", "table"), pick("100", "200", "main", "default"))
		}
	}
	if len(w) == 2 { // `rule del` needs arguments
		w = append(w, "lookup", "100")
	}
	return strings.Join(w, " ")
}
