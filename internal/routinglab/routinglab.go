// Package routinglab runs the real routing daemons around netfwd: BIRD in a
// "feed" namespace announces prefixes over eBGP to a router namespace,
// where FRR (zebra with the FPM module, bgpd) or BIRD with its kernel
// protocol learns them. The end-to-end route tests (cmd/netfwd) and
// `netfwd-bench routes` (case bgp-e2e) build on it; netfwd itself is
// started by the caller, in the router namespace, with `--fpm FPMAddr` or
// `--mirror-kernel`.
package routinglab

// Lab: the namespaces, the configs and the daemons of one run.
//
// Flow: New creates the two namespaces (random names, vethlab), the BGP
// session's veth (up0 10.99.0.1/30 in the router, dn0 10.99.0.2/30 in the
// feed: a kernel interface beside netfwd, out of band), a directory user
// frr can read, and BIRD's static routes (feedA.inc: all prefixes but the
// last FeedBSize, feedB.inc: those, so `birdc disable feedB` withdraws
// them). The caller starts the daemons it wants (StartFRR, StartBird) and
// netfwd, and Close stops the daemons in the reverse order of their start
// (zebra 8.4.4 can hang on SIGTERM once its FPM peer is gone, so stop them
// before netfwd: StopDaemons), deletes the namespaces and the directory.
// The daemons are started directly (no systemd), as docs/routes.md shows.
//
// Locking: none; a Lab is driven by one goroutine (the status queries may
// run beside it).

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/netfwd/netfwd/internal/lab"
	"github.com/netfwd/netfwd/internal/vethlab"
)

// FRR's daemons as Debian installs them.
const (
	Zebra = "/usr/lib/frr/zebra"
	Bgpd  = "/usr/lib/frr/bgpd"
)

// FPMAddr is where zebra's config (ZebraConf) looks for netfwd's FPM
// listener, inside the router namespace.
const FPMAddr = "127.0.0.1:2620"

// The BGP session's addresses: the router (AS 65001) and the feed (AS 65002).
const (
	RouterAddr = "10.99.0.1"
	FeedAddr   = "10.99.0.2"
)

// FeedBSize is how many prefixes (the last ones) BIRD's static protocol
// feedB holds; feedA holds the others.
const FeedBSize = 100

// StopWait is how long a daemon gets after SIGTERM before SIGKILL.
const StopWait = 10 * time.Second

// Configurations (docs/routes.md has the same, for people); @DIR@ stands
// for the lab's directory.
const (
	ZebraConf = `hostname rtr-zebra
log file @DIR@/zebra.log
log timestamp precision 3
debug zebra fpm
fpm address 127.0.0.1 port 2620
`
	BgpdConf = `hostname rtr-bgpd
log file @DIR@/bgpd.log
router bgp 65001
 bgp router-id 10.99.0.1
 no bgp ebgp-requires-policy
 neighbor 10.99.0.2 remote-as 65002
 neighbor 10.99.0.2 timers connect 1
 address-family ipv4 unicast
  neighbor 10.99.0.2 activate
 exit-address-family
`
	BirdFeedConf = `log "@DIR@/bird-feed.log" all;
router id 10.99.0.2;
protocol device { }
protocol static feedA {
  ipv4;
  include "@DIR@/feedA.inc";
}
protocol static feedB {
  ipv4;
  include "@DIR@/feedB.inc";
}
protocol bgp up {
  local 10.99.0.2 as 65002;
  neighbor 10.99.0.1 as 65001;
  hold time 240;
  connect retry time 1;
  ipv4 { import none; export all; next hop self; };
}
`
	BirdRtrConf = `log "@DIR@/bird-rtr.log" all;
router id 10.99.0.1;
protocol device { }
protocol kernel k4 {
  ipv4 { import none; export all; };
  learn off;
  scan time 600;
}
protocol bgp dn {
  local 10.99.0.1 as 65001;
  neighbor 10.99.0.2 as 65002;
  hold time 240;
  connect retry time 1;
  ipv4 { import all; export none; };
}
`
)

// BirdFeedDisabled is BirdFeedConf with the BGP session off until `birdc
// enable up`: the caller times the session from a known start, once BIRD
// has loaded its static routes.
var BirdFeedDisabled = strings.Replace(BirdFeedConf, "protocol bgp up {", "protocol bgp up {\n  disabled;", 1)

