package lab

// `netfwd-lab --bgp`: the standard network with routing daemons. netfwd
// runs with --host-path and --fpm; FRR (zebra with the FPM module, bgpd)
// runs in the router namespace on the twins, BIRD on the isp announces
// 198.18.0.0/24 .. 198.18.7.0/24 over eBGP. The session runs in-band
// through netfwd's eth0; zebra hands the routes to netfwd over FPM; a host
// pings into a learned prefix; a withdrawal takes the routes away.
//
// Flow: bgpStart (configs in a directory user frr can read, daemons started
// directly as docs/routes.md shows) -> bgpSteps -> bgpStop (zebra first:
// zebra 8.4 can hang on SIGTERM once its FPM peer is gone).
//
// Locking: none; one goroutine.

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// FRR's daemons as Debian installs them.
const (
	frrZebra = "/usr/lib/frr/zebra"
	frrBgpd  = "/usr/lib/frr/bgpd"
)

// bgpPrefixes are what the isp announces; bgpProbe is an address in one of
// them that the isp holds.
var (
	bgpPrefixes = 8
	bgpProbe    = netip.MustParseAddr("198.18.3.1")
)

const bgpZebraConf = `hostname lab-zebra
log file @DIR@/zebra.log
fpm address 127.0.0.1 port 2620
`

// BGPBgpdConf is FRR bgpd's configuration on the router of the standard
// network with twins: AS 65001 on nf-eth0 (203.0.113.2), eBGP to the isp
// (203.0.113.1, AS 65002), keepalive 3 s, hold 9 s. @DIR@ stands for the
// log directory.
const BGPBgpdConf = `hostname lab-bgpd
log file @DIR@/bgpd.log
router bgp 65001
 bgp router-id 203.0.113.2
 no bgp ebgp-requires-policy
 neighbor 203.0.113.1 remote-as 65002
 neighbor 203.0.113.1 timers 3 9
 neighbor 203.0.113.1 timers connect 1
 address-family ipv4 unicast
  neighbor 203.0.113.1 activate
 exit-address-family
`

// BGPPeerBirdConf is BIRD's configuration on the isp: AS 65002 announcing
// routes (as blackholes of its static protocol "announced", so `birdc
// disable announced` withdraws them) to the router, keepalive 3 s, hold 9 s.
// @DIR@ stands for the log directory.
func BGPPeerBirdConf(routes []netip.Prefix) string {
	var b strings.Builder
	for _, p := range routes {
		fmt.Fprintf(&b, "  route %s blackhole;\n", p)
	}
	return strings.ReplaceAll(bgpBirdConf, "@ROUTES@", b.String())
}

const bgpBirdConf = `log "@DIR@/bird.log" all;
router id 203.0.113.1;
protocol device { }
protocol static announced {
  ipv4;
@ROUTES@}
protocol bgp rtr {
  local 203.0.113.1 as 65002;
  neighbor 203.0.113.2 as 65001;
  hold time 9;
  keepalive time 3;
  connect retry time 1;
  ipv4 { import none; export all; };
}
`

// BGPTools lists what `lab --bgp` needs that may be missing.
func BGPTools() []string {
	var missing []string
	for _, p := range []string{frrZebra, frrBgpd, "vtysh", "bird", "birdc"} {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	return missing
}

type bgpLab struct {
	dir  string
	pids []string // pid files, stopped in reverse order
}

func (d *demo) bgpRun(ns string, args ...string) (string, error) {
	return d.n.Exec(ns, args[0], args[1:]...)
}

// bgpStart writes the configs and starts zebra, bgpd and BIRD.
func (d *demo) bgpStart() error {
	dir, err := os.MkdirTemp("", "netfwd-lab-bgp-")
	if err != nil {
		return err
	}
	os.Chmod(dir, 0o755)
	d.bgp = &bgpLab{dir: dir}
	var routes []netip.Prefix
	for i := range bgpPrefixes {
		routes = append(routes, netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(i), 0}), 24))
	}
	files := map[string]string{
		"zebra.conf": bgpZebraConf, "bgpd.conf": BGPBgpdConf, "bird.conf": BGPPeerBirdConf(routes),
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.ReplaceAll(text, "@DIR@", dir)), 0o644); err != nil {
			return err
		}
	}
	if out, err := exec.Command("chown", "-R", "frr:frr", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("chown frr: %v: %s", err, out)
	}
	isp := d.h["isp"].NS
	if err := d.n.IP(isp, "address", "add", bgpProbe.String()+"/32", "dev", "lo"); err != nil {
		return err
	}
	for _, c := range []struct {
		ns, pid string
		args    []string
	}{
		{d.n.Router, "zebra.pid", []string{frrZebra, "-d", "-M", "dplane_fpm_nl", "-f", dir + "/zebra.conf",
			"-i", dir + "/zebra.pid", "-z", dir + "/zserv.api", "--vty_socket", dir, "-P", "0"}},
		{d.n.Router, "bgpd.pid", []string{frrBgpd, "-d", "-f", dir + "/bgpd.conf", "-i", dir + "/bgpd.pid",
			"-z", dir + "/zserv.api", "--vty_socket", dir, "-P", "0"}},
		{isp, "bird.pid", []string{"bird", "-c", dir + "/bird.conf", "-s", dir + "/bird.ctl", "-P", dir + "/bird.pid"}},
	} {
		if out, err := d.bgpRun(c.ns, c.args...); err != nil {
			return fmt.Errorf("%s: %v: %s", filepath.Base(c.args[0]), err, out)
		}
		d.bgp.pids = append(d.bgp.pids, filepath.Join(dir, c.pid))
	}
	return nil
}

