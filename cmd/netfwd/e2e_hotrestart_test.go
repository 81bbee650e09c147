package main

// Hot restart end to end: `netfwd restart` starts a new process that takes
// the ports over while the old one forwards a steady UDP stream; every
// datagram arrives, the old process exits 0, the new one answers on the
// same control socket and keeps the learned neighbours.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/netfwd/netfwd/bench"
	"github.com/netfwd/netfwd/internal/handover"
	"github.com/netfwd/netfwd/internal/lab"
	"github.com/netfwd/netfwd/internal/pktio"
	"golang.org/x/sys/unix"
)

// udpCounter receives the stream's datagrams in a namespace and keeps
// the count, the distinct sequence numbers and the longest silence.
type udpCounter struct {
	conn    *net.UDPConn
	got     atomic.Uint64
	dup     atomic.Uint64
	maxGap  atomic.Int64 // ns between two arrivals, once the stream ran
	gapEnd  atomic.Int64 // unix ns of the arrival that ended the longest gap
	seen    []bool
	stopped chan struct{}
	// silences are the gaps of more than 5 ms between two arrivals
	// (start, length), for locating a loss in time; guarded by mu.
	mu       sync.Mutex
	silences []silence
}

type silence struct {
	at  time.Time
	gap time.Duration
}

