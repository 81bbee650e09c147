package ctlsock

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/apply"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
	"github.com/netfwd/netfwd/wire"
	"golang.org/x/sys/unix"
)

// The response writer escapes as encoding/json does, whatever the chunks
// the output arrives in (a UTF-8 sequence may be split between writes).
func TestResponseWriterEscapes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "\n", "\t", "\"", "\\", "\x00", "\x1f", "é", "€", "😀", "\u2028", "\xff", "\xe2\x82", "<&>", " "}
	for range 2000 {
		var sb strings.Builder
		for range r.IntN(40) {
			sb.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		s := sb.String()
		var out bytes.Buffer
		rw := newResponseWriter(&out, 16)
		for rest := []byte(s); len(rest) > 0; {
			n := 1 + r.IntN(len(rest))
			rw.Write(rest[:n])
			rest = rest[n:]
		}
		if err := rw.finish([]string{"ctl:1: e\"rr"}); err != nil {
			t.Fatal(err)
		}
		var got Response
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("%q: invalid JSON %q: %v", s, out.String(), err)
		}
		want, _ := json.Marshal(s)
		var wantS string
		json.Unmarshal(want, &wantS)
		if got.Output != wantS || got.OK || len(got.Errors) != 1 || got.Errors[0] != "ctl:1: e\"rr" {
			t.Fatalf("%q: got %+v, want output %q", s, got, wantS)
		}
	}
}

// A streamed answer over the socket is the in-memory answer.
func TestStreamedEqualsInMemory(t *testing.T) {
	sock, c := serve(t, nil)
	if _, err := Do(sock, []string{"address add 192.0.2.1/24 dev eth0", "route add 10.0.0.0/8 via 192.0.2.9"}, false); err != nil {
		t.Fatal(err)
	}
	for _, js := range []bool{false, true} {
		req := Request{Lines: []string{"route show table all", "address show", "link show", "neigh show", "stats"}, JSON: js}
		want := Handler{Ctl: c}.Do(req)
		got, err := Do(sock, req.Lines, js)
		if err != nil || got != want.Output || !want.OK {
			t.Fatalf("json=%v: socket %q %v\nin memory %+v", js, got, err, want)
		}
		// The streaming client (netfwd ctl) unescapes the same text.
		lines := append(req.Lines, "route add 10.9.0.0/16 nexthop via 192.0.2.7 nexthop via 192.0.2.8",
			"route show 10.9.0.0/16", "help")
		var b bytes.Buffer
		if _, err := Stream(sock, lines, js, &b); err != nil {
			t.Fatal(err)
		}
		Do(sock, []string{"route del 10.9.0.0/16"}, false)
		want = Handler{Ctl: c}.Do(Request{Lines: lines, JSON: js})
		Do(sock, []string{"route del 10.9.0.0/16"}, false)
		if b.String() != want.Output || !strings.Contains(b.String(), "\n\tnexthop via 192.0.2.8") && !js {
			t.Fatalf("json=%v: Stream gave %q, want %q", js, b.String(), want.Output)
		}
	}
	var b bytes.Buffer
	_, err := Stream(sock, []string{"route add 10.0.0.0/8 via 192.0.2.9"}, false, &b)
	if re, ok := err.(*RequestError); !ok || len(re.Errors) != 1 || !strings.HasPrefix(re.Errors[0], "ctl:1: ") {
		t.Fatalf("refused request: %v", err)
	}
}

// iproute2's abbreviations are the same on the socket as in a config file:
// each short form answers exactly as its long form.
func TestCtlAbbreviations(t *testing.T) {
	sock, _ := serve(t, nil)
	if _, err := Do(sock, []string{
		"address add 192.0.2.1/24 dev eth0",
		"route add 10.0.0.0/8 via 192.0.2.9",
		"link set eth1 down",
		"link add br0 address 02:bb:00:00:00:01 type bridge",
		"link set eth2 master br0",
		"neigh add 192.0.2.9 lladdr 02:00:00:00:00:09 dev eth0",
	}, false); err != nil {
		t.Fatal(err)
	}
	for short, long := range map[string]string{
		"ip r g 10.1.2.3":  "route get 10.1.2.3",
		"route s":          "route show",
		"rou show":         "route show",
		"ip -j r s":        "route show",
		"r s t all":        "route show table all",
		"l sh up":          "link show up",
		"a s dev eth0":     "address show dev eth0",
		"n s":              "neigh show",
		"bridge f s":       "bridge fdb show",
		"ip -j nex":        "nexthop show",
		"fd s br br0":      "fdb show br br0",
		"ip -j a s eth0":   "address show eth0",
		"ip -j link sh up": "link show up",
		"ip neigh show to": "", // refused: error expected
	} {
		gotShort, errS := Do(sock, []string{short}, false)
		if long == "" {
			if errS == nil {
				t.Errorf("%q accepted", short)
			}
			continue
		}
		json := strings.Contains(short, "-j")
		gotLong, errL := Do(sock, []string{long}, json)
		if errS != nil || errL != nil || gotShort != gotLong || gotLong == "" {
			t.Errorf("%q: %q %v; %q: %q %v", short, gotShort, errS, long, gotLong, errL)
		}
	}
	// `link show up` filters: eth1 is down, so only the short list.
	all, _ := Do(sock, []string{"link show"}, false)
	up, _ := Do(sock, []string{"link show up"}, false)
	if !strings.Contains(all, "eth1") || strings.Contains(up, "eth1:") || !strings.Contains(up, "eth0") {
		t.Errorf("link show up:\n%s\nall:\n%s", up, all)
	}
}

