package bench

// netfwdChild: netfwd run as a child process of the benchmark, as a user
// runs it (`netfwd run --config FILE --netns NS --io BACKEND --metrics off
// --ctl off`), so that its CPU time, threads and memory are its own and it
// can be pinned like any process.
//
// The executable is the router's binary (netfwdExe, exes.go). A daemon that
// does not know `--io` yet (flag error) runs AF_PACKET without the flag,
// and AF_XDP is reported as not supported. NETFWD_CHILD_LOG=FILE appends
// every child's output to FILE as well (its log lines, a panic), for
// looking into a run afterwards.
//
// Locking: stderr is written by the exec package's copier and read by the
// starter (syncWriter); a child is started and stopped by one goroutine.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// errIONotSupported: the daemon has no `--io` flag (or not this backend).
var errIONotSupported = errors.New("not supported by this netfwd")

type netfwdChild struct {
	*childProc
	metrics string // the daemon's metrics address ("": unknown)
}

// childProc is a child process of the benchmark (netfwd run, bench-xdpfwd):
// its output, its exit, its CPU time, and a directory removed at stop.
type childProc struct {
	name   string // for messages
	cmd    *exec.Cmd
	stderr *syncWriter
	exited chan struct{}
	dir    string
}

// childExited: the child exited before it said it was ready.
type childExited struct {
	cmd, out string
}

func (e *childExited) Error() string { return e.cmd + " exited: " + e.out }

