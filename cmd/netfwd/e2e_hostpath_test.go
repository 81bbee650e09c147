package main

// End-to-end: the host path (--host-path, docs/hostpath.md) on the standard
// lab network. The router namespace gets twins nf-eth0, nf-vlan10 and
// nf-vlan20 with netfwd's addresses; real programs in that namespace
// (iperf3, FRR) talk through netfwd's ports:
//   - TestHostPathTwins: the twins and their addresses, TCP (iperf3) from
//     hosts to the router's addresses through a routed port and a VLAN
//     interface, ping answered once, the kernel learning its neighbours;
//     the twins gone after SIGTERM and after kill -9, and a restart after
//     kill -9 working;
//   - TestHostPathBGPUnderFlood: an eBGP session (keepalive 3 s, hold 9 s)
//     between FRR's bgpd in the router namespace and BIRD on the isp,
//     in-band through netfwd's eth0, survives 60 s of 64-byte forwarding
//     floods in both directions through that port; the route BIRD
//     announces reaches netfwd's FIB over FPM (zebra) and is withdrawn;
//   - TestHostPathPuntFlood: a UDP flood at the router's address is capped
//     by the punt rate limit, and transit traffic during it is delivered as
//     well as without it.

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/lab"
	"github.com/netfwd/netfwd/internal/routinglab"
	"github.com/netfwd/netfwd/internal/testenv"
)

// twinAddrs returns the IPv4 addresses of the router namespace's kernel
// interfaces by name.
func twinAddrs(t *testing.T, ns string) map[string][]string {
	t.Helper()
	out := testenv.Run(t, "ip", "-n", ns, "-j", "-4", "addr", "show")
	var links []struct {
		Ifname   string
		AddrInfo []struct {
			Local     string
			Prefixlen int
		} `json:"addr_info"`
	}
	if err := json.Unmarshal([]byte(out), &links); err != nil {
		t.Fatalf("ip -j addr: %v: %s", err, out)
	}
	m := map[string][]string{}
	for _, l := range links {
		for _, a := range l.AddrInfo {
			m[l.Ifname] = append(m[l.Ifname], fmt.Sprintf("%s/%d", a.Local, a.Prefixlen))
		}
	}
	return m
}

// twins lists the router namespace's interfaces named like twins.
func twins(t *testing.T, ns string) []string {
	t.Helper()
	var out []string
	for _, f := range strings.Fields(testenv.Run(t, "ip", "-n", ns, "-o", "link", "show")) {
		if name, ok := strings.CutSuffix(f, ":"); ok && strings.HasPrefix(name, "nf-") {
			out = append(out, strings.SplitN(name, "@", 2)[0])
		}
	}
	return out
}

// iperf3TCP runs an iperf3 server in ns on addr and a 2-second client from
// host; it returns the received rate in bits/s.
func (e *e2e) iperf3TCP(ns string, addr netip.Addr, from string) float64 {
	t := e.t
	t.Helper()
	port := "5301"
	srv := exec.Command("ip", "netns", "exec", ns, "iperf3", "-s", "-1", "-B", addr.String(), "-p", port)
	var srvOut syncBuffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		srv.Process.Kill()
		srv.Wait()
	}()
	var out string
	var err error
	for range 50 { // the server needs a moment to listen (iperf3 -J may exit 0 on "connection refused")
		out, err = testenv.Output("ip", "netns", "exec", e.host(from).NS, "iperf3", "-c", addr.String(), "-p", port, "-t", "2", "-J")
		if err == nil && !strings.Contains(out, "unable to connect") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("iperf3 %s -> %s: %v\n%s\nserver: %s", from, addr, err, out, srvOut.String())
	}
	var res struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("iperf3 output: %v", err)
	}
	if res.End.SumReceived.BitsPerSecond == 0 {
		var hp []string
		for _, s := range e.scrape().Samples {
			if strings.HasPrefix(s.Name, "netfwd_hostpath_") && s.Value != 0 {
				hp = append(hp, fmt.Sprintf("%s%v %v", s.Name, s.Labels, s.Value))
			}
		}
		t.Logf("iperf3 %s -> %s received nothing:\n%s\nserver: %s\nhost path: %s", from, addr, lastBytes(out, 3000), srvOut.String(), strings.Join(hp, "\n"))
	}
	return res.End.SumReceived.BitsPerSecond
}