func startUDPCounter(t *testing.T, ns string, port int, max int) *udpCounter {
	t.Helper()
	c := &udpCounter{seen: make([]bool, max), stopped: make(chan struct{})}
	err := pktio.InNetns(ns, func() error {
		var err error
		c.conn, err = net.ListenUDP("udp4", &net.UDPAddr{Port: port})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	c.conn.SetReadBuffer(16 << 20)
	go func() {
		defer close(c.stopped)
		buf := make([]byte, 2048)
		var last time.Time
		for {
			n, err := c.conn.Read(buf)
			if err != nil {
				return
			}
			now := time.Now()
			if !last.IsZero() {
				if g := now.Sub(last); g > 5*time.Millisecond {
					c.mu.Lock()
					if len(c.silences) < 1000 {
						c.silences = append(c.silences, silence{last, g})
					}
					c.mu.Unlock()
				}
				if g := now.Sub(last).Nanoseconds(); g > c.maxGap.Load() {
					c.maxGap.Store(g)
					c.gapEnd.Store(now.UnixNano())
				}
			}
			last = now
			if n < 8 {
				continue
			}
			seq := binary.BigEndian.Uint64(buf[:8])
			if seq < uint64(len(c.seen)) {
				if c.seen[seq] {
					c.dup.Add(1)
				}
				c.seen[seq] = true
			}
			c.got.Add(1)
		}
	}()
	return c
}

func (c *udpCounter) close() {
	c.conn.Close()
	<-c.stopped
}

// TestHotRestartNoLoss: a hot restart under a 20 kpps routed UDP stream
// loses no datagram; the old process exits cleanly, the new one serves
// the control socket, holds the neighbours the old one learned, and takes
// a second hot restart too.
func TestHotRestartNoLoss(t *testing.T) { testHotRestartNoLoss(t) }

// TestHotRestartAFXDP: the same with AF_XDP ports: the successor maps the
// old process's UMEM (its memfd) and continues its XDP sockets' rings, the
// program stays attached (its link taken over), and no datagram is lost.
func TestHotRestartAFXDP(t *testing.T) {
	t.Setenv("NETFWD_TEST_IO", "afxdp")
	testHotRestartNoLoss(t)
}

func testHotRestartNoLoss(t *testing.T) {
	exe := optimizedNetfwd(t)
	e := newE2EExe(t, attackNet(), nil, exe, "--workers", "2")
	e.pingOK("a", attackBIP, 63)
	aMAC, err := net.ParseMAC(attackMACa)
	if err != nil {
		t.Fatal(err)
	}
	const rate, seconds = 20000, 4
	const total = rate * seconds
	rx := startUDPCounter(t, e.host("b").NS, 9000, total+1000)
	defer rx.close()
	var sent atomic.Uint64
	tx := startPacedUDP(t, e.host("a"), total, rate, lab.UDPFrame(attackMACpa, aMAC, 0, attackAIP, attackBIP, 64, 4000, 9000, make([]byte, 64-14-28)), &sent, nil)
	pids := []int{e.daemonPid()}
	for round := range 2 {
		time.Sleep(1200 * time.Millisecond)
		out, err := exec.Command(exe, "restart", "--ctl", e.CtlPath).CombinedOutput()
		if err != nil {
			t.Fatalf("round %d: netfwd restart: %v\n%s\nlog:\n%s", round, err, out, lastBytes(e.stderr.String(), 6000))
		}
		var newPid, oldPid int
		if _, err := fmt.Sscanf(strings.TrimSpace(string(out)), "netfwd restarted: pid %d took over from pid %d", &newPid, &oldPid); err != nil {
			t.Fatalf("round %d: restart said %q", round, out)
		}
		if oldPid != pids[len(pids)-1] {
			t.Errorf("round %d: took over from pid %d, the daemon was %d", round, oldPid, pids[len(pids)-1])
		}
		pids = append(pids, newPid)
		t.Cleanup(func() { syscall.Kill(newPid, syscall.SIGTERM) })
		checkForwardingPriority(t, newPid) // round 1's predecessor leads an autogroup of its own
		if round == 0 {
			select { // the first daemon is the harness's child: its status is ours to see
			case <-e.exited:
				if st := e.cmd.ProcessState; !st.Success() {
					t.Errorf("the old daemon exited with %v", st)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the old daemon still runs 10 s after the restart returned")
			}
		} else if processAlive(oldPid) {
			t.Errorf("round %d: pid %d still runs after the restart returned", round, oldPid)
		}
		if pid, err := handoverPeerPid(e.CtlPath); err != nil || pid != newPid {
			t.Errorf("round %d: the handover socket answers from pid %d (%v), want %d", round, pid, err, newPid)
		}
		neigh := e.ctl("neigh show dev pb")
		if !strings.Contains(neigh, attackBIP.String()) {
			t.Errorf("round %d: the new daemon lost the neighbour %s: %q", round, attackBIP, neigh)
		}
	}
	if err := <-tx; err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	rx.close() // the receiver has stopped: its counts are final
	missing := 0
	for i := range total {
		if !rx.seen[i] {
			missing++
		}
	}
	log := e.stderr.String()
	t.Logf("%d datagrams at %d/s across 2 hot restarts: %d missing, %d duplicated, longest silence %.2f ms; %s",
		total, rate, missing, rx.dup.Load(), float64(rx.maxGap.Load())/1e6, takeoverGaps(log))
	if missing != 0 || rx.dup.Load() != 0 {
		t.Errorf("%d of %d datagrams lost, %d duplicated across the hot restarts", missing, total, rx.dup.Load())
	}
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "hot restart") {
			t.Log(l)
		}
	}
	if !strings.Contains(log, "a new process took the ports over") {
		t.Errorf("the old daemon did not log the handover")
	}
	// The last daemon is not the harness's child: stop it here.
	last := pids[len(pids)-1]
	syscall.Kill(last, syscall.SIGTERM)
	for deadline := time.Now().Add(10 * time.Second); processAlive(last) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if processAlive(last) {
		t.Errorf("pid %d did not stop on SIGTERM", last)
	}
}

// hotRestart runs `netfwd restart` (the daemon's own binary) and waits
// until the old daemon, the harness's child, has exited cleanly. The new
// one is stopped (SIGTERM, then waited for) when the test ends, before the
// twins are removed.
func (e *e2e) hotRestart() int {
	t := e.t
	t.Helper()
	exe := e.Exe
	if exe == "" {
		exe, _ = os.Executable()
	}
	cmd := exec.Command(exe, "restart", "--ctl", e.CtlPath)
	cmd.Env = append(os.Environ(), "NETFWD_TEST_MAIN=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("netfwd restart: %v\n%s\nlog:\n%s", err, out, lastBytes(e.stderr.String(), 6000))
	}
	var newPid, oldPid int
	if _, err := fmt.Sscanf(strings.TrimSpace(string(out)), "netfwd restarted: pid %d took over from pid %d", &newPid, &oldPid); err != nil {
		t.Fatalf("netfwd restart said %q", out)
	}
	t.Cleanup(func() {
		syscall.Kill(newPid, syscall.SIGTERM)
		for deadline := time.Now().Add(10 * time.Second); processAlive(newPid) && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
	})
	if oldPid == e.daemonPid() {
		select {
		case <-e.exited:
		case <-time.After(10 * time.Second):
			t.Fatal("the old daemon still runs 10 s after the restart returned")
		}
	}
	checkForwardingPriority(t, newPid)
	return newPid
}

// checkForwardingPriority: every thread of pid runs at this test's own
// priority, which the harness's daemon inherited and each successor takes
// from its predecessor, not at the background priority a successor
// starts at (nice 19: internal/daemon/priority.go).
func checkForwardingPriority(t *testing.T, pid int) {
	t.Helper()
	want, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range ents {
		tid, _ := strconv.Atoi(ent.Name())
		got, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			continue // exited meanwhile
		}
		if got.Policy != want.Policy || got.Nice != want.Nice {
			t.Errorf("pid %d thread %d forwards at policy %d nice %d, want policy %d nice %d (the predecessor's)",
				pid, tid, got.Policy, got.Nice, want.Policy, want.Nice)
		}
	}
	// Its autogroup (a session of its own, netfwd restart's setsid) at
	// the nice of the predecessor's, the harness's daemon's: this
	// test's. It prepared at 19 (internal/daemon/autogroup.go).
	if b, err := os.ReadFile("/proc/sys/kernel/sched_autogroup_enabled"); err != nil || strings.TrimSpace(string(b)) != "1" {
		return
	}
	wantGroup, gotGroup := autogroupNice(t, "self"), autogroupNice(t, strconv.Itoa(pid))
	if gotGroup != wantGroup {
		t.Errorf("pid %d forwards in an autogroup at nice %q, want %q (the predecessor's)", pid, gotGroup, wantGroup)
	}
}

