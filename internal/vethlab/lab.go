// Package vethlab is the scaffolding of packet I/O tests and benchmarks:
// throw-away network namespaces joined by veth pairs (Lab), the
// two-namespace forwarding topology with its Linux baselines (Topology), and
// a built-in AF_PACKET traffic generator and counter (Blaster, Sink). None
// of it is on the datapath; `netfwd-lab`, `netfwd-bench veth` and the
// namespace tests build on it.
package vethlab

// Lab: throw-away network namespaces and veth pairs, built with iproute2
// like a person would. Every name carries a random per-lab prefix so
// parallel runs never collide, and Close removes everything the lab created
// (deleting a namespace destroys the veth ends in it and so their peers). A
// process that dies before Close (a panic, a test timeout) leaves its
// namespaces behind: each lab registers its prefix and pid in LabStateDir,
// and NewLab removes the namespaces of labs whose process is gone.
//
// Locking: mu guards the list of namespaces; a Lab may be used from several
// goroutines.

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/pktio"
)

// Lab owns a set of network namespaces.
type Lab struct {
	// Prefix starts every namespace and interface name of the lab.
	Prefix string

	mu  sync.Mutex
	nss []string // guarded by mu
}

// NewLab returns a lab with a fresh random prefix ("nf" + 6 hex digits).
// It needs root and the ip command.
func NewLab() (*Lab, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("vethlab: network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("vethlab: iproute2 missing: %w", err)
	}
	SweepStaleLabs()
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	l := &Lab{Prefix: "nf" + hex.EncodeToString(b[:])}
	if err := os.MkdirAll(LabStateDir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(LabStateDir, l.Prefix), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return nil, err
	}
	return l, nil
}

// LabStateDir holds one file per live lab: its prefix, containing its pid.
const LabStateDir = "/run/netfwd-labs"

// SweepStaleLabs deletes the namespaces of labs whose process has exited
// without closing them. Labs of live processes are left alone.
func SweepStaleLabs() {
	ents, err := os.ReadDir(LabStateDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		prefix := e.Name()
		b, err := os.ReadFile(filepath.Join(LabStateDir, prefix))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || unix.Kill(pid, 0) != unix.ESRCH {
			continue // alive (or not ours to judge)
		}
		if nss, err := os.ReadDir(filepath.Dir(pktio.NetnsPath("x"))); err == nil {
			for _, ns := range nss {
				if strings.HasPrefix(ns.Name(), prefix) {
					run("ip", "netns", "del", ns.Name())
				}
			}
		}
		os.Remove(filepath.Join(LabStateDir, prefix))
	}
}

// Name returns the lab-unique name for suffix (interface names must stay
// within 15 bytes: keep suffixes to 7).
func (l *Lab) Name(suffix string) string { return l.Prefix + suffix }

// AddNetns creates the namespace Name(suffix), brings its loopback up,
// turns IPv6 off in it (no router solicitations or MLD reports to muddle
// counts; tests that want IPv6 turn it back on) and returns its name.
func (l *Lab) AddNetns(suffix string) (string, error) {
	name := l.Name(suffix)
	if err := l.IP("", "netns", "add", name); err != nil {
		return "", err
	}
	l.mu.Lock()
	l.nss = append(l.nss, name)
	l.mu.Unlock()
	for _, key := range []string{"net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"} {
		if err := l.Sysctl(name, key, "1"); err != nil {
			return "", err
		}
	}
	return name, l.IP(name, "link", "set", "lo", "up")
}

// AddVeth creates a veth pair with ends Name(a) in namespace nsA and Name(b)
// in nsB, both up, and returns the two interface names.
func (l *Lab) AddVeth(nsA, a, nsB, b string) (string, string, error) {
	na, nb := l.Name(a), l.Name(b)
	if len(na) > 15 || len(nb) > 15 {
		return "", "", fmt.Errorf("vethlab: interface names %q/%q longer than 15 bytes", na, nb)
	}
	if err := l.IP(nsA, "link", "add", na, "type", "veth", "peer", "name", nb, "netns", nsB); err != nil {
		return "", "", err
	}
	if err := l.IP(nsA, "link", "set", na, "up"); err != nil {
		return "", "", err
	}
	if err := l.IP(nsB, "link", "set", nb, "up"); err != nil {
		return "", "", err
	}
	// Up is not yet usable: the kernel attaches the real qdisc (until then
	// noop, which drops every frame sent) and sets the operstate from its
	// link-watch work, up to a second later. A measurement started before
	// that sees nothing delivered.
	for _, e := range []struct{ ns, ifname string }{{nsA, na}, {nsB, nb}} {
		if err := waitRunning(e.ns, e.ifname, 5*time.Second); err != nil {
			return "", "", err
		}
	}
	return na, nb, nil
}

// waitRunning waits until ifname in ns is operationally up (IFF_RUNNING).
func waitRunning(ns, ifname string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var running bool
		err := pktio.InNetns(ns, func() error {
			ifi, err := net.InterfaceByName(ifname)
			if err == nil {
				running = ifi.Flags&net.FlagRunning != 0
			}
			return err
		})
		if err != nil || running {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("vethlab: %s in %s not running after %v", ifname, ns, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// IP runs `ip -n ns ARGS...` (plain `ip ARGS...` for ns "").
func (l *Lab) IP(ns string, args ...string) error {
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	return run("ip", args...)
}

// Exec runs a command inside namespace ns and returns its output.
func (l *Lab) Exec(ns string, cmd string, args ...string) ([]byte, error) {
	c := exec.Command("ip", append([]string{"netns", "exec", ns, cmd}, args...)...)
	out, err := c.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("ip netns exec %s %s %s: %w: %s", ns, cmd, strings.Join(args, " "), err, out)
	}
	return out, nil
}

// Sysctl sets a sysctl inside namespace ns (key dotted, as sysctl(8)
// takes it). /proc/sys/net resolves to the namespace of the opening thread.
func (l *Lab) Sysctl(ns, key, value string) error {
	path := "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
	return pktio.InNetns(ns, func() error {
		if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
			return fmt.Errorf("vethlab: sysctl %s=%s in %s: %w", key, value, ns, err)
		}
		return nil
	})
}

// Close deletes every namespace of the lab.
func (l *Lab) Close() error {
	l.mu.Lock()
	nss := l.nss
	l.nss = nil
	l.mu.Unlock()
	var errs []error
	for i := len(nss) - 1; i >= 0; i-- {
		errs = append(errs, l.IP("", "netns", "del", nss[i]))
	}
	if err := os.Remove(filepath.Join(LabStateDir, l.Prefix)); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func run(cmd string, args ...string) error {
	out, err := exec.Command(cmd, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", cmd, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