func TestHostPathTwins(t *testing.T) {
	testenv.RequireRoot(t, "iperf3")
	e := newE2EArgs(t, lab.Standard(), nil, "--host-path")
	rtr := e.net.Router

	// The twins carry netfwd's addresses, and `ip addr` agrees with ctl.
	want := map[string][]string{
		"nf-eth0":   {lab.UplinkAddr.String()},
		"nf-vlan10": {lab.VLAN10Addr.String()},
		"nf-vlan20": {lab.VLAN20Addr.String()},
	}
	ok, why := eventually(5*time.Second, func() (bool, string) {
		got := twinAddrs(t, rtr)
		for twin, addrs := range want {
			if strings.Join(got[twin], " ") != strings.Join(addrs, " ") {
				return false, fmt.Sprintf("%s has %v, want %v", twin, got[twin], addrs)
			}
		}
		return true, ""
	})
	if !ok {
		t.Fatal(why)
	}
	var ctlAddrs []struct {
		Ifname   string
		AddrInfo []struct {
			Local     string
			Prefixlen int
		} `json:"addr_info"`
	}
	if err := json.Unmarshal([]byte(e.ctl("-j", "address show")), &ctlAddrs); err != nil {
		t.Fatal(err)
	}
	kernel := twinAddrs(t, rtr)
	for _, l := range ctlAddrs {
		for _, a := range l.AddrInfo {
			if s := fmt.Sprintf("%s/%d", a.Local, a.Prefixlen); !strings.Contains(strings.Join(kernel["nf-"+l.Ifname], " "), s) {
				t.Errorf("ctl address show has %s on %s; the twin has %v", s, l.Ifname, kernel["nf-"+l.Ifname])
			}
		}
	}

	// TCP from hosts to the router's own addresses, served by the kernel:
	// through a VLAN interface, a routed port, and across subnets.
	for _, c := range []struct {
		from string
		to   netip.Addr
	}{{"h1", gw10}, {"isp", lab.UplinkAddr.Addr()}, {"h3", gw10}} {
		if bps := e.iperf3TCP(rtr, c.to, c.from); bps <= 0 {
			t.Errorf("iperf3 %s -> %s: %v bit/s", c.from, c.to, bps)
		} else {
			t.Logf("iperf3 TCP %s -> %s (the router's kernel, through the host path): %.0f Mbit/s", c.from, c.to, bps/1e6)
		}
	}

	// Ping answered once: by netfwd, not also by the kernel.
	for _, dst := range []netip.Addr{gw10, lab.UplinkAddr.Addr()} {
		from := "h1"
		if dst == lab.UplinkAddr.Addr() {
			from = "isp"
		}
		r := e.pingOK(from, dst, 64)
		if r.Duplicates != 0 {
			t.Errorf("ping %s: %d duplicate replies\n%s", dst, r.Duplicates, r.Output)
		}
	}

	// The kernel learned its peers from punted ARP.
	if out := testenv.Run(t, "ip", "-n", rtr, "neigh", "show", "dev", "nf-vlan10"); !strings.Contains(out, h1IP.String()) {
		t.Errorf("the kernel's neighbours on nf-vlan10 lack h1:\n%s", out)
	}
	m := e.scrape()
	if v := m.Sum("netfwd_hostpath_injected_total", "port", "vlan10"); v <= 0 {
		t.Errorf("hostpath_injected_total{vlan10} = %v", v)
	}
	if v := m.Sum("netfwd_hostpath_punted_total", "port", "eth0"); v <= 0 {
		t.Errorf("hostpath_punted_total{eth0} = %v", v)
	}

	// Twins follow the configuration: an address added by ctl appears.
	e.ctl("address add 10.0.10.2/24 dev vlan10")
	ok, why = eventually(5*time.Second, func() (bool, string) {
		got := twinAddrs(t, rtr)["nf-vlan10"]
		return strings.Join(got, " ") == "10.0.10.1/24 10.0.10.2/24", fmt.Sprint(got)
	})
	if !ok {
		t.Errorf("nf-vlan10 after address add: %s", why)
	}

	// The twin's carrier follows the port's link (the isp's end goes down).
	operstate := func() string {
		var l []struct{ Operstate string }
		json.Unmarshal([]byte(testenv.Run(t, "ip", "-n", rtr, "-j", "link", "show", "nf-eth0")), &l)
		if len(l) != 1 {
			return "?"
		}
		return l[0].Operstate
	}
	for _, c := range []struct{ updown, want string }{{"down", "DOWN"}, {"up", "UP"}} {
		testenv.Run(t, "ip", "-n", e.host("isp").NS, "link", "set", e.host("isp").Iface, c.updown)
		// A TAP that never lost its carrier reports UNKNOWN, after a loss UP.
		if ok, why := eventually(5*time.Second, func() (bool, string) {
			s := operstate()
			return s == c.want || c.want == "UP" && s == "UNKNOWN", s
		}); !ok {
			t.Errorf("isp link %s: nf-eth0 is %s, want %s", c.updown, why, c.want)
		}
	}

	// Stop: the twins stay, as they were (the next daemon adopts them);
	// kill -9 too; a restart adopts them and works.
	links := func() map[string]int { // twin -> ifindex
		var ls []struct {
			Ifindex int
			Ifname  string
		}
		json.Unmarshal([]byte(testenv.Run(t, "ip", "-n", rtr, "-j", "link", "show")), &ls)
		m := map[string]int{}
		for _, l := range ls {
			if strings.HasPrefix(l.Ifname, "nf-") {
				m[l.Ifname] = l.Ifindex
			}
		}
		return m
	}
	before := links()
	e.stop()
	if got := links(); len(got) != 3 || !maps.Equal(got, before) {
		t.Fatalf("twins after SIGTERM: %v, want %v", got, before)
	}
	e.start()
	e.cmd.Process.Signal(syscall.SIGKILL)
	<-e.exited
	if got := links(); !maps.Equal(got, before) {
		t.Fatalf("twins after a restart and kill -9: %v, want %v", got, before)
	}
	e.start()
	if got := links(); !maps.Equal(got, before) {
		t.Fatalf("twins after kill -9 and a restart: %v, want %v", got, before)
	}
	if bps := e.iperf3TCP(rtr, gw10, "h1"); bps <= 0 {
		t.Errorf("iperf3 after kill -9 and restart: %v", bps)
	}

	// `netfwd twins remove` refuses while netfwd runs, and removes them
	// once it stopped.
	if out, err := e.removeTwins(); err == nil || !strings.Contains(out, "held by a running process") {
		t.Errorf("twins remove with netfwd running: %v\n%s", err, out)
	}
	e.stop()
	if out, err := e.removeTwins(); err != nil || strings.Count(out, "removed nf-") != 3 {
		t.Fatalf("twins remove: %v\n%s", err, out)
	}
	if tw := twins(t, rtr); len(tw) != 0 {
		t.Fatalf("twins left after twins remove: %v", tw)
	}
}