// Errors quote at most a short prefix of the request.
func TestCtlErrorsBounded(t *testing.T) {
	sock, _ := serve(t, nil)
	huge := strings.Repeat("Ab", 5<<20)
	lines := []string{huge, "route add " + huge, "route get " + huge}
	for range 500 {
		lines = append(lines, "route frobnicate "+strings.Repeat("y", 1000))
	}
	_, err := Do(sock, lines, false)
	re, ok := err.(*RequestError)
	if !ok {
		t.Fatalf("want a refusal, got %v", err)
	}
	total := 0
	for _, e := range re.Errors {
		total += len(e)
	}
	if total > 64<<10 || len(re.Errors) > 102 {
		t.Fatalf("%d errors, %d bytes for a request of %d bytes: %.300s", len(re.Errors), total, len(huge), re.Errors)
	}
	if !strings.HasPrefix(re.Errors[0], "ctl:1: ") || !strings.Contains(re.Errors[len(re.Errors)-1], "more errors") {
		t.Fatalf("first %q, last %q", re.Errors[0], re.Errors[len(re.Errors)-1])
	}
	// A route get answer echoes at most a prefix of a bad address.
	out, err := Do(sock, []string{"route get " + strings.Repeat("z", 100<<10)}, true)
	if err != nil || len(out) > 200 || !strings.Contains(out, `"error":"invalid IPv4 address"`) {
		t.Fatalf("%.300q %v", out, err)
	}
}

// bigFDB builds a controller whose bridge holds n static FDB entries.
func bigFDB(t testing.TB, n int) *apply.Controller {
	c := apply.New(l3.NewEngine(l3.EngineOptions{}))
	if err := c.Apply(parseLines(t, "link add br0 type bridge", "link set eth1 master br0")); err != nil {
		t.Fatal(err)
	}
	ops := make([]l2.Op, n)
	for i := range ops {
		ops[i] = l2.FDBAdd{MAC: wire.MAC{2, 0, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}, Dev: "eth1", Kind: l2.FDBStatic}
	}
	if err := c.Engine().Domain().Apply(ops...); err != nil {
		t.Fatal(err)
	}
	return c
}

// Clients that ask for a large answer and never read hold neither the
// daemon's memory nor their connection: answers stream through a bounded
// buffer, at most answerSlots are rendered at once, and a connection that
// stops taking data is dropped after WriteTimeout.
func TestSlowClientsAreDropped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a large FDB")
	}
	const entries = 100000
	c := bigFDB(t, entries)
	answer := len(Handler{Ctl: c}.Do(Request{Lines: []string{"fdb show"}}).Output)
	if answer < 4<<20 {
		t.Fatalf("answer of %d bytes: too small to measure", answer)
	}
	path := filepath.Join(t.TempDir(), "ctl.sock")
	s, err := Listen(path, Handler{Ctl: c})
	if err != nil {
		t.Fatal(err)
	}
	s.WriteTimeout = 300 * time.Millisecond
	done := make(chan struct{})
	go func() { s.Serve(); close(done) }()
	defer func() { s.Close(); <-done }()

	one, _ := stuckClients(t, path, 1, answer)
	many, took := stuckClients(t, path, 6, answer)
	t.Logf("answer %d bytes; live heap grew by %d bytes with 1 client not reading, %d with 6 (dropped after %v)",
		answer, one, many, took)
	// At most answerSlots answers are in flight whatever the number of
	// clients: about what one client costs (a table copy of ~1.5 times the
	// text, twice that while the copy grows), where holding every client's
	// answer and its JSON encoding would be 12 times the text or more.
	if limit := 3 * int64(answer); many > limit {
		t.Fatalf("live heap grew by %d bytes for 6 clients not reading, %d for one (want at most %d)", many, one, limit)
	}
	// The server still answers.
	if _, err := Do(path, []string{"stats"}, false); err != nil {
		t.Fatal(err)
	}
}

func parseLines(t testing.TB, lines ...string) []config.Command {
	t.Helper()
	cmds, errs := config.Parse("t.conf", strings.NewReader(strings.Join(lines, "\n")))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return cmds
}

// peerClosed reports whether the server closed conn, without reading it.
func peerClosed(t *testing.T, conn net.Conn) bool {
	rc, err := conn.(*net.UnixConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	rc.Control(func(fd uintptr) {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		if n, err := unix.Poll(p, 0); err == nil && n == 1 {
			closed = p[0].Revents&(unix.POLLRDHUP|unix.POLLHUP) != 0
		}
	})
	return closed
}

// stuckClients connects n clients that ask for `fdb show` and never read,
// waits until the server has dropped them all, and returns the highest
// growth of the live heap meanwhile and the time it took.
func stuckClients(t *testing.T, path string, n, answer int) (int64, time.Duration) {
	t.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	peak := base
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		var ms runtime.MemStats
		for {
			runtime.GC() // live memory, not garbage waiting for collection
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	conns := make([]net.Conn, n)
	for i := range conns {
		conn, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		json.NewEncoder(conn).Encode(Request{Lines: []string{"fdb show"}})
		conn.(*net.UnixConn).CloseWrite()
		conns[i] = conn
	}
	// Nobody reads. Every connection must be closed by the server, after
	// WriteTimeout for the ones being answered (the others wait for a
	// slot): the peer's shutdown shows (POLLRDHUP) with the data unread.
	start := time.Now()
	for i, conn := range conns {
		for !peerClosed(t, conn) {
			if time.Since(start) > 60*time.Second {
				t.Fatalf("client %d: still connected after %v", i, time.Since(start))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	took := time.Since(start)
	close(stop)
	sampler.Wait()
	for i, conn := range conns {
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := io.Copy(io.Discard, conn)
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		if got >= int64(answer) {
			t.Fatalf("client %d got the whole answer (%d bytes) without reading", i, got)
		}
	}
	return int64(peak) - int64(base), took
}
