package main

// Differential test against the Linux kernel: the same random config is fed
// to a network namespace with `ip -batch` (with one custom ip rule, so the
// kernel follows rule order: local, then main) and to netfwd. Both must
// refuse the same lines, and `ip -j route get` must agree with
// `netfwd route get -j` on every probe address.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/apply"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/show"
	"github.com/netfwd/netfwd/internal/testenv"
)

type kgen struct {
	r     *rand.Rand
	addrs []string // "A/L dev D"
	nhids []int
}

func (g *kgen) addr() netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(g.r.IntN(2)), byte(g.r.IntN(4)), byte(g.r.IntN(256))})
}

func (g *kgen) prefix() string {
	lens := []int{0, 8, 15, 16, 22, 24, 24, 25, 28, 30, 32, 32}
	p, _ := g.addr().Prefix(lens[g.r.IntN(len(lens))])
	if p.Bits() == 32 && g.r.IntN(2) == 0 {
		return p.Addr().String()
	}
	if p.Bits() == 0 {
		return "default"
	}
	return p.String()
}

func (g *kgen) dev() string { return fmt.Sprintf("eth%d", g.r.IntN(4)) }

func (g *kgen) gateway() string {
	if len(g.addrs) > 0 && g.r.IntN(4) > 0 {
		a := netip.MustParsePrefix(strings.Fields(g.addrs[g.r.IntN(len(g.addrs))])[0])
		b := a.Masked().Addr().As4()
		b[3] += byte(g.r.IntN(8))
		return netip.AddrFrom4(b).String()
	}
	return g.addr().String()
}

func (g *kgen) line() string {
	switch k := g.r.IntN(100); {
	case k < 14:
		lens := []int{16, 22, 24, 24, 28, 30, 31, 32}
		p := netip.PrefixFrom(g.addr(), lens[g.r.IntN(len(lens))])
		a := fmt.Sprintf("%s dev %s", p, g.dev())
		g.addrs = append(g.addrs, a)
		return "address add " + a
	case k < 18 && len(g.addrs) > 0:
		return "address del " + g.addrs[g.r.IntN(len(g.addrs))]
	case k < 23:
		id := 1 + g.r.IntN(6)
		g.nhids = append(g.nhids, id)
		if g.r.IntN(4) == 0 {
			return fmt.Sprintf("nexthop add id %d blackhole", id)
		}
		return fmt.Sprintf("nexthop add id %d via %s dev %s", id, g.gateway(), g.dev())
	case k < 25:
		return fmt.Sprintf("nexthop del id %d", 1+g.r.IntN(6))
	case k < 40:
		l := fmt.Sprintf("route del %s", g.prefix())
		if g.r.IntN(2) == 0 {
			l += " table local"
		}
		if g.r.IntN(3) == 0 {
			l += fmt.Sprintf(" metric %d", g.r.IntN(2)*10)
		}
		return l
	}
	verbs := []string{"add", "add", "add", "append", "replace"}
	l := "route " + verbs[g.r.IntN(len(verbs))] + " "
	types := []string{"", "", "", "", "local ", "broadcast ", "blackhole ", "unreachable ", "prohibit ", "throw "}
	typ := types[g.r.IntN(len(types))]
	l += typ + g.prefix()
	switch typ {
	case "":
		switch g.r.IntN(6) {
		case 0:
			l += " dev " + g.dev()
		case 1:
			if len(g.nhids) > 0 {
				l += fmt.Sprintf(" nhid %d", g.nhids[g.r.IntN(len(g.nhids))])
			} else {
				l += " dev " + g.dev()
			}
		case 2:
			l += " via " + g.gateway() + " dev " + g.dev() + " onlink"
		default:
			l += " via " + g.gateway()
			if g.r.IntN(2) == 0 {
				l += " dev " + g.dev()
			}
		}
	case "local ", "broadcast ":
		l += " dev " + g.dev()
	}
	switch g.r.IntN(4) {
	case 0:
		l += " table local"
	case 1:
		l += " table main"
	}
	if g.r.IntN(3) == 0 {
		l += fmt.Sprintf(" metric %d", g.r.IntN(3)*10)
	}
	return l
}

var failedLine = regexp.MustCompile(`Command failed .*:(\d+)`)

func TestKernelDifferential(t *testing.T) {
	testenv.RequireRoot(t)
	waitingTest(t)
	for seed := range kernelSeeds() {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { kernelRound(t, uint64(seed)) })
	}
}

