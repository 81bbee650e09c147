package main

// The end-to-end harness: real Linux hosts in network namespaces (built by
// internal/lab) and the real daemon between them, run as its own process
// exactly as a user runs it: `ip netns exec ROUTER netfwd run --config F
// --ctl S` (the test binary re-executes itself as netfwd: TestMain). Tests
// talk to it only through what users have: ping and friends in the host
// namespaces, `netfwd ctl` on the control socket, the metrics endpoint,
// signals (SIGHUP reload, SIGTERM stop) and the config file.
//
// Cleanup: the daemon is stopped with SIGTERM (SIGKILL after 10 s) and must
// exit 0 without a race report; the namespaces are removed whatever
// happened (t.Cleanup); a test process that dies outright takes the
// daemon with it (Pdeathsig) and leaves namespaces the next lab sweeps.
// Names carry a random per-network prefix, so parallel test packages and
// runs never collide.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/lab"
	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/testenv"
)

// TestMain lets the test binary be netfwd itself: with NETFWD_TEST_MAIN=1
// it runs the command line in its arguments instead of the tests.
func TestMain(m *testing.M) {
	if os.Getenv("NETFWD_TEST_MAIN") == "1" {
		successorTestHooks(os.Args[1:])
		os.Exit(dispatch(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// syncBuffer is a bytes.Buffer safe for a writer goroutine and readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
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

// e2e is one lab network with the daemon running on it.
type e2e struct {
	t   *testing.T
	net *lab.Net
	dir string
	// ConfigFile is the daemon's config; rewrite it and reload() to change.
	ConfigFile string
	CtlPath    string
	// ExtraArgs are more `netfwd run` flags.
	ExtraArgs []string
	// Exe is the netfwd binary ("": this test binary, as netfwd).
	Exe     string
	cmd     *exec.Cmd
	stderr  *logFile
	exited  chan struct{}
	metrics *http.Client // dials inside the router namespace
}

// metricsAddr is where the daemon listens, inside the router namespace.
const metricsAddr = "127.0.0.1:9477"

// newE2E builds spec (prepare, when not nil, runs after the network is
// built and before the daemon starts) and starts the daemon on it.
func newE2E(t *testing.T, spec lab.Spec, prepare func(*lab.Net)) *e2e {
	t.Helper()
	return newE2EArgs(t, spec, prepare)
}

// testIO is the packet I/O the end-to-end tests run the daemon with:
// NETFWD_TEST_IO (auto, afxdp, afpacket; CI runs the suite with auto, which
// is AF_PACKET on veth, and again with afxdp).
func testIO() string {
	if v := os.Getenv("NETFWD_TEST_IO"); v != "" {
		return v
	}
	return "auto"
}

// newE2EArgs is newE2E with more `netfwd run` flags.
func newE2EArgs(t *testing.T, spec lab.Spec, prepare func(*lab.Net), args ...string) *e2e {
	t.Helper()
	return newE2EExe(t, spec, prepare, "", args...)
}

var optimized struct {
	once sync.Once
	exe  string
	err  error
}

// optimizedNetfwd builds netfwd without the race detector, once per test
// process, for tests that measure under load (the race detector slows the
// datapath tenfold: a flood test would measure it).
func optimizedNetfwd(t *testing.T) string {
	t.Helper()
	optimized.once.Do(func() {
		// NETFWD_OPTIMIZED_EXE: a binary built beforehand, for probes that
		// attach to a file (perf probe -x, uprobes).
		if exe := os.Getenv("NETFWD_OPTIMIZED_EXE"); exe != "" {
			optimized.exe = exe
			return
		}
		dir, err := os.MkdirTemp("", "netfwd-e2e-bin")
		if err != nil {
			optimized.err = err
			return
		}
		exe := filepath.Join(dir, "netfwd")
		out, err := exec.Command("go", "build", "-o", exe, "github.com/netfwd/netfwd/cmd/netfwd").CombinedOutput()
		if err != nil {
			optimized.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		optimized.exe = exe
	})
	if optimized.err != nil {
		t.Fatal(optimized.err)
	}
	return optimized.exe
}

// newE2EExe is newE2EArgs with the netfwd binary exe ("": this test
// binary).
func newE2EExe(t *testing.T, spec lab.Spec, prepare func(*lab.Net), exe string, args ...string) *e2e {
	t.Helper()
	args = append(args, "--io", testIO())
	spec.HostTxChecksumOff = testIO() == "afxdp"
	testenv.RequireRoot(t, "ping")
	n, err := lab.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("removing the lab: %v", err)
		}
	})
	if prepare != nil {
		prepare(n)
	}
	e := &e2e{t: t, net: n, dir: t.TempDir(), ExtraArgs: args, Exe: exe}
	e.ConfigFile = filepath.Join(e.dir, "router.conf")
	e.CtlPath = filepath.Join(e.dir, "netfwd.sock")
	e.writeConfig(spec.Config())
	if slices.Contains(args, "--host-path") {
		// The twins outlive the daemon on purpose, and their keeper a
		// minute more: removed after the last stop (cleanups run last
		// registered first).
		t.Cleanup(func() {
			if out, err := e.removeTwins(); err != nil {
				t.Errorf("netfwd twins remove: %v\n%s", err, out)
			}
		})
	}
	e.metrics = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := pktio.InNetns(n.Router, func() error {
				var err error
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		}}}
	e.start()
	return e
}

// waitingTest marks an end-to-end test that mostly waits (on namespaces,
// the daemon, routing daemons) and measures no rate: it runs beside other
// such tests. Go holds parallel tests until the serial ones, the floods,
// are done; -parallel is GOMAXPROCS, 2 on CI.
func waitingTest(t *testing.T) {
	t.Helper()
	t.Parallel()
}

// start runs the daemon and waits until its control socket answers.
func (e *e2e) start() {
	t := e.t
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if e.Exe != "" {
		exe = e.Exe
	}
	// The log is a file, not a pipe: a hot restart's new process writes
	// on where the old one did (and a pipe would keep Wait waiting for it).
	// Each start begins a new log, as a new stderr would.
	logf, err := os.OpenFile(filepath.Join(e.dir, "netfwd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close() // the child has its own
	e.stderr = &logFile{path: logf.Name()}
	e.cmd = exec.Command("ip", append([]string{"netns", "exec", e.net.Router, exe, "run",
		"--config", e.ConfigFile, "--ctl", e.CtlPath, "--metrics", metricsAddr}, e.ExtraArgs...)...)
	e.cmd.Env = append(os.Environ(), "NETFWD_TEST_MAIN=1")
	e.cmd.Stdout, e.cmd.Stderr = logf, logf
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The goroutine keeps its own process and channel: after a kill -9
	// the next start replaces both, and the old process's end must not
	// close the new one's channel.
	cmd, exited := e.cmd, make(chan struct{})
	e.exited = exited
	go func() {
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(e.stop)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := e.ctlErr("link show"); err == nil {
			break
		} else if !e.alive() {
			t.Fatalf("netfwd run exited (%v):\n%s", e.cmd.ProcessState, e.stderr)
		} else if time.Now().After(deadline) {
			t.Fatalf("netfwd run: control socket not answering after 20 s: %v\n%s", err, e.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Fresh veths may report carrier a moment after the daemon opened
	// them; until then the router treats them as down.
	ok, why := eventually(5*time.Second, func() (bool, string) {
		var links []struct{ Ifname, Operstate string }
		if err := json.Unmarshal([]byte(e.ctl("-j", "link show")), &links); err != nil {
			return false, err.Error()
		}
		state := map[string]string{}
		for _, l := range links {
			state[l.Ifname] = l.Operstate
		}
		for _, p := range e.net.Spec.RouterPorts() {
			if state[p] != "UP" {
				return false, fmt.Sprintf("port %s is %q", p, state[p])
			}
		}
		return true, ""
	})
	if !ok {
		t.Fatalf("ports not up 5 s after start: %s", why)
	}
}

// removeTwins runs `netfwd twins remove --netns ROUTER` (this binary).
func (e *e2e) removeTwins(names ...string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(exe, append([]string{"twins", "remove", "--netns", e.net.Router}, names...)...)
	cmd.Env = append(os.Environ(), "NETFWD_TEST_MAIN=1")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// stop ends the daemon with SIGTERM and checks it exited cleanly.
func (e *e2e) stop() {
	t := e.t
	if e.alive() {
		e.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-e.exited:
		case <-time.After(10 * time.Second):
			e.cmd.Process.Kill()
			<-e.exited
			t.Errorf("netfwd run did not stop within 10 s of SIGTERM")
		}
	}
	log := e.stderr.String()
	if st := e.cmd.ProcessState; st != nil && !st.Success() {
		t.Errorf("netfwd run exited with %v", st)
	}
	if strings.Contains(log, "DATA RACE") || strings.Contains(log, "panic:") {
		t.Errorf("netfwd run reported a race or panic")
	}
	if t.Failed() {
		t.Logf("netfwd run output:\n%s", lastBytes(log, 8000))
	}
}

// logFile is the daemon's log, read back whole.
type logFile struct{ path string }

func (l *logFile) String() string {
	b, _ := os.ReadFile(l.path)
	return string(b)
}

func lastBytes(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// alive reports whether the daemon process is still running.
func (e *e2e) alive() bool {
	select {
	case <-e.exited:
		return false
	default:
		return true
	}
}

func (e *e2e) writeConfig(text string) {
	e.t.Helper()
	if err := os.WriteFile(e.ConfigFile, []byte(text), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// sighup asks the daemon to reload its config file.
func (e *e2e) sighup() {
	e.t.Helper()
	if err := e.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		e.t.Fatal(err)
	}
}

func (e *e2e) host(name string) *lab.Host {
	h := e.net.Host(name)
	if h == nil {
		e.t.Fatalf("no host %s", name)
	}
	return h
}

// ping pings dst from a host with iputils ping; a failure to run is fatal,
// lost replies are not (the result says).
func (e *e2e) ping(from string, dst netip.Addr, o lab.PingOptions) lab.PingResult {
	e.t.Helper()
	if o.Tool == "" {
		o.Tool = "ping"
	}
	r, err := lab.Ping(e.host(from).NS, dst, o)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// pingOK pings and requires every reply, from dst, with the given TTL
// (0: any).
func (e *e2e) pingOK(from string, dst netip.Addr, ttl int) lab.PingResult {
	e.t.Helper()
	r := e.ping(from, dst, lab.PingOptions{Count: 3})
	if r.Received != 3 || r.ReplyFrom != dst || len(r.Errors) > 0 || (ttl > 0 && r.ReplyTTL != ttl) {
		e.t.Fatalf("ping %s -> %s: want 3 of 3 replies from %s with TTL %d, got %d from %v TTL %d errors %v\n%s",
			from, dst, dst, ttl, r.Received, r.ReplyFrom, r.ReplyTTL, r.Errors, r.Output)
	}
	return r
}

// ctlErr sends lines to the daemon through `netfwd ctl` (the command line
// code, in-process) and returns its output.
func (e *e2e) ctlErr(lines ...string) (string, error) {
	var out, errb bytes.Buffer
	args := append([]string{"ctl", "--ctl", e.CtlPath}, lines...)
	if code := dispatch(args, strings.NewReader(""), &out, &errb); code != 0 {
		return out.String(), fmt.Errorf("netfwd ctl %s: exit %d: %s", strings.Join(lines, " / "), code, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

func (e *e2e) ctl(lines ...string) string {
	e.t.Helper()
	out, err := e.ctlErr(lines...)
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// routeGet asks the daemon `route get -j ADDR`: the answer, a route or an
// error object (`netfwd ctl` exits 2 for the lookups that fail).
func (e *e2e) routeGet(addr netip.Addr) map[string]any {
	e.t.Helper()
	var o, errb bytes.Buffer
	code := dispatch([]string{"ctl", "--ctl", e.CtlPath, "-j", "route get " + addr.String()}, strings.NewReader(""), &o, &errb)
	if code != 0 && code != 2 {
		e.t.Fatalf("route get -j %s: exit %d: %s %s", addr, code, strings.TrimSpace(o.String()), strings.TrimSpace(errb.String()))
	}
	out := o.String()
	var m map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &m); err != nil {
		e.t.Fatalf("route get -j %s: %v: %q", addr, err, out)
	}
	return m
}

// scrape reads the metrics endpoint.
func (e *e2e) scrape() *lab.Metrics {
	e.t.Helper()
	m, err := lab.Scrape(e.metrics, "http://"+metricsAddr+"/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// eventually polls cond every 50 ms until it holds or timeout passes; it
// returns the last explanation when it never held.
func eventually(timeout time.Duration, cond func() (bool, string)) (bool, string) {
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok || time.Now().After(deadline) {
			return ok, why
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kernelCounter reads one field of /proc/net/snmp ("Icmp", "InEchos") in
// a namespace: what a host's kernel itself counted.
func kernelCounter(t *testing.T, ns, proto, field string) int64 {
	t.Helper()
	var b []byte
	err := pktio.InNetns(ns, func() error {
		var err error
		b, err = os.ReadFile("/proc/thread-self/net/snmp")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	for i := 0; i+1 < len(lines); i++ {
		names := strings.Fields(lines[i])
		vals := strings.Fields(lines[i+1])
		if len(names) == 0 || names[0] != proto+":" || len(vals) != len(names) {
			continue
		}
		for j, n := range names {
			if n == field {
				v, _ := strconv.ParseInt(vals[j], 10, 64)
				return v
			}
		}
	}
	t.Fatalf("no %s %s in /proc/net/snmp of %s", proto, field, ns)
	return 0
}

// recorder opens an emulated host that only records frames on a host's
// interface (next to the host's own kernel).
func (e *e2e) recorder(host string) *lab.RawHost {
	e.t.Helper()
	h := e.host(host)
	r, err := lab.StartRawHost(h.NS, h.Iface, lab.RawHostConfig{Record: true, NoEcho: true})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { r.Close() })
	return r
}

// injector opens an emulated host on a host's interface for sending
// crafted frames (it records and answers nothing).
func (e *e2e) injector(host string) *lab.RawHost {
	e.t.Helper()
	h := e.host(host)
	r, err := lab.StartRawHost(h.NS, h.Iface, lab.RawHostConfig{NoEcho: true})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { r.Close() })
	return r
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func mustMAC(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}
