package main

// Hot restarts that fail, end to end, under traffic: a successor that
// stalls after the pause (it stops itself, SIGSTOP, as a page-fault storm
// or a debugger would stop it) costs at most CommitTimeout of forwarding,
// and, woken up later, exits without reading a ring; a successor of
// another protocol version is refused before anything pauses. Either way
// the running daemon forwards on and keeps its sockets' names.

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/handover"
	"github.com/netfwd/netfwd/internal/lab"
)

// Hooks of a hot restart's new process in the test binary (netfwd itself
// has none). A successor gets the running daemon's environment: set for
// the running daemon, they act in its successor (--takeover) only.
const (
	// stopAfterPauseEnv=1: the successor stops itself (SIGSTOP) right
	// after the pause, before its commit.
	stopAfterPauseEnv = "NETFWD_TEST_STOP_AFTER_PAUSE"
	// handoverProtocolEnv=M.N: the successor speaks handover protocol M.N.
	handoverProtocolEnv = "NETFWD_TEST_HANDOVER_PROTOCOL"
)

// successorTestHooks installs the hooks for a `run --takeover` command
// line (TestMain, before dispatch).
func successorTestHooks(args []string) {
	if len(args) == 0 || args[0] != "run" || !slices.Contains(args, "--takeover") {
		return
	}
	if os.Getenv(stopAfterPauseEnv) == "1" {
		afterPause = func() {
			// A stop signal stops a multi-threaded process asynchronously:
			// the thread that sent it may run on into the commit before
			// the group stop reaches it (CI saw a commit 3 s late that the
			// old daemon took). Sleeping here lets the stop land first.
			syscall.Kill(os.Getpid(), syscall.SIGSTOP)
			time.Sleep(200 * time.Millisecond)
		}
	}
	if v := os.Getenv(handoverProtocolEnv); v != "" {
		p, err := handover.ParseVersion(v)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		handover.Protocol = p
	}
}

// failedRestartTraffic is the stream the failed restarts run under: a
// routed UDP flow a -> b at rate until stop, every datagram numbered.
type failedRestartTraffic struct {
	rate int
	rx   *udpCounter
	sent atomic.Uint64
	stop atomic.Bool
	done <-chan error
}

func startFailedRestartTraffic(t *testing.T, e *e2e, rate int) *failedRestartTraffic {
	t.Helper()
	const most = 120 // seconds: the stream ends before
	tr := &failedRestartTraffic{rate: rate}
	tr.rx = startUDPCounter(t, e.host("b").NS, 9000, rate*most)
	aMAC, err := net.ParseMAC(attackMACa)
	if err != nil {
		t.Fatal(err)
	}
	tr.done = startPacedUDP(t, e.host("a"), rate*most, rate,
		lab.UDPFrame(attackMACpa, aMAC, 0, attackAIP, attackBIP, 64, 4000, 9000, make([]byte, 64-14-28)), &tr.sent, &tr.stop)
	return tr
}

// finish stops the stream and returns the datagrams sent and lost.
func (tr *failedRestartTraffic) finish(t *testing.T) (sent, lost int) {
	t.Helper()
	tr.stop.Store(true)
	if err := <-tr.done; err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	tr.rx.close()
	sent = int(tr.sent.Load())
	for i := range sent {
		if !tr.rx.seen[i] {
			lost++
		}
	}
	return sent, lost
}

// startRestart runs `netfwd restart` (this test binary) in the background;
// its output may be read while it runs (a failure message), so it goes to
// a syncBuffer.
func (e *e2e) startRestart() (*exec.Cmd, *syncBuffer) {
	e.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		e.t.Fatal(err)
	}
	cmd := exec.Command(exe, "restart", "--ctl", e.CtlPath)
	cmd.Env = append(os.Environ(), "NETFWD_TEST_MAIN=1")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	return cmd, out
}

// procStat is a process's parent pid and state letter (R, S, T, Z, ...);
// ok is false when it is gone.
func procStat(pid int) (ppid int, state byte, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 2 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	return ppid, f[0][0], true
}

