package main

// Hot restart end to end: `netfwd restart` starts a new process that takes
// the ports over while the old one forwards a steady UDP stream; every
// datagram arrives, the old process exits 0, the new one answers on the
// same control socket and keeps the learned neighbours.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/handover"
	"github.com/netfwd/netfwd/internal/lab"
	"github.com/netfwd/netfwd/internal/pktio"
)

// udpCounter receives the stream's datagrams in a namespace and keeps
// the count, the distinct sequence numbers and the longest silence.
type udpCounter struct {
	conn    *net.UDPConn
	got     atomic.Uint64
	dup     atomic.Uint64
	maxGap  atomic.Int64 // ns between two arrivals, once the stream ran
	seen    []bool
	stopped chan struct{}
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
				if g := now.Sub(last).Nanoseconds(); g > c.maxGap.Load() {
					c.maxGap.Store(g)
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

// startPacedUDP sends frames 0..total-1 (frame(seq)) from host h at rate
// frames/s in batches; a batch the kernel takes only in part is sent on
// from where it stopped, so every sequence number leaves exactly once. The
// channel gets the outcome when all are sent.
func startPacedUDP(t *testing.T, h *lab.Host, total, rate int, frame func(seq uint64) []byte) <-chan error {
	t.Helper()
	var port *pktio.Port
	err := pktio.InNetns(h.NS, func() error {
		var err error
		port, err = pktio.Open(h.Iface, pktio.Config{BlockSize: 1 << 16, Blocks: 2, Filter: dropAllFilter,
			NotPromiscuous: true, NoOffload: true, Tx: pktio.TxSendmmsg})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	txh, err := port.NewTx()
	if err != nil {
		port.Close()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		defer func() { txh.Close(); port.Shutdown(); port.Close() }()
		const batch = 32
		start := time.Now()
		frames := make([][]byte, 0, batch)
		for seq := 0; seq < total; seq += batch {
			due := start.Add(time.Duration(float64(seq) / float64(rate) * float64(time.Second)))
			time.Sleep(time.Until(due))
			frames = frames[:0]
			for i := seq; i < min(seq+batch, total); i++ {
				frames = append(frames, frame(uint64(i)))
			}
			for tries := 0; len(frames) > 0; tries++ {
				n, err := txh.Send(frames, nil)
				frames = frames[n:]
				if err != nil && tries > 1000 {
					done <- fmt.Errorf("sender: %v", err)
					return
				}
				if len(frames) > 0 {
					time.Sleep(time.Millisecond)
				}
			}
		}
		done <- nil
	}()
	return done
}

// TestHotRestartNoLoss: a hot restart under a 20 kpps routed UDP stream
// loses no datagram; the old process exits cleanly, the new one serves
// the control socket, holds the neighbours the old one learned, and takes
// a second hot restart too.
func TestHotRestartNoLoss(t *testing.T) {
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
	tx := startPacedUDP(t, e.host("a"), total, rate, func(seq uint64) []byte {
		payload := make([]byte, 64-14-28)
		binary.BigEndian.PutUint64(payload, seq)
		return lab.UDPFrame(attackMACpa, aMAC, 0, attackAIP, attackBIP, 64, 4000, 9000, payload)
	})
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
	return newPid
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
