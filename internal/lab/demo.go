package lab

// The demo behind `netfwd-lab`: build the standard network, start netfwd on
// it in-process, show that it works (pings within and between VLANs and out
// of the uplink, ARP on both sides, MAC learning, TTL expiry, unreachables,
// a throughput run, the counters), say where everything is, optionally stay
// up for exploring, and remove everything it created.
//
// Each check prints the command a person would type to see the same thing
// and a verdict, so the output doubles as a tutorial. Missing tools (ping,
// iperf3) are replaced by Go equivalents and said so.
//
// Locking: none; one goroutine runs the demo. Cancelling ctx (Ctrl-C in the
// CLI) stops it between checks and still cleans up.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// DemoOptions configure RunDemo.
type DemoOptions struct {
	Out io.Writer
	// Keep leaves the lab running after the checks until ctx is done.
	Keep bool
	// Metrics is the metrics listener; when it is taken, any free port on
	// 127.0.0.1 is used instead. Default 127.0.0.1:9477.
	Metrics string
	// Ctl is the control socket path; default /run/netfwd-lab-PREFIX.sock.
	Ctl string
	// Throughput is the length of the throughput run (default 3s; negative
	// skips it).
	Throughput time.Duration
	// DaemonLog receives netfwd's log (nil: discarded).
	DaemonLog io.Writer
	// GoTools pretends ping and iperf3 are missing (tests of the fallback).
	GoTools bool
	// IO is netfwd's packet I/O (--io: auto, afxdp, afpacket; "" = auto).
	// With afxdp the hosts finish their own checksums (Spec.HostTxChecksumOff).
	IO string
	// BGP runs the routing-daemon demo instead of the forwarding checks
	// (bgpdemo.go; needs FRR and BIRD).
	BGP bool
}

// Check is one verified claim of the demo.
type Check struct {
	Title string
	OK    bool
	Why   string // what was expected, when not OK
}

// DemoReport is what RunDemo saw.
type DemoReport struct {
	Prefix     string // namespace prefix
	Checks     []Check
	MetricsURL string
	CtlPath    string
	Throughput *ThroughputResult
}

// Failed counts the failed checks.
func (r *DemoReport) Failed() int {
	n := 0
	for _, c := range r.Checks {
		if !c.OK {
			n++
		}
	}
	return n
}

type demo struct {
	ctx    context.Context
	o      DemoOptions
	w      io.Writer
	n      *Net
	r      *Router
	rep    *DemoReport
	tool   string // "ping" or "go"
	h      map[string]*Host
	netfwd string  // how to call netfwd in printed commands
	bgp    *bgpLab // with BGP: the daemons (bgpdemo.go)
}

// RunDemo runs the demo; see the file comment. The error is for failures
// to build or start anything (and ctx's error when it was cancelled);
// failed checks are in the report.
func RunDemo(ctx context.Context, o DemoOptions) (rep *DemoReport, err error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Metrics == "" {
		o.Metrics = "127.0.0.1:9477"
	}
	if o.Throughput == 0 {
		o.Throughput = 3 * time.Second
	}
	d := &demo{ctx: ctx, o: o, w: o.Out, rep: &DemoReport{}, tool: "ping", h: map[string]*Host{}, netfwd: selfCommand()}
	if o.GoTools || !HavePing() {
		d.tool = "go"
	}
	if o.BGP {
		if missing := BGPTools(); len(missing) > 0 {
			return d.rep, fmt.Errorf("--bgp needs FRR and BIRD (apt-get install frr bird2); missing: %s", strings.Join(missing, ", "))
		}
	}
	d.printf("netfwd lab: building the network (network namespaces, veth pairs)\n")
	spec := Standard()
	spec.HostTxChecksumOff = o.IO == "afxdp"
	n, err := Build(spec)
	if err != nil {
		return d.rep, err
	}
	d.n, d.rep.Prefix = n, n.Lab.Prefix
	defer func() {
		if d.r != nil {
			if serr := d.r.Stop(); serr != nil && err == nil {
				err = fmt.Errorf("stopping netfwd: %w", serr)
			}
			os.Remove(d.rep.CtlPath) // in case the daemon left it
		}
		if cerr := n.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("removing the lab: %w", cerr)
		}
		d.printf("\nnetfwd lab: stopped netfwd and removed namespaces %s-*\n", n.Lab.Prefix)
	}()
	for _, h := range n.Hosts {
		d.h[h.Name] = h
	}
	d.printTopology()
	if err := d.startRouter(); err != nil {
		return d.rep, err
	}
	steps := []func(){d.pingVLANs, d.pingUplink, d.arp, d.macLearning, d.ttl, d.unreachable, d.throughput, d.counters}
	if o.BGP {
		d.printBGPTopology()
		defer d.bgpStop() // before netfwd stops
		if err := d.bgpStart(); err != nil {
			return d.rep, fmt.Errorf("starting the routing daemons: %w", err)
		}
		steps = []func(){d.pingUplink, d.bgpSteps}
	}
	if d.tool == "go" {
		d.printf("\nnote: iputils ping is not installed (apt-get install iputils-ping); pinging with netfwd's Go pinger\n")
		d.printf("      (raw ICMP sockets opened in the host namespaces, same output format)\n")
	}
	for _, step := range steps {
		if ctx.Err() != nil {
			return d.rep, ctx.Err()
		}
		step()
	}
	d.summary()
	if o.Keep && ctx.Err() == nil {
		d.printf("\nnetfwd lab: running until Ctrl-C (everything above is removed then)\n")
		<-ctx.Done()
		return d.rep, nil
	}
	return d.rep, ctx.Err()
}

