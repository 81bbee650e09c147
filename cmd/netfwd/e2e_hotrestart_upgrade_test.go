package main

// The upgrade a hot restart exists for: a running daemon built from an
// earlier commit of this repository (upgradeFrom: handover protocol 1.0,
// no version fields, no commit) taken over by the current netfwd under
// traffic, with AF_PACKET and with AF_XDP ports: every datagram arrives,
// or the current netfwd refuses cleanly, naming both protocol versions,
// and the old daemon forwards on without a loss.

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/handover"
	"github.com/netfwd/netfwd/internal/lab"
	"github.com/netfwd/netfwd/internal/testenv"
)

// upgradeFrom is the commit the upgrade test's running daemon is built
// from: main before the versioned handover (protocol 1.0: it sends no
// version and knows no commit).
const upgradeFrom = "0c89dec"

// TestHotRestartUpgrade: `netfwd restart` with the current binary takes
// over from a daemon built at upgradeFrom (one build for both I/O kinds;
// skipped where git or the history is missing) under a 20 kpps routed UDP
// stream: 0 datagrams lost and the new process serves the sockets, or a
// refusal that names both versions, 0 lost, and the old one serves them.
func TestHotRestartUpgrade(t *testing.T) {
	testenv.RequireRoot(t, "ping") // before a minute of building
	old := buildNetfwdAt(t, upgradeFrom)
	cur := optimizedNetfwd(t)
	for _, io := range []string{"afpacket", "afxdp"} {
		t.Run(io, func(t *testing.T) {
			t.Setenv("NETFWD_TEST_IO", io)
			testUpgrade(t, old, cur)
		})
	}
}

func testUpgrade(t *testing.T, old, cur string) {
	e := newE2EExe(t, attackNet(), nil, old, "--workers", "2")
	e.pingOK("a", attackBIP, 63)
	oldPid := e.daemonPid()
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
	time.Sleep(1200 * time.Millisecond)
	cmd := exec.Command(cur, "restart", "--ctl", e.CtlPath)
	out, rerr := cmd.CombinedOutput()
	said := strings.TrimSpace(string(out))
	t.Logf("netfwd restart (current) of pid %d (%s): %v: %s", oldPid, upgradeFrom, rerr, said)
	refusal := fmt.Sprintf("handover protocol: this netfwd speaks %v, the running one ", handover.Protocol)
	newPid := 0
	switch {
	case rerr == nil:
		var from int
		if _, err := fmt.Sscanf(said, "netfwd restarted: pid %d took over from pid %d", &newPid, &from); err != nil || from != oldPid {
			t.Fatalf("restart said %q", said)
		}
		t.Cleanup(func() {
			syscall.Kill(newPid, syscall.SIGTERM)
			for deadline := time.Now().Add(10 * time.Second); processAlive(newPid) && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond)
			}
			if processAlive(newPid) {
				t.Errorf("pid %d did not stop on SIGTERM", newPid)
			}
		})
		select {
		case <-e.exited:
			if st := e.cmd.ProcessState; !st.Success() {
				t.Errorf("the old daemon exited with %v", st)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the old daemon still runs 10 s after the restart returned")
		}
	case cmd.ProcessState.ExitCode() == 1 && strings.Contains(said, refusal):
		t.Logf("refused: the versions are not compatible")
		newPid = oldPid
	default:
		t.Fatalf("netfwd restart: %v: %s\nlog:\n%s", rerr, said, lastBytes(e.stderr.String(), 6000))
	}
	if pid, err := handoverPeerPid(e.CtlPath); err != nil || pid != newPid {
		t.Errorf("the handover socket answers from pid %d (%v), want %d", pid, err, newPid)
	}
	if neigh := e.ctl("neigh show dev pb"); !strings.Contains(neigh, attackBIP.String()) {
		t.Errorf("the daemon (pid %d) lost the neighbour %s: %q", newPid, attackBIP, neigh)
	}
	if err := <-tx; err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	rx.close()
	missing := 0
	for i := range total {
		if !rx.seen[i] {
			missing++
		}
	}
	log := e.stderr.String()
	t.Logf("%d datagrams at %d/s across the upgrade: %d missing, %d duplicated, longest silence %.2f ms; %s",
		total, rate, missing, rx.dup.Load(), float64(rx.maxGap.Load())/1e6, takeoverGaps(log))
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "hot restart") || strings.Contains(l, "handover") {
			t.Log(l)
		}
	}
	if missing != 0 || rx.dup.Load() != 0 {
		t.Errorf("%d of %d datagrams lost, %d duplicated across the upgrade", missing, total, rx.dup.Load())
	}
	if newPid != oldPid && !strings.Contains(log, "protocol=1.0") {
		t.Errorf("the new process did not log the old daemon's protocol as 1.0")
	}
}

// buildNetfwdAt builds netfwd from commit of this repository's history
// (git archive into a temporary directory, go build there) and returns
// the binary; it skips the test when git or the commit is not there.
func buildNetfwdAt(t *testing.T, commit string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skipf("building netfwd at %s needs git: %v", commit, err)
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("building netfwd at %s needs the repository's history: not in a git checkout (%v)", commit, err)
	}
	repo := strings.TrimSpace(string(top))
	if err := exec.Command("git", "-C", repo, "cat-file", "-e", commit+"^{commit}").Run(); err != nil {
		t.Skipf("commit %s is not in this checkout's history (a shallow clone?): %v", commit, err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	arc := exec.Command("git", "-C", repo, "archive", "--format=tar", commit)
	tarOut, err := arc.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := arc.Start(); err != nil {
		t.Fatal(err)
	}
	if err := untar(tarOut, src); err != nil {
		arc.Process.Kill()
		arc.Wait()
		t.Fatalf("git archive %s: %v", commit, err)
	}
	if err := arc.Wait(); err != nil {
		t.Fatalf("git archive %s: %v", commit, err)
	}
	exe := filepath.Join(dir, "netfwd-"+commit)
	t0 := time.Now()
	build := exec.Command("go", "build", "-buildvcs=false", "-o", exe, "./cmd/netfwd")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build at %s: %v\n%s", commit, err, out)
	}
	t.Logf("built netfwd at %s in %v", commit, time.Since(t0).Round(time.Second))
	return exe
}

// untar extracts a tar stream (git archive's) into dir: directories and
// regular files (git archive has no others but symbolic links, which
// netfwd's tree does not use).
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(name, dir+string(filepath.Separator)) && name != dir {
			return fmt.Errorf("%q leaves the directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(name, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, name); err != nil {
				return err
			}
		}
	}
}