// bgpStop stops the daemons (zebra before netfwd) and removes the directory.
func (d *demo) bgpStop() {
	if d.bgp == nil {
		return
	}
	for i := len(d.bgp.pids) - 1; i >= 0; i-- {
		StopDaemon(d.bgp.pids[i], 5*time.Second)
	}
	os.RemoveAll(d.bgp.dir)
	d.bgp = nil
}

// StopDaemon stops a daemon by its pid file: SIGTERM, then SIGKILL when it
// still runs after wait (an error says so). A missing file or a process
// already gone is not an error.
func StopDaemon(file string, wait time.Duration) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil // never started, or gone
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 || syscall.Kill(pid, syscall.SIGTERM) != nil {
		return nil
	}
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			return nil
		}
	}
	syscall.Kill(pid, syscall.SIGKILL)
	return fmt.Errorf("%s did not stop within %v of SIGTERM (killed)", file, wait)
}

// bgpSession is bgpd's view of the session: state and prefixes received.
func (d *demo) bgpSession() (state string, received int) {
	out, err := d.bgpRun(d.n.Router, "vtysh", "--vty_socket", d.bgp.dir, "-c", "show bgp summary json")
	if err != nil {
		return "", 0
	}
	var sum map[string]struct {
		Peers map[string]struct {
			State  string
			PfxRcd int
		}
	}
	if json.Unmarshal([]byte(out), &sum) != nil {
		return "", 0
	}
	p := sum["ipv4Unicast"].Peers["203.0.113.1"]
	return p.State, p.PfxRcd
}

// learnedRoutes returns netfwd's routes with proto bgp.
func (d *demo) learnedRoutes() []string {
	out, err := d.r.Ctl("route show")
	if err != nil {
		return nil
	}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "proto bgp") {
			lines = append(lines, l)
		}
	}
	return lines
}

// waitFor polls cond for up to timeout.
func (d *demo) waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) || d.ctx.Err() != nil {
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
	return true
}

func (d *demo) printBGPTopology() {
	d.printf(`
  BGP: FRR (zebra + bgpd, AS 65001) in %[1]s on netfwd's twin nf-eth0 203.0.113.2
       <- eBGP, in-band through netfwd's eth0 ->  BIRD (AS 65002) on the isp 203.0.113.1,
       announcing 198.18.0.0/24 .. 198.18.%[2]d.0/24; zebra feeds netfwd over FPM (127.0.0.1:2620)
`, d.n.Router, bgpPrefixes-1)
}

// bgpSteps shows the session, the learned routes, traffic following them
// and a withdrawal.
func (d *demo) bgpSteps() {
	d.section("the router's own BGP daemon, through netfwd's port (host path)")
	d.cmd("ip -n %s -br addr show   # the twins carry netfwd's addresses", d.n.Router)
	if out, err := d.bgpRun(d.n.Router, "ip", "-br", "-4", "addr", "show"); err == nil {
		d.out(out)
	}
	var state string
	var rcvd int
	up := d.waitFor(40*time.Second, func() bool {
		state, rcvd = d.bgpSession()
		return state == "Established" && rcvd == bgpPrefixes
	})
	d.cmd("ip netns exec %s vtysh -c 'show bgp summary'", d.n.Router)
	if out, err := d.bgpRun(d.n.Router, "vtysh", "--vty_socket", d.bgp.dir, "-c", "show bgp summary"); err == nil {
		d.out(out)
	}
	d.check(up, fmt.Sprintf("eBGP FRR <-> BIRD established through netfwd's eth0, %d prefixes received", bgpPrefixes),
		fmt.Sprintf("session %q, %d prefixes", state, rcvd))
	if !up {
		return
	}

	d.section("routes from zebra over FPM")
	var learned []string
	ok := d.waitFor(20*time.Second, func() bool { learned = d.learnedRoutes(); return len(learned) == bgpPrefixes })
	d.cmd("%s ctl --ctl %s route show   # (the proto bgp lines)", d.netfwd, d.rep.CtlPath)
	d.out(strings.Join(learned, "\n"))
	d.check(ok, fmt.Sprintf("netfwd learned the %d prefixes (proto bgp, via 203.0.113.1 dev eth0)", bgpPrefixes),
		fmt.Sprintf("%d learned", len(learned)))
	d.cmd("%s ctl --ctl %s route get %s", d.netfwd, d.rep.CtlPath, bgpProbe)
	got, _ := d.r.Ctl("route get " + bgpProbe.String())
	d.out(got)
	if r, ok := d.ping("h1", bgpProbe, 3, 0); ok {
		d.check(r.Received == 3, fmt.Sprintf("h1 -> %s in a learned prefix: 3 of 3 replies", bgpProbe),
			fmt.Sprintf("got %d replies", r.Received))
	}

	d.section("a withdrawal")
	d.cmd("ip netns exec %s birdc disable announced", d.h["isp"].NS)
	d.bgpRun(d.h["isp"].NS, "birdc", "-s", d.bgp.dir+"/bird.ctl", "disable", "announced")
	ok = d.waitFor(20*time.Second, func() bool { learned = d.learnedRoutes(); return len(learned) == 0 })
	d.check(ok, "the withdrawn routes left netfwd's FIB (traffic follows the default route again)",
		fmt.Sprintf("%d learned routes left", len(learned)))
}