func (d *demo) printf(format string, a ...any) { fmt.Fprintf(d.w, format, a...) }

// selfCommand is how the user calls the router binary (the lab is its own
// command, cmd/netfwd-lab): `netfwd` when it is the one in PATH, the netfwd
// next to this binary, or `go run ./cmd/netfwd` when running from a go run
// build or no netfwd is installed.
func selfCommand() string {
	exe, err := os.Executable()
	if err != nil || strings.Contains(exe, "go-build") || strings.HasSuffix(exe, ".test") {
		return "go run ./cmd/netfwd"
	}
	sibling := filepath.Join(filepath.Dir(exe), "netfwd")
	if p, err := exec.LookPath("netfwd"); err == nil && (p == sibling || !fileExists(sibling)) {
		return "netfwd"
	}
	if fileExists(sibling) {
		return sibling
	}
	return "go run ./cmd/netfwd"
}

func fileExists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

// printTopology draws the network with the real namespace names, the
// right-hand column aligned whatever their length.
func (d *demo) printTopology() {
	d.printf("\n%s", topologyText(d.n.Router, []string{d.h["h1"].NS, d.h["h2"].NS, d.h["h3"].NS, d.h["isp"].NS}))
}

// topologyText is the standard network's diagram: router is the router's
// namespace, hosts those of h1, h2, h3 and isp.
func topologyText(router string, hosts []string) string {
	left := []string{"10.0.10.11", "10.0.10.12", "10.0.20.13", "203.0.113.1"}
	ports := []string{"eth1", "eth2", "eth3", "eth0"}
	corner := []string{"┐", "┤", "┤", "┘"}
	right := []string{
		"netfwd (namespace " + router + ")",
		"",
		"  br0 VLAN 20: access eth3;       vlan20 10.0.20.1",
		"  blackhole 10.66/16, unreachable 10.67/16, prohibit 10.68/16",
	}
	between := []string{
		"  br0 VLAN 10: access eth1, eth2; vlan10 10.0.10.1",
		"",
		"  routed eth0 203.0.113.2, default via 203.0.113.1",
	}
	w := 0
	cells := make([]string, len(hosts))
	for i, ns := range hosts {
		cells[i] = "namespace " + ns
		w = max(w, len(cells[i]))
	}
	var b strings.Builder
	bar := strings.Repeat(" ", 2+w+1+len(left[3])+1+utf8.RuneCountInString("──eth0─")) // the column of the corners
	for i := range hosts {
		fmt.Fprintf(&b, "  %-*s %-*s ──%s─%s %s\n", w, cells[i], len(left[3]), left[i], ports[i], corner[i], right[i])
		if i < len(between) && between[i] != "" {
			fmt.Fprintf(&b, "%s│ %s\n", bar, between[i])
		}
	}
	fmt.Fprintf(&b, "  %*s(and 198.51.100.1, \"the Internet\", on %s's loopback)\n", w+1, "", hosts[3])
	return strings.ReplaceAll(b.String(), " \n", "\n")
}

