package main

// `netfwd-lab` end to end: it runs its checks and passes them, leaves
// nothing behind (namespaces, control socket), cleans up on Ctrl-C at any
// point, and without root says so and points to `netfwd replay`.

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/testenv"
)

// TestMain lets the test binary be netfwd-lab itself: with
// NETFWD_TEST_MAIN=1 it runs the command instead of the tests.
func TestMain(m *testing.M) {
	if os.Getenv("NETFWD_TEST_MAIN") == "1" {
		os.Exit(runLab(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

var rePrefix = regexp.MustCompile(`namespace (nf[0-9a-f]{6})-h1`)

// labLeftovers lists namespaces and sockets of a lab prefix still present.
func labLeftovers(t *testing.T, prefix string) []string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, prefix) {
			left = append(left, strings.Fields(line)[0])
		}
	}
	matches, _ := filepath.Glob("/run/netfwd-lab-" + prefix + "*")
	return append(left, matches...)
}

// runLabOK runs `netfwd-lab ARGS` in process: it must exit 0 and leave
// nothing of its namespaces behind. It returns the output and the
// namespace prefix.
func runLabOK(t *testing.T, args ...string) (text, prefix string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := runLab(args, strings.NewReader(""), &out, &errb)
	text = out.String()
	if code != 0 {
		t.Errorf("netfwd lab %s exited %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, text, errb.String())
	}
	m := rePrefix.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no namespace prefix in the output:\n%s", text)
	}
	if left := labLeftovers(t, m[1]); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	return text, m[1]
}

func TestLabCommand(t *testing.T) {
	testenv.RequireRoot(t, "ping")
	text, prefix := runLabOK(t, "--throughput", "1s")
	for _, want := range []string{
		"[ok  ] h1 (VLAN 10) -> h3 (VLAN 20)",
		"[ok  ] TTL 1: \"Time to live exceeded\" from the router 10.0.10.1",
		"[ok  ] learned h1",
		"[ok  ] netfwd resolved h3",
		"the metrics listener, the control socket and the namespaces " + prefix + "-* are removed now",
		"removed namespaces " + prefix,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(text, "FAIL") {
		t.Errorf("a check failed:\n%s", text)
	}
	if t.Failed() {
		t.Logf("output:\n%s", text)
	}
}

// startLab runs `netfwd-lab ARGS` as its own process and returns it with a
// reader of its standard output, and its standard error (to read once
// cmd.Wait returned: exec's copier is done then).
func startLab(t *testing.T, args ...string) (*exec.Cmd, *bufio.Reader, *bytes.Buffer) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), "NETFWD_TEST_MAIN=1")
	stderr := &bytes.Buffer{}
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, bufio.NewReader(stdout), stderr
}

// readUntil reads lines until one contains want; it returns everything read.
func readUntil(t *testing.T, r *bufio.Reader, want string) string {
	t.Helper()
	var b strings.Builder
	done := make(chan error, 1)
	go func() {
		for {
			line, err := r.ReadString('\n')
			b.WriteString(line)
			if strings.Contains(line, want) {
				done <- nil
				return
			}
			if err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("no %q in the output (%v):\n%s", want, err, b.String())
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("no %q in the output after 90 s", want)
	}
	return b.String()
}

// TestLabBGP runs `netfwd-lab --bgp`: FRR and BIRD in-band through the host
// path, routes over FPM, a ping into a learned prefix, a withdrawal; and
// nothing left behind (namespaces, twins go with them, daemons stopped).
func TestLabBGP(t *testing.T) {
	testenv.RequireRoot(t, "ping", "bird", "birdc", "vtysh", "/usr/lib/frr/zebra", "/usr/lib/frr/bgpd")
	text, _ := runLabOK(t, "--bgp")
	for _, want := range []string{
		"[ok  ] eBGP FRR <-> BIRD established through netfwd's eth0, 8 prefixes received",
		"198.18.3.0/24 via 203.0.113.1 dev eth0 proto bgp metric 20",
		"[ok  ] h1 -> 198.18.3.1 in a learned prefix: 3 of 3 replies",
		"[ok  ] the withdrawn routes left netfwd's FIB",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", text)
	}
}

func TestLabInterrupt(t *testing.T) {
	testenv.RequireRoot(t, "ping")
	for _, c := range []struct {
		name     string
		args     []string
		waitFor  string
		wantCode int
	}{
		// --keep: Ctrl-C is the normal way out.
		{"keep", []string{"--keep", "--throughput", "0"}, "running until Ctrl-C", 0},
		// In the middle of the checks.
		{"during checks", []string{"--throughput", "0"}, "== ping within a VLAN", 130},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd, stdout, stderr := startLab(t, c.args...)
			text := readUntil(t, stdout, c.waitFor)
			m := rePrefix.FindStringSubmatch(text)
			if m == nil {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("no namespace prefix in the output:\n%s", text)
			}
			if len(labLeftovers(t, m[1])) == 0 {
				t.Errorf("no namespaces of %s while the lab runs", m[1])
			}
			cmd.Process.Signal(os.Interrupt)
			rest, _ := io.ReadAll(stdout)
			waited := make(chan error, 1)
			go func() { waited <- cmd.Wait() }()
			select {
			case <-waited:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("netfwd lab did not exit within 20 s of SIGINT")
			}
			if code := cmd.ProcessState.ExitCode(); code != c.wantCode {
				t.Errorf("exit status %d, want %d\n%s%s\nstderr:\n%s", code, c.wantCode, text, rest, stderr)
			}
			if left := labLeftovers(t, m[1]); len(left) > 0 {
				t.Errorf("left behind after SIGINT: %v", left)
			}
			if !strings.Contains(string(rest), "removed namespaces "+m[1]) {
				t.Errorf("no removal message after SIGINT:\n%s", rest)
			}
		})
	}
}

func TestLabWithoutRoot(t *testing.T) {
	testenv.RequireRoot(t)
	// Run a copy of this binary as nobody (the build directory is not
	// readable for other users).
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "netfwd-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "netfwd-lab")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NETFWD_TEST_MAIN=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 {
		t.Errorf("exit %v, want 1: %v", cmd.ProcessState, err)
	}
	for _, want := range []string{"needs root", "netfwd replay"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