// trafgenFlood starts trafgen in ns sending 64-byte UDP frames from
// (srcMAC, src) to (dstMAC, dst) on dev, at pps (0: as fast as it can),
// until the returned stop is called.
func trafgenFlood(t *testing.T, ns, dev, dstMAC, srcMAC string, src, dst netip.Addr, pps int) (stop func()) {
	t.Helper()
	conf := fmt.Sprintf(`{
  eth(da=%s, sa=%s),
  ipv4(saddr=%s, daddr=%s, ttl=64),
  udp(sp=dinc(10000, 10015), dp=9),
  fill(0x00, 18)
}
`, dstMAC, srcMAC, src, dst)
	file := filepath.Join(t.TempDir(), "flood.trafgen")
	if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"netns", "exec", ns, "trafgen", "--dev", dev, "--conf", file, "-n", "0", "--no-sock-mem", "-P", "1", "-q"}
	if pps > 0 {
		args = append(args, "-b", strconv.Itoa(pps)+"pps")
	}
	cmd := exec.Command("ip", args...)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	t.Cleanup(stop)
	return stop
}

// bgpdPeer returns bgpd's session with peer: how many times it was
// established, whether it is now, and the prefixes received.
func bgpdPeer(ns, dir, peer string) (established int, up bool, received int) {
	p := (&routinglab.Lab{Rtr: ns, Dir: dir}).BGPPeer(peer)
	return p.Established, p.Up, p.Received
}