// Tools lists the commands a lab needs that are missing.
func Tools() []string {
	var missing []string
	for _, p := range []string{"ip", "bird", "birdc", "vtysh", Zebra, Bgpd} {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	return missing
}

// Lab is one run's namespaces, directory and daemons. A Lab made as a
// literal with Rtr and Dir (namespaces and directory of someone else's)
// runs daemons there; Close then leaves both in place.
type Lab struct {
	Rtr, Feed string // namespaces
	// Dir holds the configs, logs, pid files and sockets (traversable by
	// user frr).
	Dir      string
	Prefixes []netip.Prefix // what the feed announces

	veth *vethlab.Lab // the namespaces, when New made them
	pids []string     // pid files of the daemons, in the order of their start
}

// New makes a lab whose feed announces prefixes. On error nothing is left.
func New(prefixes []netip.Prefix) (l *Lab, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("routinglab: needs root (network namespaces)")
	}
	if m := Tools(); len(m) > 0 {
		return nil, fmt.Errorf("routinglab: missing %s", strings.Join(m, ", "))
	}
	v, err := vethlab.NewLab()
	if err != nil {
		return nil, err
	}
	l = &Lab{Prefixes: prefixes, veth: v}
	defer func() {
		if err != nil {
			l.Close()
			l = nil
		}
	}()
	if l.Dir, err = os.MkdirTemp("", "netfwd-routinglab-"); err != nil {
		return l, err
	}
	if err := os.Chmod(l.Dir, 0o755); err != nil {
		return l, err
	}
	if l.Rtr, err = v.AddNetns("rtr"); err != nil {
		return l, err
	}
	if l.Feed, err = v.AddNetns("feed"); err != nil {
		return l, err
	}
	for _, c := range [][]string{
		{l.Rtr, "link", "add", "up0", "type", "veth", "peer", "name", "dn0", "netns", l.Feed},
		{l.Rtr, "address", "add", RouterAddr + "/30", "dev", "up0"},
		{l.Rtr, "link", "set", "up0", "up"},
		{l.Feed, "address", "add", FeedAddr + "/30", "dev", "dn0"},
		{l.Feed, "link", "set", "dn0", "up"},
	} {
		if err := v.IP(c[0], c[1:]...); err != nil {
			return l, err
		}
	}
	var a, b strings.Builder
	for i, p := range prefixes {
		w := &a
		if i >= len(prefixes)-FeedBSize {
			w = &b
		}
		fmt.Fprintf(w, "route %s blackhole;\n", p)
	}
	if err := l.Write("feedA.inc", a.String()); err != nil {
		return l, err
	}
	return l, l.Write("feedB.inc", b.String())
}

// AddNetns adds a namespace to a lab made by New (removed by Close).
func (l *Lab) AddNetns(suffix string) (string, error) {
	if l.veth == nil {
		return "", errors.New("routinglab: the lab does not own its namespaces")
	}
	return l.veth.AddNetns(suffix)
}

// Close stops the daemons and removes what New made.
func (l *Lab) Close() error {
	err := l.StopDaemons()
	if l.veth != nil {
		err = errors.Join(err, l.veth.Close())
		if l.Dir != "" {
			err = errors.Join(err, os.RemoveAll(l.Dir))
		}
		l.veth = nil
	}
	return err
}

// StopDaemons stops every daemon started, the last started first.
func (l *Lab) StopDaemons() error {
	var errs []error
	for i := len(l.pids) - 1; i >= 0; i-- {
		errs = append(errs, lab.StopDaemon(l.pids[i], StopWait))
	}
	l.pids = nil
	return errors.Join(errs...)
}

// Subst fills in the lab's directory.
func (l *Lab) Subst(s string) string { return strings.ReplaceAll(s, "@DIR@", l.Dir) }

// Write writes a file into the lab's directory.
func (l *Lab) Write(name, text string) error {
	return os.WriteFile(filepath.Join(l.Dir, name), []byte(text), 0o644)
}