func (d *demo) startRouter() error {
	ctlPath := d.o.Ctl
	if ctlPath == "" {
		ctlPath = fmt.Sprintf("/run/netfwd-lab-%s.sock", d.n.Lab.Prefix)
	}
	metrics := d.o.Metrics
	if l, err := net.Listen("tcp", metrics); err != nil {
		d.printf("\nnote: %s is taken (another netfwd?); metrics on a free port instead\n", metrics)
		metrics = "127.0.0.1:0"
	} else {
		l.Close()
	}
	ro := RouterOptions{Metrics: metrics, Ctl: ctlPath, Log: d.o.DaemonLog, IO: d.o.IO}
	if d.o.BGP {
		ro.HostPath, ro.FPM = true, "127.0.0.1:2620"
	}
	r, err := StartNetfwd(d.n, ro)
	if err != nil {
		return err
	}
	d.r = r
	d.rep.MetricsURL, d.rep.CtlPath = r.MetricsURL(), ctlPath
	if err := r.WaitUp(d.n.Spec.RouterPorts(), 5*time.Second); err != nil {
		d.printf("\nnote: %v\n", err)
	}
	d.printf("\nnetfwd lab: netfwd started in-process on ports %s (namespace %s)\n",
		strings.Join(r.D.Ports(), ", "), d.n.Router)
	d.printf("  config %s\n", r.ConfigFile)
	return nil
}

// check records and prints one verdict.
func (d *demo) check(ok bool, title, why string) {
	d.rep.Checks = append(d.rep.Checks, Check{Title: title, OK: ok, Why: why})
	mark := "ok  "
	if !ok {
		mark = "FAIL"
	}
	d.printf("  [%s] %s\n", mark, title)
	if !ok && why != "" {
		d.printf("         %s\n", why)
	}
}

func (d *demo) section(title string) { d.printf("\n== %s\n", title) }

// cmd prints a command the user can type, indented.
func (d *demo) cmd(format string, a ...any) { d.printf("  $ "+format+"\n", a...) }

// out prints tool output, indented, without blank lines.
func (d *demo) out(s string) {
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if line := strings.TrimRight(sc.Text(), " "); line != "" {
			d.printf("    %s\n", line)
		}
	}
}

func (d *demo) ping(host string, dst netip.Addr, count, ttl int) (PingResult, bool) {
	h := d.h[host]
	ttlArg := ""
	if ttl > 0 {
		ttlArg = fmt.Sprintf("-t %d ", ttl)
	}
	d.cmd("ip netns exec %s ping -c %d %s%s", h.NS, count, ttlArg, dst)
	r, err := Ping(h.NS, dst, PingOptions{Count: count, TTL: ttl, Tool: d.tool})
	if err != nil {
		d.check(false, fmt.Sprintf("ping from %s to %s", host, dst), err.Error())
		return r, false
	}
	d.out(r.Output)
	return r, true
}

func (d *demo) pingVLANs() {
	d.section("ping within a VLAN (bridged) and between VLANs (routed)")
	h2, h3 := d.h["h2"].Addr.Addr(), d.h["h3"].Addr.Addr()
	if r, ok := d.ping("h1", h2, 3, 0); ok {
		d.check(r.Received == 3 && r.ReplyTTL == 64, "h1 -> h2 in VLAN 10: 3 of 3 replies, TTL 64 (bridged, not routed)",
			fmt.Sprintf("got %d replies, TTL %d", r.Received, r.ReplyTTL))
	}
	if r, ok := d.ping("h1", h3, 3, 0); ok {
		d.check(r.Received == 3 && r.ReplyTTL == 63, "h1 (VLAN 10) -> h3 (VLAN 20): 3 of 3 replies, TTL 63 (one routed hop)",
			fmt.Sprintf("got %d replies, TTL %d", r.Received, r.ReplyTTL))
	}
}

func (d *demo) pingUplink() {
	d.section("ping through the routed uplink")
	if r, ok := d.ping("h3", InternetIP, 3, 0); ok {
		d.check(r.Received == 3 && r.ReplyTTL == 63, "h3 -> 198.51.100.1 behind the isp: 3 of 3 replies",
			fmt.Sprintf("got %d replies, TTL %d", r.Received, r.ReplyTTL))
	}
	if r, ok := d.ping("isp", d.h["h1"].Addr.Addr(), 3, 0); ok {
		d.check(r.Received == 3, "isp -> h1 (inbound, the router resolves h1 by ARP): 3 of 3 replies",
			fmt.Sprintf("got %d replies", r.Received))
	}
}