// autogroupNice is the nice of process pid's autogroup ("self" for this
// one): "0" in init's default group, whose file is empty (a process no
// setsid moved out of it: CI runners started by PID 1).
func autogroupNice(t *testing.T, pid string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/autogroup")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	switch {
	case len(f) == 0:
		return "0"
	case len(f) == 3 && f[1] == "nice":
		return f[2]
	}
	t.Fatalf("/proc/%s/autogroup: unexpected %q", pid, b)
	return ""
}

// freezeDaemon stops the harness's daemon for d (SIGSTOP, SIGCONT).
func (e *e2e) freezeDaemon(d time.Duration) {
	pid := e.daemonPid()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		e.t.Fatal(err)
	}
	time.Sleep(d)
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		e.t.Fatal(err)
	}
}

// TestHotRestartConcurrent: three `netfwd restart`s at once. One takes
// over; each other one says "another restart (pid N) is in progress", N
// the new process that took over, and exits 1 (or, come after that one
// finished, restarts it in turn). None fails otherwise: they used to exit
// 1 with `read: connection reset by peer` on the handover socket's
// temporary name, queued behind the first until the old process exited.
func TestHotRestartConcurrent(t *testing.T) {
	e := newE2E(t, lab.Standard(), nil)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		out  string
		code int
	}
	results := make([]result, 3)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(exe, "restart", "--ctl", e.CtlPath)
			cmd.Env = append(os.Environ(), "NETFWD_TEST_MAIN=1")
			out, _ := cmd.CombinedOutput()
			results[i] = result{strings.TrimSpace(string(out)), cmd.ProcessState.ExitCode()}
		}()
	}
	wg.Wait()
	tookOver := map[int]bool{}
	var busy []int
	for i, r := range results {
		var newPid, oldPid, pid int
		switch {
		case r.code == 0:
			if _, err := fmt.Sscanf(r.out, "netfwd restarted: pid %d took over from pid %d", &newPid, &oldPid); err != nil {
				t.Errorf("restart %d: exit 0, said %q", i, r.out)
				continue
			}
			tookOver[newPid] = true
			t.Cleanup(func() {
				syscall.Kill(newPid, syscall.SIGTERM)
				for deadline := time.Now().Add(10 * time.Second); processAlive(newPid) && time.Now().Before(deadline); {
					time.Sleep(20 * time.Millisecond)
				}
			})
		case r.code == 1:
			if _, err := fmt.Sscanf(r.out, "netfwd restart: another restart (pid %d) is in progress", &pid); err != nil ||
				r.out != fmt.Sprintf("netfwd restart: another restart (pid %d) is in progress", pid) {
				t.Errorf("restart %d: exit 1, said %q, want another restart (pid N) is in progress", i, r.out)
				continue
			}
			busy = append(busy, pid)
		default:
			t.Errorf("restart %d: exit %d: %q", i, r.code, r.out)
		}
	}
	t.Logf("took over: %v; refused naming: %v", tookOver, busy)
	if len(tookOver) == 0 {
		t.Fatalf("no restart took over: %+v\nlog:\n%s", results, lastBytes(e.stderr.String(), 4000))
	}
	for _, pid := range busy {
		if !tookOver[pid] {
			t.Errorf("a restart was refused naming pid %d, which did not take over (%v)", pid, tookOver)
		}
	}
	// Started together, they overlap: before the refusal each new process
	// took over from the one before, all three "from" the first daemon.
	if len(busy) == 0 {
		t.Errorf("none of 3 simultaneous restarts found another in progress: %+v", results)
	}
	select {
	case <-e.exited:
		if st := e.cmd.ProcessState; !st.Success() {
			t.Errorf("the old daemon exited with %v", st)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the old daemon still runs 10 s after the restarts returned")
	}
	if pid, err := handoverPeerPid(e.CtlPath); err != nil || !tookOver[pid] {
		t.Errorf("the handover socket answers from pid %d (%v), want one that took over (%v)", pid, err, tookOver)
	}
	e.pingOK("h1", h3IP, 63)
}

