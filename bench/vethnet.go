package bench

// vethNet: the veth suite's topology and one measurement on it.
//
//	H1 (trafgen on h1) --veth-- (ra) R (rb) --veth-- (h2) H2 (XDP counter)
//
// trafgen (netsniff-ng) sends 64-byte UDP frames (60 bytes + FCS) of 16
// flows 10.81.1.2 -> 10.81.2.2 from H1; the router namespace R forwards
// them (Linux, netfwd, the reflector) to 10.81.2.2 at H2's MAC; a tc
// program on h2 counts and drops them, the same cheap receiver for every
// forwarder. For the ceiling an XDP_DROP counter sits on ra instead:
// nothing is forwarded, and what it counts is what the generator can push
// into R; for the generator's own cost a tc counter on ra (sink.go).
//
// One measurement: trafgen sends a fixed number of frames and exits (with
// native XDP on ra one of its sender processes may abort with TX_RING
// EAGAIN while the other keeps sending, so the run lasts until the last
// one exits); rate = frames counted / (trafgen's exit - the first frame
// counted). The offered count is h1's transmit counter; the CPU time of
// the whole machine (/proc/stat, all CPUs, everything but idle) is taken
// from trafgen's start to its exit, less the background: what the machine
// (other jobs, an idle forwarder) used per second in the 200 ms before. On
// a shared machine that background moves, so the CPU time of the processes
// involved is taken too: trafgen (its rusage, senders included), the
// forwarder's process or thread, and the ksoftirqd threads (softirq work
// the kernel defers). On veth nearly all forwarding work runs in one of
// them; other jobs do not count.
//
// Locking: none; one goroutine.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/vethlab"
)

// Addresses and the MACs netfwd uses on its routed ports.
var (
	vethH1IP  = "10.81.1.2"
	vethH2IP  = "10.81.2.2"
	vethFAMAC = net.HardwareAddr{0x02, 0x6e, 0x66, 0x00, 0x01, 0x0a}
	vethFBMAC = net.HardwareAddr{0x02, 0x6e, 0x66, 0x00, 0x01, 0x0b}
)

type vethNet struct {
	lab                 *vethlab.Lab
	h1, r, h2           string // namespaces
	h1if, ra, rb, h2if  string // interfaces
	h1MAC, raMAC, h2MAC net.HardwareAddr
	sink                *sink
	dir, trafgenConf    string
	dstMAC              net.HardwareAddr // what trafgen addresses
}

// counterAt is where a topology counts frames.
type counterAt int

const (
	countAtH2        counterAt = iota // tc counter on h2: what was forwarded
	countAtRouterXDP                  // XDP_DROP counter on ra: the ceiling
	countAtRouterTC                   // tc counter on ra: the generator's own cost
)

// newVethNet builds the topology with its counter; dst is the MAC trafgen
// sends to (nil: ra's).
func newVethNet(at counterAt, dst net.HardwareAddr) (*vethNet, error) {
	l, err := vethlab.NewLab()
	if err != nil {
		return nil, err
	}
	n := &vethNet{lab: l}
	if err := n.build(at, dst); err != nil {
		n.close()
		return nil, err
	}
	return n, nil
}

func (n *vethNet) build(at counterAt, dst net.HardwareAddr) error {
	l := n.lab
	var err error
	for _, p := range []struct {
		ns     *string
		suffix string
	}{{&n.h1, "H1"}, {&n.r, "R"}, {&n.h2, "H2"}} {
		if *p.ns, err = l.AddNetns(p.suffix); err != nil {
			return err
		}
	}
	if n.h1if, n.ra, err = l.AddVeth(n.h1, "h1", n.r, "ra"); err != nil {
		return err
	}
	if n.rb, n.h2if, err = l.AddVeth(n.r, "rb", n.h2, "h2"); err != nil {
		return err
	}
	if n.h1MAC, err = macOf(n.h1, n.h1if); err != nil {
		return err
	}
	if n.raMAC, err = macOf(n.r, n.ra); err != nil {
		return err
	}
	if n.h2MAC, err = macOf(n.h2, n.h2if); err != nil {
		return err
	}
	switch at {
	case countAtRouterXDP:
		n.sink, err = newSink(n.r, n.ra, sinkXDP)
	case countAtRouterTC:
		n.sink, err = newSink(n.r, n.ra, sinkTC)
	default:
		n.sink, err = newSink(n.h2, n.h2if, sinkTC)
	}
	if err != nil {
		return err
	}
	n.dstMAC = dst
	if n.dstMAC == nil {
		n.dstMAC = n.raMAC
	}
	if n.dir, err = os.MkdirTemp("", "netfwd-veth-"); err != nil {
		return err
	}
	// 14 + 20 + 8 + 18 = 60 bytes: a 64-byte frame on the wire.
	conf := fmt.Sprintf(`{
  eth(da=%s, sa=%s),
  ipv4(saddr=%s, daddr=%s, ttl=64),
  udp(sp=dinc(10000, 10015), dp=9),
  fill(0x00, 18)
}
`, n.dstMAC, n.h1MAC, vethH1IP, vethH2IP)
	n.trafgenConf = filepath.Join(n.dir, "udp64.trafgen")
	return os.WriteFile(n.trafgenConf, []byte(conf), 0o644)
}