// successorOf is the child of `netfwd restart` (pid) that runs
// `run --takeover` (0: none yet). Not just any child: before its first
// fork, Go's os/exec probes clone(CLONE_PIDFD) with a child that exits at
// once (syscall.checkClonePidfd); CI once took that probe for the
// successor and found it "gone". The probe shares its parent's memory, so
// its command line is restart's.
func successorOf(pid int) int {
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		c, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		if pp, _, ok := procStat(c); !ok || pp != pid {
			continue
		}
		argv, err := os.ReadFile("/proc/" + ent.Name() + "/cmdline")
		if err == nil && slices.Contains(strings.Split(string(argv), "\x00"), "--takeover") {
			return c
		}
	}
	return 0
}

// TestHotRestartStalledSuccessor: a new process that stops right after
// the pause (SIGSTOP, before its commit) stops the router for at most
// CommitTimeout, not PauseTimeout (10 s, before protocol 1.1): the old
// daemon resumes forwarding while the successor is still stopped. Woken
// up (SIGCONT), the successor finds its commit not taken and exits 1
// without having read a ring: `netfwd restart` says it failed and the old
// pid forwards on; the old daemon still owns the ports and the sockets'
// names (ctl, handover) and exits 0 at the end.
func TestHotRestartStalledSuccessor(t *testing.T) {
	t.Setenv(stopAfterPauseEnv, "1") // for the daemon's successor, through its environment
	e := newE2EArgs(t, attackNet(), nil, "--workers", "2")
	e.pingOK("a", attackBIP, 63)
	oldPid := e.daemonPid()
	const rate = 5000
	tr := startFailedRestartTraffic(t, e, rate)
	time.Sleep(time.Second)

	restart, out := e.startRestart()
	restartDone := make(chan error, 1)
	go func() { restartDone <- restart.Wait() }()
	defer func() { // whatever fails: nothing stays stopped
		if restart.ProcessState == nil {
			restart.Process.Kill()
		}
	}()
	// The successor: the restart's child, stopped once it paused the
	// daemon (its start takes seconds: engine, FIB).
	var succ int
	var stoppedAt time.Time
	for deadline := time.Now().Add(90 * time.Second); stoppedAt.IsZero(); time.Sleep(2 * time.Millisecond) {
		if succ == 0 {
			succ = successorOf(restart.Process.Pid)
		} else if _, st, ok := procStat(succ); !ok {
			t.Fatalf("the successor (pid %d) is gone before it stopped; restart: %s\nlog:\n%s", succ, out, lastBytes(e.stderr.String(), 4000))
		} else if st == 'T' {
			stoppedAt = time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("no stopped successor after 90 s (pid %d)\nlog:\n%s", succ, lastBytes(e.stderr.String(), 4000))
		}
	}
	defer syscall.Kill(succ, syscall.SIGCONT)
	t.Logf("successor pid %d stopped after the pause", succ)

	// The old daemon resumes on its own, while the successor stays stopped.
	ok, why := eventually(3*time.Second, func() (bool, string) {
		return strings.Contains(e.stderr.String(), "did not commit within the deadline"), "no resume logged"
	})
	if !ok {
		t.Fatalf("%s 3 s after the successor stopped\nlog:\n%s", why, lastBytes(e.stderr.String(), 4000))
	}
	time.Sleep(time.Until(stoppedAt.Add(1500 * time.Millisecond)))
	got0 := tr.rx.got.Load()
	time.Sleep(500 * time.Millisecond)
	got1 := tr.rx.got.Load()
	if _, st, _ := procStat(succ); st != 'T' {
		t.Fatalf("the successor is in state %c, not stopped: the check means nothing", st)
	}
	t.Logf("successor stopped 1.5-2 s: b received %d datagrams (%d/s sent)", got1-got0, rate)
	if got1-got0 < rate/4 {
		t.Errorf("the old daemon does not forward while the successor is stopped: %d datagrams in 500 ms", got1-got0)
	}

	// Woken up, the successor finds its commit not taken and exits.
	if err := syscall.Kill(succ, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var rerr error
	select {
	case rerr = <-restartDone:
	case <-time.After(30 * time.Second):
		t.Fatalf("netfwd restart still waits 30 s after SIGCONT: %s", out)
	}
	said := strings.TrimSpace(out.String())
	t.Logf("netfwd restart: %v: %s", rerr, said)
	if code := restart.ProcessState.ExitCode(); code != 1 ||
		!strings.Contains(said, fmt.Sprintf("the new process (pid %d) failed", succ)) ||
		!strings.Contains(said, "did not take the commit") || !strings.HasSuffix(said, fmt.Sprintf("pid %d forwards on", oldPid)) {
		t.Errorf("netfwd restart exited %d saying %q; want 1, the new process failed: ... did not take the commit ...; pid %d forwards on", code, said, oldPid)
	}
	if _, _, alive := procStat(succ); alive {
		t.Errorf("the successor (pid %d) still exists", succ)
	}
	if pid, err := handoverPeerPid(e.CtlPath); err != nil || pid != oldPid {
		t.Errorf("the handover socket answers from pid %d (%v), want the old daemon's %d", pid, err, oldPid)
	}
	e.ctl("link show") // the control socket still answers, the old daemon's
	if !e.alive() {
		t.Fatal("the old daemon exited")
	}

	time.Sleep(time.Second)
	sent, lost := tr.finish(t)
	log := e.stderr.String()
	t.Logf("%d datagrams at %d/s: %d lost (%.0f ms of traffic), longest silence at b %.0f ms, %d duplicated",
		sent, rate, lost, float64(lost)*1000/rate, float64(tr.rx.maxGap.Load())/1e6, tr.rx.dup.Load())
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "hot restart") || strings.Contains(l, "handover") {
			t.Log(l)
		}
	}
	// At most ~1 s: CommitTimeout (500 ms) beyond the pause, part of it
	// held in the rings.
	if lost > rate || time.Duration(tr.rx.maxGap.Load()) > time.Second {
		t.Errorf("a stalled successor cost %d datagrams (%.0f ms of traffic), a %v silence: want at most 1 s",
			lost, float64(lost)*1000/rate, time.Duration(tr.rx.maxGap.Load()).Round(time.Millisecond))
	}
	if tr.rx.dup.Load() != 0 {
		t.Errorf("%d datagrams duplicated", tr.rx.dup.Load())
	}
	if !strings.Contains(log, "the running netfwd did not take the commit") {
		t.Errorf("the successor did not log why it gave up")
	}
	if strings.Contains(log, "hot restart: took over") || strings.Contains(log, "a new process took the ports over") {
		t.Errorf("the stalled successor took over")
	}
}