func (d *demo) arp() {
	d.section("ARP, both ways")
	h1 := d.h["h1"]
	d.cmd("ip -n %s neigh show %s", h1.NS, VLAN10Addr.Addr())
	out, err := d.n.Exec(h1.NS, "ip", "neigh", "show", VLAN10Addr.Addr().String())
	d.out(out)
	d.check(err == nil && strings.Contains(out, "lladdr "+BridgeMAC.String()),
		"h1 resolved its gateway 10.0.10.1 to netfwd's VLAN 10 MAC "+BridgeMAC.String(), "not in h1's neighbour table")
	d.cmd("%s ctl --ctl %s neigh show", d.netfwd, d.rep.CtlPath)
	out, err = d.r.Ctl("neigh show")
	d.out(out)
	for _, h := range []string{"h1", "h3", "isp"} {
		host := d.h[h]
		want := fmt.Sprintf("%s dev %s lladdr %s", host.Addr.Addr(), d.ifaceOf(host), host.MAC)
		d.check(err == nil && strings.Contains(out, want), fmt.Sprintf("netfwd resolved %s: %q", h, want), fmt.Sprint("missing", errSuffix(err)))
	}
}

// ifaceOf is the router interface a host is reached through.
func (d *demo) ifaceOf(h *Host) string {
	if v, ok := d.n.Spec.VLANByID(h.VLAN); ok && h.VLAN != 0 {
		return v.Iface
	}
	return h.Port
}

func errSuffix(err error) string {
	if err != nil {
		return ": " + err.Error()
	}
	return ""
}

func (d *demo) macLearning() {
	d.section("MAC learning (netfwd's bridge FDB)")
	d.cmd("%s ctl --ctl %s fdb show", d.netfwd, d.rep.CtlPath)
	out, err := d.r.Ctl("fdb show")
	d.out(out)
	for _, h := range []string{"h1", "h2", "h3"} {
		host := d.h[h]
		want := fmt.Sprintf("%s dev %s vlan %d master br0", host.MAC, host.Port, host.VLAN)
		d.check(err == nil && strings.Contains(out, want), fmt.Sprintf("learned %s: %q", h, want), fmt.Sprint("missing", errSuffix(err)))
	}
}

func (d *demo) ttl() {
	d.section("TTL expiry, traceroute style")
	gw := VLAN10Addr.Addr()
	if r, ok := d.ping("h1", InternetIP, 1, 1); ok {
		d.check(r.ErrorsFrom(gw, KindTTLExceeded) == 1, "TTL 1: \"Time to live exceeded\" from the router 10.0.10.1",
			fmt.Sprintf("errors %+v", r.Errors))
	}
	if r, ok := d.ping("h1", InternetIP, 1, 2); ok {
		d.check(r.Received == 1 && r.ReplyFrom == InternetIP, "TTL 2: the reply from 198.51.100.1 (two hops)",
			fmt.Sprintf("%d replies from %v", r.Received, r.ReplyFrom))
	}
}

func (d *demo) unreachable() {
	d.section("unreachable destinations")
	gw := VLAN10Addr.Addr()
	if r, ok := d.ping("h1", UnreachIP, 1, 0); ok {
		d.check(r.ErrorsFrom(gw, KindHostUnreachable) == 1, "10.67.0.1 (route type unreachable): \"Destination Host Unreachable\" from 10.0.10.1",
			fmt.Sprintf("errors %+v", r.Errors))
	}
	if r, ok := d.ping("h1", ProhibitIP, 1, 0); ok {
		d.check(r.ErrorsFrom(gw, KindProhibited) == 1, "10.68.0.1 (route type prohibit): \"Packet filtered\" from 10.0.10.1",
			fmt.Sprintf("errors %+v", r.Errors))
	}
	if r, ok := d.ping("h1", BlackholeIP, 1, 0); ok {
		d.check(r.Received == 0 && len(r.Errors) == 0, "10.66.0.1 (route type blackhole): silence", fmt.Sprintf("%d replies, errors %+v", r.Received, r.Errors))
	}
}