// linuxRouter makes R a Linux router: addresses, ip_forward, and the same
// permanent neighbour netfwd gets.
func (n *vethNet) linuxRouter() error {
	for _, args := range [][]string{
		{"addr", "add", "10.81.1.1/24", "dev", n.ra},
		{"addr", "add", "10.81.2.1/24", "dev", n.rb},
		{"neigh", "add", vethH2IP, "lladdr", n.h2MAC.String(), "dev", n.rb, "nud", "permanent"},
	} {
		if err := n.lab.IP(n.r, args...); err != nil {
			return err
		}
	}
	return n.lab.Sysctl(n.r, "net.ipv4.ip_forward", "1")
}

// netfwdConfig is netfwd's configuration for R: the same routed ports and
// neighbour as the Linux router, on netfwd's own MACs.
func (n *vethNet) netfwdConfig() string {
	return fmt.Sprintf(`# netfwd bench veth: R routes between two routed ports
link set %[1]s address %[2]s
address add 10.81.1.1/24 dev %[1]s
link set %[3]s address %[4]s
address add 10.81.2.1/24 dev %[3]s
neigh add %[5]s lladdr %[6]s dev %[3]s nud permanent
`, n.ra, vethFAMAC, n.rb, vethFBMAC, vethH2IP, n.h2MAC)
}

func (n *vethNet) close() error {
	if n.sink != nil {
		n.sink.close()
	}
	if n.dir != "" {
		os.RemoveAll(n.dir)
	}
	return n.lab.Close()
}

func macOf(ns, iface string) (net.HardwareAddr, error) {
	var mac net.HardwareAddr
	err := pktio.InNetns(ns, func() error {
		ifi, err := net.InterfaceByName(iface)
		if err == nil {
			mac = ifi.HardwareAddr
		}
		return err
	})
	return mac, err
}

// genSpec says how trafgen runs.
type genSpec struct {
	frames uint64
	procs  int     // trafgen -P (1: pinned to CPU 0 by trafgen)
	pps    float64 // 0: as fast as it goes
	warmup bool    // no CPU accounting (skips the background sample)
}

// runResult is one measurement.
type runResult struct {
	offered, delivered uint64
	elapsed            time.Duration // first frame counted .. trafgen's exit
	machineCPU         time.Duration // all CPUs, non-idle, over the run, background removed
	background         float64       // CPUs busy before the run (other jobs)
	procCPU            time.Duration // trafgen + forwarder + ksoftirqd over the run
	genSideCPU         time.Duration // trafgen + ksoftirqd/0: onecore, all of CPU 0's share
	fwdDrops           uint64        // frames the forwarder says it dropped (when it can)
	diag               fwdDiag       // the forwarder's own counters over the run (when fwdDropsKnown)
	fwdDropsKnown      bool
	genFailed          bool // a trafgen process exited with an error
}

func (r runResult) pps() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.delivered) / r.elapsed.Seconds()
}

func (r runResult) String() string {
	s := fmt.Sprintf("%.3f Mpps (%d of %d in %v)", r.pps()/1e6, r.delivered, r.offered, r.elapsed.Round(time.Millisecond))
	if r.fwdDropsKnown {
		s += fmt.Sprintf(", forwarder dropped %d (fill ring empty %d), %.1f frames/kick",
			r.fwdDrops, r.diag.fillEmpty, ratioF(r.diag.sent, r.diag.kicks))
		if r.diag.waits != 0 {
			s += fmt.Sprintf(", %.2f wake-ups/kframe", 1000*ratioF(r.diag.blocked, r.diag.sent))
		}
	}
	if r.genFailed {
		s += ", a trafgen sender aborted"
	}
	if r.offered != 0 && r.genSideCPU != 0 {
		s += fmt.Sprintf(", generator side %.0f ns/frame", perFrame(r.genSideCPU, r.offered))
	}
	return s
}

