package fpm

// Who may speak FPM (access.go) and one session at a time (server.go),
// with real sockets: clients of another user are shell processes run as
// nobody (bash's /dev/tcp), remote peers live in a second namespace behind
// a veth.

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/testenv"
)

// logBuffer collects a server's log.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

const nobody = 65534

// shellClient is a client process of user uid: it connects to addr, sends
// stream, then reads until the server closes the connection.
type shellClient struct {
	cmd    *exec.Cmd
	out    logBuffer
	exited chan error
}

// startShellClient runs the client as uid, in namespace ns ("": the
// test's) through setpriv (entering a namespace needs root).
func startShellClient(t *testing.T, ns string, uid uint32, addr netip.AddrPort, stream []byte) *shellClient {
	t.Helper()
	script := fmt.Sprintf(`exec 3<>/dev/tcp/%s/%d || exit 3; echo connected; cat >&3; cat <&3 >/dev/null; echo closed`,
		addr.Addr(), addr.Port())
	c := &shellClient{cmd: exec.Command("bash", "-c", script), exited: make(chan error, 1)}
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	if ns != "" {
		id := fmt.Sprint(uid)
		c.cmd = exec.Command("ip", "netns", "exec", ns, "setpriv", "--reuid", id, "--regid", id, "--clear-groups",
			"bash", "-c", script)
		c.cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	c.cmd.SysProcAttr.Setpgid = true // killed as a group: bash and its cat
	c.cmd.WaitDelay = time.Second
	c.cmd.Stdin = bytes.NewReader(stream)
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.exited <- c.cmd.Wait() }()
	t.Cleanup(func() {
		syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.exited
		c.exited <- nil
	})
	return c
}