// TestHotRestartVersionRefused: a new process that speaks another major
// version of the handover protocol is refused at prepare: `netfwd
// restart` exits 1 naming both versions, nothing paused (0 datagrams
// lost), and the old daemon keeps the ports and the sockets' names.
func TestHotRestartVersionRefused(t *testing.T) {
	t.Setenv(handoverProtocolEnv, "2.0") // for the daemon's successor, through its environment
	e := newE2EArgs(t, attackNet(), nil, "--workers", "2")
	e.pingOK("a", attackBIP, 63)
	oldPid := e.daemonPid()
	const rate = 5000
	tr := startFailedRestartTraffic(t, e, rate)
	time.Sleep(time.Second)
	restart, out := e.startRestart()
	err := restart.Wait()
	said := strings.TrimSpace(out.String())
	t.Logf("netfwd restart: %v: %s", err, said)
	want := fmt.Sprintf("handover protocol: this netfwd speaks 2.0, the running one %v; ", handover.Protocol)
	if restart.ProcessState.ExitCode() != 1 || !strings.Contains(said, want) || !strings.HasSuffix(said, fmt.Sprintf("pid %d forwards on", oldPid)) {
		t.Errorf("netfwd restart said %q, want exit 1 with %q ... pid %d forwards on", said, want, oldPid)
	}
	time.Sleep(time.Second)
	if pid, err := handoverPeerPid(e.CtlPath); err != nil || pid != oldPid {
		t.Errorf("the handover socket answers from pid %d (%v), want the old daemon's %d", pid, err, oldPid)
	}
	e.ctl("link show")
	sent, lost := tr.finish(t)
	t.Logf("%d datagrams at %d/s: %d lost, longest silence at b %.1f ms", sent, rate, lost, float64(tr.rx.maxGap.Load())/1e6)
	if lost != 0 || tr.rx.dup.Load() != 0 {
		t.Errorf("a refused restart lost %d, duplicated %d datagrams", lost, tr.rx.dup.Load())
	}
	if log := e.stderr.String(); !strings.Contains(log, "handover: refused a successor") || strings.Contains(log, "handover: the successor") {
		t.Errorf("the old daemon's log does not say it refused (or says it paused):\n%s", lastBytes(log, 3000))
	}
}
