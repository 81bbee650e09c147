package hostpath

// Test plumbing for the namespace tests: TestMain's child mode (the test
// binary re-executed to own twins in a separate process, which the tests
// kill), helpers that read what `ip -j` says, and a Manager whose Inject
// callback collects copies of the kernel's frames.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/testenv"
)

// childEnv makes the test binary a twin owner: "NETNS,NAME".
const childEnv = "HOSTPATH_TEST_CHILD"

func TestMain(m *testing.M) {
	// The test binary is also the twin keeper of the Persist tests.
	if i := slices.Index(os.Args, KeeperArg); i >= 0 && i+2 < len(os.Args) {
		pid, _ := strconv.Atoi(os.Args[i+1])
		linger, _ := time.ParseDuration(os.Args[i+2])
		RunKeeper(pid, linger)
		os.Exit(0)
	}
	if v := os.Getenv(childEnv); v != "" {
		os.Exit(childMain(v))
	}
	os.Exit(m.Run())
}

// childMain creates one twin, says "ready" and waits to be killed (it
// gives up by itself after a minute). "NETNS,NAME,persist" makes it a
// persistent twin with a keeper and the address 10.0.0.1/24.
func childMain(arg string) int {
	f := strings.Split(arg, ",")
	ns, name := f[0], f[1]
	opts := Options{Netns: ns, Inject: func(*Twin, []byte) bool { return true }}
	spec := Spec{Port: "eth1", Name: name, MAC: testMAC}
	if len(f) > 2 && f[2] == "persist" {
		opts.Persist, opts.Keeper = true, testKeeper
		spec.Addrs = []netip.Prefix{netip.PrefixFrom(routerIP, 24)}
	}
	mgr, err := New(opts)
	if err == nil {
		err = mgr.Sync([]Spec{spec})
	}
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("ready")
	time.Sleep(time.Minute)
	return 0
}

// testKeeper is the keeper command of the tests: this binary (TestMain).
var testKeeper = []string{os.Args[0], "-test.run=^$"}

// startChild runs a child owning twin name in ns; it is killed at cleanup.
// more is appended to the child's argument (",persist").
func startChild(t *testing.T, ns, name string, more ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join(append([]string{ns, name}, more...), ","))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		t.Fatalf("child: %q %v", line, err)
	}
	go io.Copy(io.Discard, out)
	return cmd
}

var (
	testMAC  = [6]byte{0x02, 0x5e, 0x10, 0, 0, 1}
	peerMAC  = [6]byte{0x02, 0x5e, 0x10, 0, 0, 2}
	routerIP = netip.MustParseAddr("10.0.0.1")
	peerIP   = netip.MustParseAddr("10.0.0.2")
)

// ipLink is the part of `ip -j -d link show` the tests read.
type ipLink struct {
	Ifindex   int      `json:"ifindex"`
	Ifname    string   `json:"ifname"`
	Flags     []string `json:"flags"`
	MTU       int      `json:"mtu"`
	Operstate string   `json:"operstate"`
	Address   string   `json:"address"`
	Linkinfo  struct {
		Kind string `json:"info_kind"`
		Data struct {
			Type    string `json:"type"`
			Persist bool   `json:"persist"`
		} `json:"info_data"`
	} `json:"linkinfo"`
}

func (l ipLink) has(flag string) bool {
	for _, f := range l.Flags {
		if f == flag {
			return true
		}
	}
	return false
}

// showLink reads one interface of ns; false when it does not exist.
func showLink(t *testing.T, ns, name string) (ipLink, bool) {
	t.Helper()
	out, err := testenv.Output("ip", "-n", ns, "-j", "-d", "link", "show", "dev", name)
	if err != nil {
		if strings.Contains(out, "does not exist") {
			return ipLink{}, false
		}
		t.Fatalf("ip link show %s: %v\n%s", name, err, out)
	}
	var ls []ipLink
	if err := json.Unmarshal([]byte(out), &ls); err != nil || len(ls) != 1 {
		t.Fatalf("ip link show %s: %v\n%s", name, err, out)
	}
	return ls[0], true
}

// waitGone waits (bounded) until name has left ns.
func waitGone(t *testing.T, ns, name string) {
	t.Helper()
	for range 250 {
		if _, ok := showLink(t, ns, name); !ok {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s still exists in %s after 5 s", name, ns)
}

// ipAddr is one IPv4 address as `ip -j addr show` prints it.
type ipAddr struct {
	Local     string `json:"local"`
	Prefixlen int    `json:"prefixlen"`
	Broadcast string `json:"broadcast,omitempty"`
	Secondary bool   `json:"secondary,omitempty"`
}

// showAddrs reads the IPv4 addresses of name in ns, as a set.
func showAddrs(t *testing.T, ns, name string) map[ipAddr]bool {
	t.Helper()
	out := testenv.Run(t, "ip", "-n", ns, "-j", "-4", "addr", "show", "dev", name)
	var ls []struct {
		AddrInfo []ipAddr `json:"addr_info"`
	}
	if err := json.Unmarshal([]byte(out), &ls); err != nil {
		t.Fatalf("ip addr show %s: %v\n%s", name, err, out)
	}
	set := map[ipAddr]bool{}
	for _, l := range ls {
		for _, a := range l.AddrInfo {
			set[a] = true
		}
	}
	return set
}

// testManager is a Manager in a fresh namespace; frames the kernel sends
// on any twin arrive (copied) on frames.
type testManager struct {
	*Manager
	ns     string
	frames chan []byte
}

func newTestManager(t *testing.T, opts Options) *testManager {
	t.Helper()
	testenv.RequireRoot(t)
	tm := &testManager{ns: opts.Netns, frames: make(chan []byte, 1024)}
	if tm.ns == "" { // a fresh namespace unless given one
		tm.ns = testenv.Netns(t, "hp")
	}
	opts.Netns = tm.ns
	opts.Inject = func(_ *Twin, f []byte) bool {
		select {
		case tm.frames <- bytes.Clone(f):
		default:
		}
		return true
	}
	opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	tm.Manager = m
	return tm
}

func (tm *testManager) sync(t *testing.T, specs ...Spec) {
	t.Helper()
	if err := tm.Sync(specs); err != nil {
		t.Fatal(err)
	}
}

// next returns the first frame the kernel sends that match accepts, or
// fails after 5 s.
func (tm *testManager) next(t *testing.T, what string, match func([]byte) bool) []byte {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case f := <-tm.frames:
			if match(f) {
				return f
			}
		case <-deadline:
			t.Fatalf("no %s from the kernel within 5 s", what)
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