// Exec runs a command in namespace ns and returns its combined output.
func (l *Lab) Exec(ns string, args ...string) (string, error) {
	out, err := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ip netns exec %s %s: %w: %s", ns, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// PidFile is the pid file of a daemon ("zebra", "bgpd", or a BIRD's name).
func (l *Lab) PidFile(daemon string) string { return filepath.Join(l.Dir, daemon+".pid") }

func (l *Lab) started(daemon string) {
	if f := l.PidFile(daemon); !slices.Contains(l.pids, f) {
		l.pids = append(l.pids, f)
	}
}

// StartFRR writes zebra's and bgpd's configs (ZebraConf, BgpdConf) and
// starts both in the router namespace, as user frr.
func (l *Lab) StartFRR() error {
	if err := l.WriteFRR(ZebraConf, BgpdConf); err != nil {
		return err
	}
	if err := l.StartZebra(); err != nil {
		return err
	}
	return l.StartBgpd()
}

// WriteFRR writes zebra's and bgpd's configs and gives the directory to
// user frr.
func (l *Lab) WriteFRR(zebra, bgpd string) error {
	if err := l.Write("zebra.conf", l.Subst(zebra)); err != nil {
		return err
	}
	if err := l.Write("bgpd.conf", l.Subst(bgpd)); err != nil {
		return err
	}
	if out, err := exec.Command("chown", "-R", "frr:frr", l.Dir).CombinedOutput(); err != nil {
		return fmt.Errorf("chown frr: %v: %s", err, out)
	}
	return nil
}

// StartZebra starts zebra with the FPM module (it connects to FPMAddr).
func (l *Lab) StartZebra() error {
	_, err := l.Exec(l.Rtr, Zebra, "-d", "-M", "dplane_fpm_nl", "-f", l.Dir+"/zebra.conf", "-i", l.PidFile("zebra"),
		"-z", l.Dir+"/zserv.api", "--vty_socket", l.Dir, "-P", "0", "-s", "90000000")
	if err == nil {
		l.started("zebra")
	}
	return err
}

// StartBgpd starts bgpd.
func (l *Lab) StartBgpd() error {
	_, err := l.Exec(l.Rtr, Bgpd, "-d", "-f", l.Dir+"/bgpd.conf", "-i", l.PidFile("bgpd"), "-z", l.Dir+"/zserv.api",
		"--vty_socket", l.Dir, "-P", "0")
	if err == nil {
		l.started("bgpd")
	}
	return err
}

// Stop stops one daemon by its name.
func (l *Lab) Stop(daemon string) error { return lab.StopDaemon(l.PidFile(daemon), StopWait) }

// StartBird writes conf as NAME.conf and starts BIRD with it in ns; its
// control socket is NAME.ctl (Birdc).
func (l *Lab) StartBird(ns, name, conf string) error {
	if err := l.Write(name+".conf", l.Subst(conf)); err != nil {
		return err
	}
	_, err := l.Exec(ns, "bird", "-c", l.Dir+"/"+name+".conf", "-s", l.Dir+"/"+name+".ctl", "-P", l.PidFile(name))
	if err == nil {
		l.started(name)
	}
	return err
}

// Birdc runs a birdc command on the BIRD named name in ns.
func (l *Lab) Birdc(ns, name string, args ...string) (string, error) {
	return l.Exec(ns, append([]string{"birdc", "-s", l.Dir + "/" + name + ".ctl"}, args...)...)
}

// Vtysh runs one vtysh command on the router's FRR.
func (l *Lab) Vtysh(command string) (string, error) {
	return l.Exec(l.Rtr, "vtysh", "--vty_socket", l.Dir, "-c", command)
}

// Staticd is FRR's static route daemon.
const Staticd = "/usr/lib/frr/staticd"

// StartStaticd writes conf (@DIR@ filled in) as staticd.conf and starts
// staticd in the router namespace (zebra runs already). Its `ip route ...
// table N` routes reach kernel table N and the FPM with RTA_TABLE in the
// default VRF: no VRF device needed (FRR 8.4).
func (l *Lab) StartStaticd(conf string) error {
	if err := l.Write("staticd.conf", l.Subst(conf)); err != nil {
		return err
	}
	if out, err := exec.Command("chown", "-R", "frr:frr", l.Dir).CombinedOutput(); err != nil {
		return fmt.Errorf("chown frr: %v: %s", err, out)
	}
	_, err := l.Exec(l.Rtr, Staticd, "-d", "-f", l.Dir+"/staticd.conf", "-i", l.PidFile("staticd"), "-z", l.Dir+"/zserv.api",
		"--vty_socket", l.Dir, "-P", "0")
	if err == nil {
		l.started("staticd")
	}
	return err
}