func TestHostPathBGPUnderFlood(t *testing.T) {
	testenv.RequireRoot(t, "trafgen", "bird", "birdc", "vtysh", routinglab.Zebra, routinglab.Bgpd)
	e := newE2EExe(t, lab.Standard(), nil, optimizedNetfwd(t), "--host-path", "--fpm", "127.0.0.1:2620")
	dir, err := os.MkdirTemp("", "nfhostpath")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	l := &routingLab{t: t, Lab: &routinglab.Lab{Rtr: e.net.Router, Dir: dir}}
	t.Cleanup(l.stopAll)
	l.write("zebra.conf", l.Subst(routinglab.ZebraConf))
	l.write("bgpd.conf", l.Subst(lab.BGPBgpdConf))
	testenv.Run(t, "chown", "-R", "frr:frr", dir)
	l.startZebra()
	l.startBgpd()
	l.startBird(e.host("isp").NS, "bird-isp", lab.BGPPeerBirdConf([]netip.Prefix{
		netip.MustParsePrefix("198.18.5.0/24"), netip.MustParsePrefix("198.18.6.0/24")}))

	// Established in-band, and the route reaches netfwd over FPM.
	learned := func() string { // netfwd's route to 198.18.5.0/24
		out, _ := e.ctlErr("route show")
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "198.18.5.0/24 ") {
				return line
			}
		}
		return ""
	}
	ok, why := eventually(40*time.Second, func() (bool, string) {
		n, up, rcvd := bgpdPeer(l.Rtr, dir, "203.0.113.1")
		if !up || rcvd != 2 {
			return false, fmt.Sprintf("established %d times, up %v, %d prefixes", n, up, rcvd)
		}
		if out := learned(); !strings.Contains(out, "proto bgp") || !strings.Contains(out, "dev eth0") {
			return false, "netfwd: " + out
		}
		return true, ""
	})
	if !ok {
		rib, _ := testenv.Output("ip", "netns", "exec", l.Rtr, "vtysh", "--vty_socket", dir, "-c", "show ip route")
		kern, _ := testenv.Output("ip", "-n", l.Rtr, "route", "show")
		all, _ := e.ctlErr("route show")
		t.Fatalf("BGP through the host path: %s\nzebra:\n%s\nkernel:\n%s\nnetfwd:\n%s", why, rib, kern, all)
	}
	est0, _, _ := bgpdPeer(l.Rtr, dir, "203.0.113.1")
	// Hosts reach the learned prefix (an address of the isp in it) through
	// netfwd, by the BGP route.
	isp := e.host("isp")
	testenv.Run(t, "ip", "-n", isp.NS, "address", "add", "198.18.5.1/32", "dev", "lo")
	if got := e.routeGet(netip.MustParseAddr("198.18.5.1")); got["prefix"] != "198.18.5.0/24" || got["dev"] != "eth0" {
		t.Errorf("route get 198.18.5.1: %v", got)
	}
	e.pingOK("h1", netip.MustParseAddr("198.18.5.1"), 63)

	// 60 s of 64-byte floods through eth0 in both directions: h1 -> isp's
	// Internet address (routed out of eth0, where the router's keepalives
	// leave) and isp -> h2 (in through eth0, where the peer's arrive).
	const flood = 60 * time.Second
	h1 := e.host("h1")
	m0 := e.scrape()
	fwd0, drops0 := m0.Sum(metricForwarded), m0.Sum("netfwd_pktio_ring_drops_total")
	stop1 := trafgenFlood(t, h1.NS, h1.Iface, lab.BridgeMAC.String(), h1.MAC.String(), h1IP, lab.InternetIP, 0)
	stop2 := trafgenFlood(t, isp.NS, isp.Iface, lab.UplinkMAC.String(), isp.MAC.String(), lab.ISPAddr.Addr(), h2IP, 0)
	start := time.Now()
	flaps := 0
	for time.Since(start) < flood {
		time.Sleep(time.Second)
		if n, up, _ := bgpdPeer(l.Rtr, dir, "203.0.113.1"); n != est0 || !up {
			flaps++
			t.Errorf("%.0f s into the flood: session up %v, established %d times (was %d)", time.Since(start).Seconds(), up, n, est0)
			break
		}
	}
	stop1()
	stop2()
	m := e.scrape()
	forwarded := m.Sum(metricForwarded) - fwd0
	t.Logf("flood: %.0f frames forwarded in %.0f s (%.0f kpps), %.0f dropped in full RX rings; BGP flaps: %d",
		forwarded, flood.Seconds(), forwarded/flood.Seconds()/1e3, m.Sum("netfwd_pktio_ring_drops_total")-drops0, flaps)
	// ctl -s link shows those drops as each port's RX missed.
	t.Logf("ctl -s link: RX missed %d in all", e.checkLinkMissed())
	if c := m.Sum("netfwd_pktio_control_rx_packets_total", "port", "eth0"); c < 20 {
		t.Errorf("eth0's control ring delivered %.0f frames: BGP did not take it", c)
	}
	if d := m.Sum("netfwd_pktio_control_ring_drops_total"); d != 0 {
		t.Errorf("%.0f control frames dropped in full control rings", d)
	}
	if forwarded < 1e6 {
		t.Errorf("the flood forwarded only %.0f frames: not a flood", forwarded)
	}
	if n, up, _ := bgpdPeer(l.Rtr, dir, "203.0.113.1"); n != est0 || !up {
		t.Fatalf("after the flood: session up %v, established %d times (was %d)", up, n, est0)
	}

	// A withdrawal takes the route away from netfwd.
	l.birdc(isp.NS, "bird-isp", "disable", "announced")
	ok, why = eventually(20*time.Second, func() (bool, string) {
		out := learned()
		return !strings.Contains(out, "198.18.5.0/24"), out
	})
	if !ok {
		t.Errorf("withdrawn route still in netfwd: %s", why)
	}
}