func kernelRound(t *testing.T, seed uint64) {
	ns := testenv.Netns(t, "nfk")
	for i := range 4 {
		testenv.Run(t, "ip", "-n", ns, "link", "add", fmt.Sprintf("eth%d", i), "type", "veth", "peer", "name", fmt.Sprintf("peer%d", i))
		testenv.Run(t, "ip", "-n", ns, "link", "set", fmt.Sprintf("eth%d", i), "up")
		testenv.Run(t, "ip", "-n", ns, "link", "set", fmt.Sprintf("peer%d", i), "up")
	}
	// One custom rule that matches none of the probes: the kernel then looks
	// up local and main separately, in rule order.
	testenv.Run(t, "ip", "-n", ns, "rule", "add", "pref", "100", "from", "198.18.0.0/15", "table", "100")

	g := &kgen{r: rand.New(rand.NewPCG(seed, 1))}
	// An address first: the kernel refuses onlink gateways while the
	// namespace has no local table at all, a quirk netfwd does not copy.
	testenv.Run(t, "ip", "-n", ns, "link", "add", "eth9", "type", "veth", "peer", "name", "peer9")
	testenv.Run(t, "ip", "-n", ns, "link", "set", "eth9", "up")
	testenv.Run(t, "ip", "-n", ns, "link", "set", "peer9", "up")
	lines := []string{"address add 192.168.99.1/24 dev eth9"}
	for len(lines) < 400 {
		lines = append(lines, g.line())
	}
	file := filepath.Join(t.TempDir(), "routes.batch")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := testenv.Output("ip", "-n", ns, "-force", "-batch", file)
	kernelFailed := map[int]string{}
	prev := ""
	for _, l := range strings.Split(out, "\n") {
		if m := failedLine.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			kernelFailed[n] = prev
		}
		prev = l
	}

	f := fib.New(fib.Options{})
	tx := f.Begin(len(lines))
	ours := map[int]string{}
	for i, l := range lines {
		cmd, ok, err := config.ParseLine(config.Pos{File: "routes.batch", Line: i + 1}, l)
		if err == nil && ok {
			err = apply.FIBCommand(tx, &cmd)
		}
		if err != nil {
			ours[i+1] = err.Error()
		}
	}
	tx.Commit()
	for n := 1; n <= len(lines); n++ {
		k, kf := kernelFailed[n]
		o, of := ours[n]
		if kf != of {
			t.Errorf("line %d %q: kernel failed=%t (%s), netfwd failed=%t (%s)", n, lines[n-1], kf, k, of, o)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d lines, %d refused by both", len(lines), len(ours))

	// Probes: every prefix's edges and random addresses.
	var probes []netip.Addr
	for _, r := range f.Routes(fib.TableAll) {
		probes = append(probes, r.Prefix.Addr(), fib.LastAddr(r.Prefix))
	}
	for range 100 {
		probes = append(probes, g.addr())
	}
	devHasAddr := map[string]bool{}
	for _, a := range f.Addresses() {
		devHasAddr[a.Dev] = true
	}
	checked := 0
	for _, a := range probes {
		if !a.IsValid() || !strings.HasPrefix(a.String(), "10.") {
			continue
		}
		kout, kerr := testenv.Output("ip", "-n", ns, "-j", "route", "get", a.String())
		var ks []struct {
			Type, Gateway, Dev, Prefsrc string
		}
		ktype := ""
		if kerr != nil {
			switch {
			case strings.Contains(kout, "Invalid argument"):
				ktype = "blackhole"
			case strings.Contains(kout, "No route to host"):
				ktype = "unreachable"
			case strings.Contains(kout, "Permission denied"):
				ktype = "prohibit"
			case strings.Contains(kout, "Network is unreachable"):
				ktype = "none"
			default:
				t.Fatalf("ip route get %s: %v %s", a, kerr, kout)
			}
		} else {
			if err := json.Unmarshal([]byte(kout), &ks); err != nil || len(ks) != 1 {
				t.Fatalf("ip route get %s: %q: %v", a, kout, err)
			}
			ktype = ks[0].Type
			if ktype == "" {
				ktype = "unicast"
			}
		}
		var o struct {
			Type, Gateway, Dev, Prefsrc, Error, Prefix string
		}
		line := show.AppendRouteGet(nil, f, a.String(), true)
		if err := json.Unmarshal(line, &o); err != nil {
			t.Fatalf("netfwd route get -j %s: %q: %v", a, line, err)
		}
		otype := o.Type
		if o.Error == "network unreachable" {
			otype = "none"
		} else if o.Error != "" {
			t.Fatalf("netfwd route get %s: %s", a, o.Error)
		}
		if otype != ktype {
			t.Errorf("%s: kernel %s %+v, netfwd %s (%s)", a, ktype, ks, otype, line)
			continue
		}
		checked++
		if ktype != "unicast" && ktype != "broadcast" && ktype != "local" {
			continue
		}
		k := ks[0]
		if k.Gateway != o.Gateway {
			t.Errorf("%s: kernel via %q, netfwd via %q (%s)", a, k.Gateway, o.Gateway, line)
		}
		if ktype != "local" && k.Dev != o.Dev {
			t.Errorf("%s: kernel dev %q, netfwd dev %q (%s)", a, k.Dev, o.Dev, line)
		}
		// Source selection off a device without addresses depends on the
		// kernel's device order, which netfwd does not model.
		if (ktype == "local" || devHasAddr[o.Dev]) && k.Prefsrc != o.Prefsrc {
			t.Errorf("%s: kernel src %q, netfwd src %q (%s)", a, k.Prefsrc, o.Prefsrc, line)
		}
	}
	t.Logf("%d probes agree", checked)
	if checked < 200 {
		t.Fatalf("only %d probes compared", checked)
	}
}

// kernelSeeds: a few rounds by default, more with NETFWD_KERNEL_SEEDS=N.
func kernelSeeds() int {
	if n, err := strconv.Atoi(os.Getenv("NETFWD_KERNEL_SEEDS")); err == nil && n > 0 {
		return n
	}
	return 4
}