// takeoverGaps lists the gaps the new daemons logged.
func takeoverGaps(log string) string {
	var gaps []string
	for _, l := range strings.Split(log, "\n") {
		if i := strings.Index(l, "takeover_gap="); i >= 0 {
			f := strings.Fields(l[i:])[0]
			gaps = append(gaps, f)
		}
	}
	return strings.Join(gaps, " ")
}

// processAlive: pid exists and is not a zombie.
func processAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && len(b) > i+2 {
		return b[i+2] != 'Z'
	}
	return true
}

// handoverPeerPid is the pid behind the handover socket of ctl.
func handoverPeerPid(ctl string) (int, error) { return handoverPeer(handover.Path(ctl)) }

// TestHotRestartRate measures a hot restart under load (a measurement for
// docs/reliability.md, run by hand: NETFWD_HOTRESTART_RATE=frames/s, 0 for
// as fast as the generator goes): 64-byte UDP from a to b for 3 s without
// and 3 s with a hot restart 1 s in; for each window the frames sent, the
// frames b's interface received (what the router forwarded), and the
// difference of the losses in milliseconds of traffic.
// NETFWD_HOTRESTART_REPEAT=N runs N such rounds (N hot restarts);
// NETFWD_HOTRESTART_ARGS adds daemon flags.
func TestHotRestartRate(t *testing.T) {
	v := os.Getenv("NETFWD_HOTRESTART_RATE")
	if v == "" {
		t.Skip("a measurement: set NETFWD_HOTRESTART_RATE (frames/s, 0: the generator's maximum)")
	}
	rate, err := strconv.Atoi(v)
	if err != nil {
		t.Fatal(err)
	}
	// NETFWD_HOTRESTART_FREEZE=DURATION: window B stops the running daemon
	// (SIGSTOP) for DURATION instead of restarting it: what a warm
	// process's rings and catch-up absorb, to set beside a takeover's gap.
	var freeze time.Duration
	if v := os.Getenv("NETFWD_HOTRESTART_FREEZE"); v != "" {
		if freeze, err = time.ParseDuration(v); err != nil {
			t.Fatalf("NETFWD_HOTRESTART_FREEZE: %v", err)
		}
	}
	exe := optimizedNetfwd(t)
	// NETFWD_HOTRESTART_ARGS: more flags for the daemon ("--fib trie", ...).
	args := append([]string{"--workers", "2"}, strings.Fields(os.Getenv("NETFWD_HOTRESTART_ARGS"))...)
	e := newE2EExe(t, attackNet(), nil, exe, args...)
	e.pingOK("a", attackBIP, 63)
	b := e.host("b")
	// The sink on b: a bound socket (no ICMP port unreachable, nor ARP,
	// from b). It reads and times the arrivals only with
	// NETFWD_HOTRESTART_SILENCES set: a reader at 100 kpps takes a good
	// part of a core on this machine, from the generator and the router.
	// With NETFWD_HOTRESTART_SINK=tc, b drops every frame at its tcx
	// ingress instead (the NDR suite's sink): on veth the sink's receive
	// path runs in the router's transmit system calls, and a socket's
	// costs more than a drop.
	var rx *udpCounter
	if os.Getenv("NETFWD_HOTRESTART_SINK") == "tc" {
		_, detach, err := bench.TCDropSink(b.NS, b.Iface)
		if err != nil {
			t.Fatal(err)
		}
		defer detach()
	} else if os.Getenv("NETFWD_HOTRESTART_SILENCES") != "" {
		rx = startUDPCounter(t, b.NS, 9000, 0)
		defer rx.close()
	} else {
		var sink *net.UDPConn
		if err := pktio.InNetns(b.NS, func() (err error) {
			sink, err = net.ListenUDP("udp4", &net.UDPAddr{Port: 9000})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		defer sink.Close()
	}
	aMAC, _ := net.ParseMAC(attackMACa)
	template := lab.UDPFrame(attackMACpa, aMAC, 0, attackAIP, attackBIP, 64, 4000, 9000, make([]byte, 64-14-28))
	rxPackets := func() uint64 { return ifaceRxPackets(t, b.NS, b.Iface) }
	// The generator runs as a real-time thread (e2e_paced_sender_test.go):
	// a tester keeps its pace whatever the router's processes do. With
	// NETFWD_HOTRESTART_GENERATOR=normal it shares the CPUs as an ordinary
	// thread (the measurement before 2026-12-06's evening), and falls
	// behind while the successor starts, then sends what it owes at once.
	realtime := rate > 0 && os.Getenv("NETFWD_HOTRESTART_GENERATOR") != "normal"
	var gen pacedStats
	window := func(restart bool) (sent, got uint64, d time.Duration) {
		var n atomic.Uint64
		var stop atomic.Bool
		rx0 := rxPackets()
		t0 := time.Now()
		total := 1 << 30
		if rate > 0 {
			total = rate * 3
		}
		gen.reset()
		done := startPacedUDPWith(t, e.host("a"), total, rate, template, &n, pacedOptions{stop: &stop, realtime: realtime, stats: &gen})
		time.Sleep(100 * time.Millisecond)
		if rx != nil {
			rx.maxGap.Store(0) // the silence between the windows is not the router's
		}
		if restart {
			time.Sleep(time.Second)
			if freeze > 0 {
				e.freezeDaemon(freeze)
			} else {
				e.hotRestart()
			}
		}
		if rate == 0 {
			time.Sleep(time.Until(t0.Add(3 * time.Second)))
			stop.Store(true)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		d = time.Since(t0)
		time.Sleep(300 * time.Millisecond)
		return n.Load(), rxPackets() - rx0, d
	}
	// NETFWD_HOTRESTART_REPEAT rounds, each a window without and one with
	// a hot restart: one figure is a hypothesis on these machines.
	rounds := 1
	if v := os.Getenv("NETFWD_HOTRESTART_REPEAT"); v != "" {
		if rounds, err = strconv.Atoi(v); err != nil || rounds < 1 {
			t.Fatalf("NETFWD_HOTRESTART_REPEAT=%q", v)
		}
	}
	var extras []string
	for r := 1; r <= rounds; r++ {
		logged := len(e.stderr.String())
		sA, gA, dA := window(false)
		lateA := gen.maxLate.Load()
		var gapA int64
		var nSil int
		if rx != nil {
			gapA = rx.maxGap.Swap(0)
			rx.mu.Lock()
			nSil = len(rx.silences)
			rx.mu.Unlock()
		}
		tx0, backlog0 := e.scrape().Sum("netfwd_port_tx_drops_total"), softnetDrops(t)
		sB, gB, dB := window(true)
		if rate > 0 {
			t.Logf("round %d: generator (real-time %v) at most %.1f ms behind its schedule without a restart, %.1f ms (%.0f frames owed at once, at %s) with one", r, realtime,
				float64(lateA)/1e6, float64(gen.maxLate.Load())/1e6, float64(gen.maxLate.Load())/1e9*float64(rate), time.Unix(0, gen.maxLateAt.Load()).UTC().Format("15:04:05.000"))
		}
		// Where window B's frames were lost: the rings (the new daemon
		// reads the same sockets, so its count holds what the old one had
		// not read), the transmit side, or a CPU's backlog
		// (netdev_max_backlog).
		m := e.scrape()
		t.Logf("round %d, window B: ring drops counted by the new process %.0f, tx drops %.0f, backlog drops %d", r,
			m.Sum("netfwd_pktio_ring_drops_total"), m.Sum("netfwd_port_tx_drops_total")-tx0, softnetDrops(t)-backlog0)
		if rx != nil {
			rx.mu.Lock()
			sils := slices.Clone(rx.silences[nSil:])
			rx.mu.Unlock()
			for _, sl := range sils {
				t.Logf("silence at b from %s for %.1f ms", sl.at.UTC().Format("15:04:05.000"), float64(sl.gap)/1e6)
			}
			t.Logf("longest silence at b: %.1f ms without a restart, %.1f ms with one, ending %s", float64(gapA)/1e6, float64(rx.maxGap.Load())/1e6,
				time.Unix(0, rx.gapEnd.Load()).UTC().Format("15:04:05.000"))
		}
		log := e.stderr.String()[logged:]
		for _, l := range strings.Split(log, "\n") {
			if strings.Contains(l, "hot restart") || strings.Contains(l, "shutting down") || strings.Contains(l, "stopped") || strings.Contains(l, "running") || strings.Contains(l, "overflowed") {
				t.Log(l)
			}
		}
		lossA, lossB := int64(sA)-int64(gA), int64(sB)-int64(gB)
		perMs := float64(sB) / float64(dB.Milliseconds())
		t.Logf("round %d, rate %s: without restart sent %d in %v (%.0f kpps), router delivered %d (%.0f kpps), lost %d; with a hot restart sent %d in %v, delivered %d, lost %d; extra loss %d frames = %.2f ms of traffic; %s",
			r, v, sA, dA.Round(time.Millisecond), float64(sA)/dA.Seconds()/1e3, gA, float64(gA)/dA.Seconds()/1e3, lossA,
			sB, dB.Round(time.Millisecond), gB, lossB, lossB-lossA, float64(lossB-lossA)/perMs, takeoverGaps(log))
		extras = append(extras, fmt.Sprintf("%d/%d", lossA, lossB))
	}
	t.Logf("rate %s, %d rounds, lost without/with a hot restart: %s", v, rounds, strings.Join(extras, " "))
}

// ifaceRxPackets is the receive packet counter of iface in namespace ns.
func ifaceRxPackets(t *testing.T, ns, iface string) uint64 {
	t.Helper()
	out := testenvRun(t, "ip", "-n", ns, "-j", "-s", "link", "show", "dev", iface)
	var ls []struct {
		Stats64 struct{ Rx struct{ Packets uint64 } }
	}
	if err := json.Unmarshal([]byte(out), &ls); err != nil || len(ls) != 1 {
		t.Fatalf("ip -s link: %v %q", err, out)
	}
	return ls[0].Stats64.Rx.Packets
}

// testenvRun runs a command and returns its output (fatal on error).
func testenvRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return string(out)
}

// softnetDrops sums the frames the CPUs' backlogs dropped
// (/proc/net/softnet_stat, second column; not per namespace).
func softnetDrops(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/net/softnet_stat")
	if err != nil {
		t.Fatal(err)
	}
	var sum uint64
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseUint(f[1], 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		sum += v
	}
	return sum
}