// TestHostPathPuntFlood: a flood of UDP at the router's uplink address is
// capped by the punt rate limit (class other, set to 3000/s, burst 300;
// the twin renamed), and
// transit traffic (iperf3 UDP h3 -> the Internet address) is delivered as
// well as without the flood.
func TestHostPathPuntFlood(t *testing.T) {
	testenv.RequireRoot(t, "trafgen", "iperf3")
	e := newE2EExe(t, lab.Standard(), nil, optimizedNetfwd(t), "--host-path", "--twin-name", "eth0=uplink0",
		"--punt-limit", "other=3000/300")
	if tw := twins(t, e.net.Router); len(tw) != 2 || !strings.Contains(testenv.Run(t, "ip", "-n", e.net.Router, "link", "show", "uplink0"), "uplink0") {
		t.Fatalf("twins %v, and uplink0 should exist", tw)
	}
	isp, h3 := e.host("isp"), e.host("h3")
	srv := exec.Command("ip", "netns", "exec", isp.NS, "iperf3", "-s", "-B", lab.InternetIP.String(), "-p", "5302")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	transit := func() (received, sent float64) {
		t.Helper()
		var out string
		var err error
		for range 50 {
			out, err = testenv.Output("ip", "netns", "exec", h3.NS, "iperf3", "-c", lab.InternetIP.String(), "-p", "5302",
				"-u", "-b", "50M", "-l", "1400", "-t", "4", "-J")
			if err == nil && !strings.Contains(out, "unable to connect") {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("iperf3: %v\n%s", err, out)
		}
		var res struct {
			End struct {
				Sum struct {
					Packets     float64
					LostPackets float64 `json:"lost_packets"`
				}
			}
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		return res.End.Sum.Packets - res.End.Sum.LostPackets, res.End.Sum.Packets
	}
	base, baseSent := transit()
	punted0 := e.scrape().Sum("netfwd_hostpath_punted_total", "port", "eth0")
	const floodPPS = 30000
	t0 := time.Now()
	stop := trafgenFlood(t, isp.NS, isp.Iface, lab.UplinkMAC.String(), isp.MAC.String(), lab.ISPAddr.Addr(), lab.UplinkAddr.Addr(), floodPPS)
	time.Sleep(500 * time.Millisecond)
	during, duringSent := transit()
	stop()
	took := time.Since(t0).Seconds()
	m := e.scrape()
	punted := m.Sum("netfwd_hostpath_punted_total", "port", "eth0") - punted0
	limited := m.Sum("netfwd_hostpath_rate_limited_total", "port", "eth0", "class", "other")
	t.Logf("transit without the flood: %.0f of %.0f datagrams; with a %d pps flood at the router: %.0f of %.0f (%.3fx); punted %.0f in %.1f s, rate limited %.0f",
		base, baseSent, floodPPS, during, duringSent, during/base, punted, took, limited)
	if cap := 3000*took + 300; punted > cap {
		t.Errorf("punted %.0f frames in %.1f s: above the limit's %.0f", punted, took, cap)
	}
	if limited < 3000 {
		t.Errorf("only %.0f punts rate limited: the flood did not reach the limit", limited)
	}
	if during < 0.9*base {
		t.Errorf("transit during the flood %.0f < 0.9 x %.0f without", during, base)
	}
}

// TestHostPathTwinDeleted: an admin deletes a twin (`ip link del nf-eth0`);
// within a second it is back with the same MAC and its addresses, the
// deletion is logged at WARN, and the router namespace reaches the isp
// through it again. A second deletion is repaired as well (the watch is
// not one-shot).
func TestHostPathTwinDeleted(t *testing.T) {
	waitingTest(t)
	e := newE2EArgs(t, lab.Standard(), nil, "--host-path")
	rtr := e.net.Router
	isp := lab.ISPAddr.Addr().String()
	type link struct {
		Ifindex int
		Address string
	}
	twin := func() (link, bool) {
		out, err := testenv.Output("ip", "-n", rtr, "-j", "link", "show", "nf-eth0")
		var l []link
		if err != nil || json.Unmarshal([]byte(out), &l) != nil || len(l) != 1 {
			return link{}, false
		}
		return l[0], true
	}
	want := lab.UplinkAddr.String()
	if ok, why := eventually(5*time.Second, func() (bool, string) {
		got := twinAddrs(t, rtr)["nf-eth0"]
		return strings.Join(got, " ") == want, fmt.Sprint(got)
	}); !ok {
		t.Fatalf("nf-eth0 has %s, want %s", why, want)
	}
	before, _ := twin()
	pingISP := func(within time.Duration) {
		t.Helper()
		ok, why := eventually(within, func() (bool, string) {
			out, err := e.net.Exec(rtr, "ping", "-c", "1", "-W", "1", "-I", "nf-eth0", isp)
			return err == nil && strings.Contains(out, "1 received"), out
		})
		if !ok {
			t.Errorf("ping %s from the router namespace through nf-eth0:\n%s", isp, why)
		}
	}
	pingISP(5 * time.Second)
	for round := 1; round <= 2; round++ {
		old, _ := twin()
		testenv.Run(t, "ip", "-n", rtr, "link", "del", "nf-eth0")
		start := time.Now()
		ok, why := eventually(time.Second, func() (bool, string) {
			l, ok := twin()
			if !ok || l.Ifindex == old.Ifindex {
				return false, "no new nf-eth0"
			}
			got := twinAddrs(t, rtr)["nf-eth0"]
			return l.Address == before.Address && strings.Join(got, " ") == want,
				fmt.Sprintf("nf-eth0 %s with %v; want %s with %s", l.Address, got, before.Address, want)
		})
		if !ok {
			t.Fatalf("round %d: not re-created within 1 s: %s", round, why)
		}
		t.Logf("round %d: nf-eth0 back after %v", round, time.Since(start).Round(time.Millisecond))
		pingISP(5 * time.Second)
	}
	if n := strings.Count(e.stderr.String(), "twin deleted behind netfwd's back"); n < 2 {
		t.Errorf("%d WARN lines for 2 deletions:\n%s", n, e.stderr.String())
	}
}