// measure runs trafgen once and counts; fwdCPU (nil: none) reads the
// forwarder's CPU time.
func (n *vethNet) measure(g genSpec, fwdCPU func() time.Duration) (runResult, error) {
	var r runResult
	c0, err := n.sink.Count()
	if err != nil {
		return r, err
	}
	tx0, err := txPackets(n.h1, n.h1if)
	if err != nil {
		return r, err
	}
	args := []string{"netns", "exec", n.h1, "trafgen", "--dev", n.h1if, "--conf", n.trafgenConf,
		"-n", strconv.FormatUint(g.frames, 10), "--no-sock-mem", "-P", strconv.Itoa(g.procs)}
	if g.pps > 0 {
		args = append(args, "-b", fmt.Sprintf("%.0fpps", g.pps))
	}
	cmd := exec.Command("ip", args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	// Its own process group: trafgen's sender processes outlive a parent
	// that aborts, and the run lasts until the last of them exits.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if !g.warmup {
		bg0, t0 := machineCPU(), time.Now()
		time.Sleep(200 * time.Millisecond)
		r.background = float64(machineCPU()-bg0) / float64(time.Since(t0))
	}
	var f0 time.Duration
	if fwdCPU != nil {
		f0 = fwdCPU()
	}
	ks0, ksCPU0 := ksoftirqdCPU(), ksoftirqd0CPU()
	cpu0 := machineCPU()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return r, fmt.Errorf("trafgen: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	gen := genCPU{pid: cmd.Process.Pid, last: map[int]time.Duration{}}
	first := time.Time{}
	var werr error
	tick := time.NewTicker(time.Millisecond)
	parentDone := false
	deadline := time.Now().Add(5 * time.Minute)
	for ticks := 0; ; ticks++ {
		select {
		case werr = <-exited:
			parentDone = true
		case <-tick.C:
		}
		if first.IsZero() {
			if c, err := n.sink.Count(); err == nil && c != c0 {
				first = time.Now()
			}
		}
		if ticks%5 == 0 || parentDone {
			gen.sample(parentDone)
		}
		if parentDone && (gen.allExited() || time.Now().After(deadline)) {
			break
		}
	}
	tick.Stop()
	end := time.Now()
	r.machineCPU = machineCPU() - cpu0 - time.Duration(r.background*float64(end.Sub(start)))
	r.procCPU = ksoftirqdCPU() - ks0
	if fwdCPU != nil {
		r.procCPU += fwdCPU() - f0
	}
	genTotal := gen.total(cmd.ProcessState)
	r.procCPU += genTotal
	r.genSideCPU = genTotal + ksoftirqd0CPU() - ksCPU0
	if first.IsZero() {
		first = start
	}
	r.elapsed = end.Sub(first)
	time.Sleep(50 * time.Millisecond) // frames in flight
	c1, err := n.sink.Count()
	if err != nil {
		return r, err
	}
	tx1, err := txPackets(n.h1, n.h1if)
	if err != nil {
		return r, err
	}
	r.delivered, r.offered = c1-c0, tx1-tx0
	if werr != nil {
		// trafgen says so when a sender hit TX_RING EAGAIN (native XDP
		// behind the veth): the others went on; a run that sent nothing
		// at all is an error.
		r.genFailed = true
		if r.offered == 0 {
			return r, fmt.Errorf("trafgen: %v: %s", werr, strings.TrimSpace(out.String()))
		}
	}
	return r, nil
}

// txPackets is the transmit packet counter of iface in ns.
func txPackets(ns, iface string) (uint64, error) {
	st, err := linkStats(ns, iface)
	return st.Tx.Packets, err
}

// linkStats64 is the part of `ip -j -s link show`'s stats64 the suite reads.
type linkStats64 struct {
	Rx struct {
		Packets uint64 `json:"packets"`
		Dropped uint64 `json:"dropped"`
		Missed  uint64 `json:"missed"`
	} `json:"rx"`
	Tx struct {
		Packets uint64 `json:"packets"`
		Dropped uint64 `json:"dropped"`
	} `json:"tx"`
}

// linkStats reads an interface's counters in namespace ns.
func linkStats(ns, iface string) (linkStats64, error) {
	out, err := exec.Command("ip", "-n", ns, "-j", "-s", "link", "show", "dev", iface).Output()
	if err != nil {
		return linkStats64{}, fmt.Errorf("ip -s link show %s: %w", iface, err)
	}
	var links []struct {
		Stats64 linkStats64 `json:"stats64"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		return linkStats64{}, fmt.Errorf("ip -j -s link show %s: %v: %s", iface, err, out)
	}
	return links[0].Stats64, nil
}

// machineCPU is the non-idle CPU time of all CPUs since boot (/proc/stat:
// user, nice, system, irq, softirq, steal), in USER_HZ (100 Hz) ticks.
func machineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var ticks uint64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, _ := strconv.ParseUint(f[i], 10, 64)
		ticks += v
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// genCPU follows the CPU time of trafgen's processes. The parent's
// rusage covers the senders it waited for; a sender that outlived an
// aborting parent (an orphan) is sampled from /proc every 5 ms while it
// runs, and its last sample is added.
type genCPU struct {
	pid     int
	senders []int // trafgen's children, found once they exist
	orphans []int // senders still running when the parent exited
	last    map[int]time.Duration
	scanned bool // the process group was scanned for senders (allExited)
}

func (g *genCPU) sample(parentDone bool) {
	if !parentDone && len(g.senders) == 0 {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", g.pid, g.pid))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				g.senders = append(g.senders, pid)
			}
		}
	}
	if parentDone && g.orphans == nil {
		g.orphans = []int{}
		for _, pid := range g.senders {
			if unix.Kill(pid, 0) == nil {
				g.orphans = append(g.orphans, pid)
			}
		}
	}
	for _, pid := range g.senders {
		if d := statCPU(fmt.Sprintf("/proc/%d/stat", pid)); d > g.last[pid] {
			g.last[pid] = d
		}
	}
}

// allExited reports whether trafgen and all its senders have exited. A
// sender whose parent aborted is an orphan that init must reap; until then
// it is a zombie that still counts in its process group (kill -0 works),
// and in containers whose init reaps late that added a second or more of
// nothing to every run with an aborted sender. Zombies count as exited.
func (g *genCPU) allExited() bool {
	if unix.Kill(-g.pid, 0) == unix.ESRCH {
		return true
	}
	if !g.scanned {
		g.scanned = true // the parent may have died before its children were seen
		for _, pid := range processGroup(g.pid) {
			if !slices.Contains(g.senders, pid) && pid != g.pid {
				g.senders = append(g.senders, pid)
				if g.orphans != nil {
					g.orphans = append(g.orphans, pid)
				}
			}
		}
	}
	for _, pid := range g.senders {
		if st := procState(pid); st != 0 && st != 'Z' && st != 'X' {
			return false
		}
	}
	// No sender left running; anything else in the group (ip netns exec's
	// own process) is the parent, which has exited.
	return true
}

// procState is the state letter of /proc/PID/stat (0: no such process).
func procState(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	_, rest, ok := strings.Cut(string(b), ") ")
	if !ok || rest == "" {
		return 0
	}
	return rest[0]
}

// processGroup lists the processes of group pgid (/proc scan).
func processGroup(pgid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		_, rest, ok := strings.Cut(string(b), ") ")
		f := strings.Fields(rest)
		if !ok || len(f) < 3 {
			continue
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid {
			out = append(out, pid)
		}
	}
	return out
}

// total is the parent's rusage (itself and the senders it waited for)
// plus the orphans' last samples.
func (g *genCPU) total(ps *os.ProcessState) time.Duration {
	var d time.Duration
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		d = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	for _, pid := range g.orphans {
		d += g.last[pid]
	}
	return d
}

// statCPU is utime+stime of a /proc/.../stat file (a process or a thread).
func statCPU(path string) time.Duration {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	_, rest, ok := strings.Cut(string(b), ") ") // comm may hold spaces
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseUint(f[11], 10, 64)
	k, _ := strconv.ParseUint(f[12], 10, 64)
	return time.Duration(u+k) * 10 * time.Millisecond
}

// ksoftirqdCPU is the CPU time of the ksoftirqd threads.
func ksoftirqdCPU() time.Duration {
	var d time.Duration
	for _, pid := range ksoftirqdPIDs() {
		d += statCPU("/proc/" + pid + "/stat")
	}
	return d
}

// ksoftirqd0CPU is the CPU time of ksoftirqd/0: CPU 0's deferred softirq
// work (onecore: the generator's CPU, where veth's receive NAPI runs).
func ksoftirqd0CPU() time.Duration {
	for _, pid := range ksoftirqdPIDs() {
		if b, err := os.ReadFile("/proc/" + pid + "/comm"); err == nil && strings.TrimSpace(string(b)) == "ksoftirqd/0" {
			return statCPU("/proc/" + pid + "/stat")
		}
	}
	return 0
}

var ksoftirqd []string

func ksoftirqdPIDs() []string {
	if ksoftirqd != nil {
		return ksoftirqd
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if b, err := os.ReadFile("/proc/" + e.Name() + "/comm"); err == nil && strings.HasPrefix(string(b), "ksoftirqd/") {
			ksoftirqd = append(ksoftirqd, e.Name())
		}
	}
	return ksoftirqd
}

// haveTrafgen reports whether netsniff-ng's trafgen is installed.
func haveTrafgen() error {
	if _, err := exec.LookPath("trafgen"); err != nil {
		return errors.New("trafgen not installed (apt-get install netsniff-ng)")
	}
	return nil
}