// closedByServer waits for the client to see the server close its
// connection.
func (c *shellClient) closedByServer(t *testing.T) {
	t.Helper()
	select {
	case err := <-c.exited:
		c.exited <- err
		if !strings.Contains(c.out.String(), "connected") || !strings.Contains(c.out.String(), "closed") {
			t.Fatalf("client: %v: %s", err, c.out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the server did not close the client's connection: %s", c.out.String())
	}
}

func addrPort(a net.Addr) netip.AddrPort { return a.(*net.TCPAddr).AddrPort() }

func oneRoute(p string) []byte {
	return AppendNewRoute(nil, &ZebraRoute{Prefix: pfx(p), Metric: 20, Gateway: ip("192.0.2.1"), OIF: 2})
}

// A local user other than root and the routing daemons' cannot install
// routes (issue 19, item 6: nobody's RTM_NEWROUTE on 127.0.0.1 was
// installed and replaced zebra's session); the refusal names the peer and
// its uid. The same user, once allowed, can.
func TestPeerOfOtherUserRefused(t *testing.T) {
	testenv.RequireRoot(t, "bash")
	var log logBuffer
	s := newServer(t, nil, func(o *Options) { o.Logger = log.logger() })
	zebra := s.dial(t) // root: allowed
	s.send(t, zebra, oneRoute("10.1.0.0/16"))

	c := startShellClient(t, "", nobody, addrPort(s.Addr()), oneRoute("10.66.0.0/16"))
	c.closedByServer(t)
	if n := s.Stats().RefusedPeers.Load(); n != 1 {
		t.Fatalf("refused peers: %d", n)
	}
	if !strings.Contains(log.String(), "uid=65534") || !strings.Contains(log.String(), "user not allowed") {
		t.Fatalf("log does not name the refused peer's uid:\n%s", log.String())
	}
	s.send(t, zebra, oneRoute("10.2.0.0/16")) // zebra's session goes on
	wantRoutes(t, s.f, "10.1.0.0/16 via 192.0.2.1 dev eth0 proto bgp metric 20",
		"10.2.0.0/16 via 192.0.2.1 dev eth0 proto bgp metric 20")
	if n := s.Stats().Connections.Load(); n != 1 {
		t.Fatalf("%d sessions", n)
	}

	// Allowed by uid: the same client gets in.
	s2 := newServer(t, nil, func(o *Options) { o.AllowUsers = []string{"0", fmt.Sprint(nobody)} })
	startShellClient(t, "", nobody, addrPort(s2.Addr()), oneRoute("10.66.0.0/16"))
	waitFor(t, "nobody's route", func() bool { return len(learned(s2.f)) == 1 })
	wantRoutes(t, s2.f, "10.66.0.0/16 via 192.0.2.1 dev eth0 proto bgp metric 20")
}

// The default users: root, and frr and bird where they exist; explicit
// names must exist.
func TestResolveUsers(t *testing.T) {
	uids, err := ResolveUsers([]string{"0", "nobody", "no-such-user-19"}, false)
	if err != nil || len(uids) != 2 || uids[0] != 0 || uids[1] != nobody {
		t.Fatalf("got %v, %v", uids, err)
	}
	if _, err := ResolveUsers([]string{"no-such-user-19"}, true); err == nil {
		t.Fatal("an explicit user that does not exist was accepted")
	}
	s := newServer(t, nil, nil)
	want, _ := ResolveUsers(DefaultAllowUsers, false)
	if got := s.AllowedUIDs(); fmt.Sprint(got) != fmt.Sprint(want) || got[0] != 0 {
		t.Fatalf("default users %v, want %v", got, want)
	}
}

// A second connection never replaces a live session: it is refused (and
// logged) after TakeoverWait; once the session ends, the next one gets in.
func TestSecondConnectionRefused(t *testing.T) {
	var log logBuffer
	s := newServer(t, nil, func(o *Options) { o.Logger = log.logger(); o.TakeoverWait = 200 * time.Millisecond })
	a := s.dial(t)
	s.send(t, a, oneRoute("10.1.0.0/16"))
	b := s.dial(t)
	b.Write(oneRoute("10.66.0.0/16"))
	b.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := b.Read(make([]byte, 1)); err == nil {
		t.Fatalf("second connection: read %d bytes, want it closed", n)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("second connection not closed")
	}
	if n := s.Stats().RefusedBusy.Load(); n != 1 {
		t.Fatalf("refused while busy: %d", n)
	}
	if !strings.Contains(log.String(), "a session is live") {
		t.Fatalf("refusal not logged:\n%s", log.String())
	}
	s.send(t, a, oneRoute("10.2.0.0/16")) // the live session goes on
	wantRoutes(t, s.f, "10.1.0.0/16 via 192.0.2.1 dev eth0 proto bgp metric 20",
		"10.2.0.0/16 via 192.0.2.1 dev eth0 proto bgp metric 20")

	// zebra restarts: its old connection closes, the new one is in at once
	// (dialled right after the close, before the server noticed the EOF).
	a.Close()
	c := s.dial(t)
	s.send(t, c, oneRoute("10.3.0.0/16"))
	if n := s.Stats().Connections.Load(); n != 2 {
		t.Fatalf("%d sessions, want 2", n)
	}
	if n := s.Stats().RefusedBusy.Load(); n != 1 {
		t.Fatalf("refused while busy: %d", n)
	}
}

// Peers on other hosts (here: another namespace behind a veth): refused
// unless their network is allowed; a local socket connecting to a
// non-loopback address of the host is still judged by its user; a peer
// that vanishes without closing (its link down) is found dead by
// keepalive, and the next connection gets in.
func TestRemotePeers(t *testing.T) {
	testenv.RequireRoot(t, "bash")
	nsA, nsB := testenv.Netns(t, "fpmA"), testenv.Netns(t, "fpmB")
	va, vb := fmt.Sprintf("fa%d", os.Getpid()%100000), fmt.Sprintf("fb%d", os.Getpid()%100000)
	testenv.Run(t, "ip", "link", "add", va, "netns", nsA, "type", "veth", "peer", "name", vb, "netns", nsB)
	testenv.Run(t, "ip", "-n", nsA, "addr", "add", "10.219.0.1/24", "dev", va)
	testenv.Run(t, "ip", "-n", nsB, "addr", "add", "10.219.0.2/24", "dev", vb)
	testenv.Run(t, "ip", "-n", nsA, "link", "set", va, "up")
	testenv.Run(t, "ip", "-n", nsB, "link", "set", vb, "up")

	var log logBuffer
	listen := func(tweak func(*Options)) *testServer {
		var s *Server
		o := Options{FIB: fib.New(fib.Options{Compiled: true}), Iface: ifaces, StaleTime: -1, Logger: log.logger(),
			TakeoverWait: 200 * time.Millisecond}
		tweak(&o)
		if err := pktio.InNetns(nsA, func() (err error) { s, err = Listen("0.0.0.0:0", o); return err }); err != nil {
			t.Fatal(err)
		}
		go s.Serve()
		t.Cleanup(func() { s.Close() })
		return &testServer{s, o.FIB}
	}
	dialFrom := func(ns string, s *testServer) net.Conn {
		var c net.Conn
		port := addrPort(s.Addr()).Port()
		if err := pktio.InNetns(ns, func() (err error) {
			c, err = net.DialTimeout("tcp", fmt.Sprintf("10.219.0.1:%d", port), 5*time.Second)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	closed := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err := c.Read(make([]byte, 1))
		ne, timeout := err.(net.Error)
		return err != nil && !(timeout && ne.Timeout())
	}

	// Not allowed by default.
	s := listen(func(*Options) {})
	c := dialFrom(nsB, s)
	c.Write(oneRoute("10.66.0.0/16"))
	if !closed(c) || s.Stats().RefusedPeers.Load() != 1 || !strings.Contains(log.String(), "remote peer not allowed") {
		t.Fatalf("remote peer not refused (refused %d):\n%s", s.Stats().RefusedPeers.Load(), log.String())
	}

	// Allowed by network; keepalive ends it once its link is down.
	s = listen(func(o *Options) {
		o.AllowNets = []netip.Prefix{pfx("10.219.0.0/24")}
		o.KeepAlive = 500 * time.Millisecond
	})
	// nobody on the host itself, through the host's veth address (in the
	// allowed network): judged by its user.
	local := startShellClient(t, nsA, nobody, netip.AddrPortFrom(ip("10.219.0.1"), addrPort(s.Addr()).Port()),
		oneRoute("10.66.0.0/16"))
	local.closedByServer(t)
	if s.Stats().RefusedPeers.Load() != 1 || !strings.Contains(log.String(), "uid=65534") {
		t.Fatalf("a local user through an allowed network's address was not refused:\n%s", log.String())
	}
	remote := dialFrom(nsB, s)
	s.send(t, remote, oneRoute("10.1.0.0/16"))
	testenv.Run(t, "ip", "-n", nsB, "link", "set", vb, "down")
	c = dialFrom(nsA, s) // root, on the host: allowed, but the session is live
	if !closed(c) || s.Stats().RefusedBusy.Load() != 1 {
		t.Fatalf("a connection replaced the live (not yet known dead) session")
	}
	waitFor(t, "keepalive to end the dead session", func() bool { return !s.Stats().Connected.Load() })
	c = dialFrom(nsA, s)
	s.send(t, c, oneRoute("10.2.0.0/16"))
	if n := s.Stats().Connections.Load(); n != 2 {
		t.Fatalf("%d sessions, want 2", n)
	}
	wantRoutes(t, s.f, "10.1.0.0/16 via 192.0.2.1 dev eth0 proto bgp metric 20",
		"10.2.0.0/16 via 192.0.2.1 dev eth0 proto bgp metric 20")
}