func (d *demo) throughput() {
	if d.o.Throughput < 0 {
		return
	}
	d.section("throughput h1 (VLAN 10) -> h3 (VLAN 20), routed by netfwd")
	h1, h3 := d.h["h1"], d.h["h3"]
	var r ThroughputResult
	var err error
	if HaveIperf3() && !d.o.GoTools {
		d.cmd("ip netns exec %s iperf3 -s -1 &  ip netns exec %s iperf3 -c %s -t %g", h3.NS, h1.NS, h3.Addr.Addr(), d.o.Throughput.Seconds())
		r, err = Iperf3(d.ctx, h1.NS, h3.NS, h3.Addr.Addr(), d.o.Throughput)
	} else {
		d.printf("  note: iperf3 is not installed (apt-get install iperf3); using netfwd's built-in 64-byte UDP blaster\n")
		r, err = Blast(d.ctx, h1, h3, BridgeMAC, d.o.Throughput)
	}
	if err != nil {
		d.check(false, "throughput run", err.Error())
		return
	}
	d.rep.Throughput = &r
	d.printf("    %s\n", r)
	if r.Tool == "iperf3" {
		d.check(r.Gbps > 0.05, fmt.Sprintf("TCP through netfwd: %.2f Gbit/s", r.Gbps), "below 0.05 Gbit/s")
	} else {
		d.check(r.DeliveredPPS > 1000, fmt.Sprintf("64-byte UDP through netfwd: %.0f frames/s delivered", r.DeliveredPPS), "below 1000 frames/s")
	}
}

// counters shows the metrics that moved.
func (d *demo) counters() {
	url := d.rep.MetricsURL
	if url == "" {
		return
	}
	d.section("counters")
	d.cmd("curl -s %s | grep -v '^#'", url)
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		d.check(false, "metrics scraped", err.Error())
		return
	}
	defer resp.Body.Close()
	m, err := ParseMetrics(resp.Body)
	if err != nil {
		d.check(false, "metrics scraped", err.Error())
		return
	}
	var lines []string
	for _, s := range m.Samples {
		if s.Value == 0 {
			continue
		}
		for _, want := range []string{"forward", "icmp", "drop", "fdb_entries", "neigh"} {
			if strings.Contains(s.Name, want) {
				lines = append(lines, fmt.Sprintf("%s %g", s.Key(), s.Value))
				break
			}
		}
	}
	slices.Sort(lines)
	if len(lines) > 16 {
		lines = append(lines[:16], fmt.Sprintf("... (%d more)", len(lines)-16))
	}
	d.out(strings.Join(lines, "\n"))
	d.check(len(m.Samples) > 0, fmt.Sprintf("metrics scraped: %d samples", len(m.Samples)), "no samples")
}

func (d *demo) summary() {
	p := d.n.Lab.Prefix
	failed := d.rep.Failed()
	d.printf("\n== summary: %d of %d checks passed\n", len(d.rep.Checks)-failed, len(d.rep.Checks))
	for _, c := range d.rep.Checks {
		if !c.OK {
			d.printf("  FAILED: %s (%s)\n", c.Title, c.Why)
		}
	}
	if !d.o.Keep {
		// Everything below is torn down as soon as this returns: name it
		// as gone, not as something to use.
		d.printf("  the metrics listener, the control socket and the namespaces %s-* are removed now;\n", p)
		d.printf("  run with --keep to leave them up for exploring\n")
		return
	}
	if d.rep.MetricsURL != "" {
		d.printf("  metrics:   %s\n", d.rep.MetricsURL)
	}
	d.printf("  control:   %s ctl --ctl %s fdb show | neigh show | route show | link show | stats | monitor | help\n", d.netfwd, d.rep.CtlPath)
	d.printf("  config:    %s (edit, then reload: %s ctl --ctl %s reload)\n", d.r.ConfigFile, d.netfwd, d.rep.CtlPath)
	d.printf("  explore:   ip netns exec %s ping 10.0.20.13\n", d.h["h1"].NS)
	d.printf("             ip netns exec %s ping -t 1 198.51.100.1\n", d.h["h3"].NS)
	d.printf("             ip netns exec %s bash    # a shell on host h1\n", d.h["h1"].NS)
	d.printf("             ip netns list | grep %s\n", p)
}