// startChild runs exe with args, pinned to cpu (cpu < 0: as this process),
// and waits up to 10 s until its output matches ready; it returns the
// match. The child dies with this process (Pdeathsig).
func startChild(name, exe string, args []string, cpu int, ready *regexp.Regexp) (*childProc, []string, error) {
	c := &childProc{name: name, stderr: &syncWriter{}, exited: make(chan struct{})}
	c.cmd = exec.Command(exe, args...)
	c.cmd.Stdout, c.cmd.Stderr = c.stderr, c.stderr
	if fn := os.Getenv("NETFWD_CHILD_LOG"); fn != "" {
		if f, err := os.OpenFile(fn, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
			c.cmd.Stdout, c.cmd.Stderr = io.MultiWriter(c.stderr, f), io.MultiWriter(c.stderr, f)
		}
	}
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := startPinned(c.cmd, cpu); err != nil {
		return nil, nil, err
	}
	go func() {
		c.cmd.Wait()
		close(c.exited)
	}()
	deadline := time.After(10 * time.Second)
	for {
		if m := ready.FindStringSubmatch(c.stderr.String()); m != nil {
			return c, m, nil
		}
		select {
		case <-c.exited:
			return nil, nil, &childExited{cmd: name + " " + strings.Join(args, " "), out: strings.TrimSpace(c.stderr.String())}
		case <-deadline:
			c.kill()
			return nil, nil, fmt.Errorf("%s not running after 10 s: %s", name, c.stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// syncWriter is a strings.Builder safe for one writer and readers.
type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// startNetfwd runs netfwd with config in namespace ns on backend io
// ("afpacket" or "afxdp") with extra arguments of `netfwd run` (after the
// defaults, so they override them), pinned to cpu when cpu >= 0, and waits
// until it runs.
func startNetfwd(ns, config, io string, cpu int, extra ...string) (*netfwdChild, error) {
	exe, err := netfwdExe()
	if err != nil {
		return nil, err
	}
	return startNetfwdExe(exe, ns, config, io, cpu, extra...)
}

// startNetfwdExe is startNetfwd with another router binary (a baseline
// build of an earlier commit).
func startNetfwdExe(exe, ns, config, io string, cpu int, extra ...string) (*netfwdChild, error) {
	dir, err := os.MkdirTemp("", "netfwd-bench-")
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "netfwd.conf")
	if err := os.WriteFile(file, []byte(config), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// Metrics on a free loopback port: read once before and once after a
	// measurement (diag), nothing in between.
	base := []string{"run", "--config", file, "--netns", ns, "--metrics", "127.0.0.1:0", "--ctl", "off"}
	c, err := launch(exe, append(append(base, "--io", io), extra...), cpu)
	if err != nil && errors.Is(err, errIONotSupported) && io == "afpacket" {
		c, err = launch(exe, base, cpu) // AF_PACKET is all it has
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c.dir = dir
	if m := metricsAddrRE.FindStringSubmatch(c.stderr.String()); m != nil {
		c.metrics = m[1]
	}
	return c, nil
}

// metricsAddrRE finds the metrics address in the "netfwd running" log line.
var metricsAddrRE = regexp.MustCompile(`metrics=(127\.0\.0\.1:[0-9]+)`)

// diag reads the daemon's AF_XDP counters from its metrics (zero when it
// has none: AF_PACKET, or no metrics address): frames lost on receive
// (ring drops, fill ring empty), frames sent, transmit kicks and the
// workers' waits.
func (c *netfwdChild) diag() fwdDiag {
	var d fwdDiag
	if c.metrics == "" {
		return d
	}
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get("http://" + c.metrics + "/metrics")
	if err != nil {
		return d
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, rest, _ := strings.Cut(sc.Text(), "{")
		labels, val, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			continue
		}
		n := uint64(v)
		switch name {
		case "netfwd_pktio_ring_drops_total":
			d.drops += n
		case "netfwd_xdp_fill_ring_empty_total":
			d.fillEmpty += n
		case "netfwd_xdp_tx_total":
			if !strings.Contains(labels, `how="no_buffer"`) {
				d.sent += n
			}
		case "netfwd_xdp_worker_waits_total":
			d.waits += n
			if strings.Contains(labels, `result="poll"`) {
				d.blocked += n
			}
		case "netfwd_xdp_tx_kicks_total":
			d.kicks += n
			if strings.Contains(labels, `result="again"`) {
				d.kickAgain += n
			}
		}
	}
	return d
}

// netfwdRunning is the daemon's "ready" log line.
var netfwdRunning = regexp.MustCompile(`netfwd running`)

func launch(exe string, args []string, cpu int) (*netfwdChild, error) {
	p, _, err := startChild("netfwd", exe, args, cpu, netfwdRunning)
	var exited *childExited
	if errors.As(err, &exited) {
		if strings.Contains(exited.out, "not defined: -io") {
			return nil, fmt.Errorf("%w: netfwd run has no --io flag", errIONotSupported)
		}
		if strings.Contains(exited.out, "--io") || strings.Contains(exited.out, "not supported") {
			return nil, fmt.Errorf("%w: %s", errIONotSupported, lastLine(exited.out))
		}
	}
	if err != nil {
		return nil, err
	}
	return &netfwdChild{childProc: p}, nil
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// startPinned starts cmd with its CPU affinity set to cpu (cpu < 0: as
// this process): the child inherits the mask of the thread that forks it.
func startPinned(cmd *exec.Cmd, cpu int) error {
	if cpu < 0 {
		return cmd.Start()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return err
	}
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin to CPU %d: %w", cpu, err)
	}
	err := cmd.Start()
	if rerr := unix.SchedSetaffinity(0, &old); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

// cpu is the child's CPU time so far (all its threads).
func (c *childProc) cpu() time.Duration {
	return statCPU(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
}

// rssKiB is the child's resident set size (VmRSS), 0 if unknown.
func (c *childProc) rssKiB() uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// stop sends SIGTERM and waits (SIGKILL after 5 s); it returns an error
// when the child did not exit cleanly.
func (c *childProc) stop() error {
	defer os.RemoveAll(c.dir)
	c.cmd.Process.Signal(unix.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(5 * time.Second):
		c.kill()
		return fmt.Errorf("%s did not stop on SIGTERM: %s", c.name, lastLine(strings.TrimSpace(c.stderr.String())))
	}
	if st := c.cmd.ProcessState; st != nil && !st.Success() {
		return fmt.Errorf("%s exited with %v: %s", c.name, st, lastLine(strings.TrimSpace(c.stderr.String())))
	}
	return nil
}

func (c *childProc) kill() {
	c.cmd.Process.Kill()
	<-c.exited
}
