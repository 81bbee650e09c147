package daemon

// Reloading a full routing table in bounded memory: the daemon runs as its
// own process (the test binary re-executed: TestReloadMemoryDaemon) with
// one veth port and the full Internet table as routes through it, as a
// user runs `netfwd run`. It is reloaded with the file unchanged (a comment
// appended) and with a few lines changed; its peak resident size during
// each reload (VmHWM, reset before) must stay within twice its resident
// size before the reload, and the routes must then be what the file says.
// Under the race detector (CI) only the routes are checked.
//
//	sudo go test -run ReloadFullTable -v ./internal/daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/ctlsock"
	"github.com/netfwd/netfwd/internal/fulltable"
	"github.com/netfwd/netfwd/internal/testenv"
)

// reloadChildEnv makes the test binary the daemon: "NETNS CONFIG SOCKET".
const reloadChildEnv = "NETFWD_RELOAD_DAEMON"

// TestReloadMemoryDaemon is the daemon process of TestReloadFullTableMemory
// (skipped when run by itself).
func TestReloadMemoryDaemon(t *testing.T) {
	arg := os.Getenv(reloadChildEnv)
	if arg == "" {
		t.Skip("the daemon process of TestReloadFullTableMemory")
	}
	f := strings.Fields(arg)
	d, err := New(Options{Netns: f[0], ConfigFile: f[1], Ctl: f[2],
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	fmt.Println("ready")
	if err := d.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// raceEnabled: under the race detector, memory figures say little (its
// shadow memory follows the heap's peak and is never returned).
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// procStatus reads one "Vm..." line of /proc/PID/status, in bytes.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return 0
}

// writeTable writes the config: the port's address and one route per
// prefix through the gateway (gw for the prefixes in other), skipping drop.
func writeTable(t *testing.T, file, port string, pfx []netip.Prefix, other map[netip.Prefix]bool, drop netip.Prefix, extra ...string) {
	t.Helper()
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "address add 203.0.113.2/24 dev %s\n", port)
	for _, p := range pfx {
		gw := "203.0.113.1"
		if other[p] {
			gw = "203.0.113.9"
		}
		if p != drop {
			fmt.Fprintf(w, "route add %s via %s dev %s\n", p, gw, port)
		}
	}
	for _, l := range extra {
		fmt.Fprintln(w, l)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer collects the daemon's log while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var reloadedLog = regexp.MustCompile(`msg=reloaded .* removed=(\d+) added=(\d+) redone=(\d+) steps=(\d+)`)

func TestReloadFullTableMemory(t *testing.T) {
	testenv.RequireRoot(t)
	pfx, err := fulltable.Load()
	if err != nil {
		t.Fatal(err)
	}
	race := raceEnabled()
	if race {
		// The race detector makes the daemon ~6x slower and its memory
		// figures meaningless: the routes are checked on 500,000 prefixes
		// (~70 s instead of ~130 s).
		pfx = pfx[:500_000]
	}
	ns := testenv.Netns(t, "nfreload")
	port := "up0"
	testenv.Run(t, "ip", "-n", ns, "link", "add", port, "type", "veth", "peer", "name", "up1")
	for _, l := range []string{port, "up1"} {
		testenv.Run(t, "ip", "-n", ns, "link", "set", l, "up")
	}
	dir := t.TempDir()
	conf, sock := filepath.Join(dir, "full.conf"), filepath.Join(dir, "ctl.sock")
	writeTable(t, conf, port, pfx, nil, netip.Prefix{})

	// The daemon.
	t0 := time.Now()
	cmd := exec.Command(os.Args[0], "-test.run=^TestReloadMemoryDaemon$")
	cmd.Env = append(os.Environ(), reloadChildEnv+"="+ns+" "+conf+" "+sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
			t.Errorf("the daemon did not stop on SIGTERM")
		}
	})
	ready := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- l
		io.Copy(io.Discard, stdout)
	}()
	select {
	case l := <-ready:
		if strings.TrimSpace(l) != "ready" {
			t.Fatalf("daemon: %q\n%s", l, logs.String())
		}
	case <-time.After(10 * time.Minute):
		t.Fatalf("the daemon did not load the table in 10 minutes\n%s", logs.String())
	}
	pid := cmd.Process.Pid
	t.Logf("%d routes loaded in %v", len(pfx), time.Since(t0).Round(time.Millisecond))

	// reload reloads and checks the memory and what the daemon applied.
	reload := func(what string, wantSteps int) {
		t.Helper()
		before := procStatus(t, pid, "VmRSS")
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
			t.Fatal(err) // resets VmHWM to the current RSS
		}
		n := len(reloadedLog.FindAllString(logs.String(), -1))
		start := time.Now()
		if _, err := ctlsock.Do(sock, []string{"reload"}, false); err != nil {
			t.Fatalf("reload (%s): %v", what, err)
		}
		took := time.Since(start)
		peak, after := procStatus(t, pid, "VmHWM"), procStatus(t, pid, "VmRSS")
		t.Logf("reload (%s): %v; RSS before %d MiB, peak %d MiB (%.2fx), after %d MiB", what, took.Round(time.Millisecond),
			before>>20, peak>>20, float64(peak)/float64(before), after>>20)
		m := reloadedLog.FindAllStringSubmatch(logs.String(), -1)
		if len(m) != n+1 {
			t.Fatalf("reload (%s): no log line of it\n%s", what, logs.String())
		}
		if steps, _ := strconv.Atoi(m[n][4]); steps != wantSteps {
			t.Errorf("reload (%s): %s, want %d steps", what, m[n][0], wantSteps)
		}
		switch {
		case race:
			t.Logf("race detector: the memory bound is not checked")
		case peak > 2*before:
			t.Errorf("reload (%s): peak RSS %d MiB is more than twice the %d MiB before it", what, peak>>20, before>>20)
		}
	}

	// Unchanged: nothing to do.
	f, err := os.OpenFile(conf, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "# unchanged")
	f.Close()
	reload("unchanged", 0)

	// A few lines changed: one route through another gateway, one gone,
	// one new.
	changed, gone := pfx[len(pfx)/3], pfx[2*len(pfx)/3]
	added := netip.MustParsePrefix("198.18.0.0/15")
	writeTable(t, conf, port, pfx, map[netip.Prefix]bool{changed: true}, gone, "route add "+added.String()+" via 203.0.113.1 dev "+port)
	reload("3 lines changed", 4) // the changed route's removal and addition, the gone one's removal, the new one

	// The routes are the file's.
	get := func(a netip.Addr) (prefix, gateway string) {
		out, err := ctlsock.Do(sock, []string{"route get " + a.String()}, true)
		if err != nil {
			t.Fatalf("route get %s: %v", a, err)
		}
		var r struct{ Prefix, Gateway, Error string }
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("route get %s: %q: %v", a, out, err)
		}
		return r.Prefix, r.Gateway
	}
	for _, c := range []struct {
		p      netip.Prefix
		gw     string
		absent bool
	}{{p: changed, gw: "203.0.113.9"}, {p: gone, absent: true}, {p: added, gw: "203.0.113.1"},
		{p: pfx[0], gw: "203.0.113.1"}, {p: pfx[len(pfx)-1], gw: "203.0.113.1"}} {
		prefix, gw := get(c.p.Addr())
		if c.absent && prefix == c.p.String() || !c.absent && (prefix != c.p.String() || gw != c.gw) {
			t.Errorf("route get %s: prefix %s via %s, want %s via %s (absent: %v)", c.p.Addr(), prefix, gw, c.p, c.gw, c.absent)
		}
	}
}
