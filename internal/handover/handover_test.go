package handover

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeSource counts the calls a successor causes.
type fakeSource struct {
	prepared, paused, yielded, resumed, finished atomic.Int32
	finishErr                                    atomic.Pointer[error]
}

func (f *fakeSource) Prepare() (Prepared, error) {
	f.prepared.Add(1)
	return Prepared{PID: os.Getpid(), Listeners: map[string]Listener{}}, nil
}
func (f *fakeSource) Pause() (Paused, error) { f.paused.Add(1); return Paused{}, nil }
func (f *fakeSource) Yield(bool)             { f.yielded.Add(1) }
func (f *fakeSource) Resume()                { f.resumed.Add(1) }
func (f *fakeSource) Finish(err error) {
	f.finishErr.Store(&err)
	f.finished.Add(1)
}

func serve(t *testing.T) (*fakeSource, *Server, string, chan struct{}) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("the handover socket serves root only")
	}
	path := filepath.Join(t.TempDir(), "netfwd.sock.handover")
	src := &fakeSource{}
	s, err := Listen(path, src, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.Serve(); close(done) }()
	t.Cleanup(func() { s.Close(); <-done })
	return src, s, path, done
}

func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}

// TestSuccessorGoneResumes: a successor that paused the daemon and went
// away without done makes it forward again; the next successor is served.
func TestSuccessorGoneResumes(t *testing.T) {
	src, _, path, _ := serve(t)
	c, err := Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Prepare(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pause(); err != nil {
		t.Fatal(err)
	}
	if src.resumed.Load() != 0 {
		t.Fatal("resumed while the successor is still there")
	}
	c.Close()
	if !eventually(func() bool { return src.resumed.Load() == 1 }) {
		t.Fatal("the daemon did not resume after its successor went away")
	}
	if src.finished.Load() != 0 {
		t.Fatal("finished without done")
	}
	c2, err := Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Prepare(); err != nil {
		t.Fatalf("a second successor: %v", err)
	}
}

// TestTakeoverFinishes: prepare, pause, done: the daemon finishes, the
// server stops, and TakeFD duplicates a descriptor of the daemon.
func TestTakeoverFinishes(t *testing.T) {
	src, srv, path, done := serve(t)
	c, err := Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := c.Prepare()
	if err != nil {
		t.Fatal(err)
	}
	if p.PID != os.Getpid() {
		t.Fatalf("pid %d", p.PID)
	}
	f, err := os.CreateTemp(t.TempDir(), "fd")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd, err := c.TakeFD(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	g := os.NewFile(uintptr(fd), "taken")
	if _, err := g.WriteString("x"); err != nil {
		t.Errorf("the taken descriptor does not write: %v", err)
	}
	g.Close()
	if st, _ := f.Stat(); st.Size() != 1 {
		t.Errorf("the taken descriptor is not the same file (size %d)", st.Size())
	}
	if err := c.Done(); err == nil {
		t.Fatal("done before pause accepted")
	}
	// The refused done ended that exchange: a new one.
	c.Close()
	c, err = Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Prepare(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := c.Done(); err == nil {
		t.Fatal("done before commit accepted")
	}
	if !eventually(func() bool { return src.resumed.Load() == 1 }) {
		t.Fatal("a refused done did not resume the daemon")
	}
	c.Close()
	c, err = Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Prepare(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	// Committed, the hold lasts as long as the process: a prepare meanwhile
	// is refused at once, not after waiting claimWait for an end that comes
	// only as the process exits (the waiting successor read EOF then).
	srv.mu.Lock()
	final := srv.holder.final
	srv.mu.Unlock()
	if !final {
		t.Error("the committed successor's hold is not final")
	}
	if err := c.Done(); err != nil {
		t.Fatal(err)
	}
	// Finishing: a successor that comes now is told why, not reset when
	// the process exits.
	late, err := Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	var busy *BusyError
	if _, err := late.Prepare(); !errors.As(err, &busy) || busy.PID != os.Getpid() {
		t.Errorf("prepare after the takeover: %v, want another restart (pid %d) in progress", err, os.Getpid())
	}
	select {
	case <-done:
		t.Fatal("the server stopped before Close")
	default:
	}
	if !eventually(func() bool { return src.finished.Load() == 1 }) { // called after done's answer
		t.Errorf("finished %d times", src.finished.Load())
	}
	if src.resumed.Load() != 1 || src.yielded.Load() != 1 {
		t.Errorf("resumed %d times (once: the refused done), yielded %d times in a takeover", src.resumed.Load(), src.yielded.Load())
	}
	if e := src.finishErr.Load(); e == nil || *e != nil {
		t.Errorf("finished after done with %v, want nil", e)
	}
}

// helperEnv names the handover socket a helper successor process dials
// (TestHelperSuccessor): a successor with a pid of its own.
const helperEnv = "NETFWD_HANDOVER_TEST_SUCCESSOR"

// TestHelperSuccessor is a successor in a process of its own when run by
// startSuccessor: it prepares, says "prepared", then does what each line
// of its stdin says (pause, commit, done), saying each, and exits at EOF.
func TestHelperSuccessor(t *testing.T) {
	path := os.Getenv(helperEnv)
	if path == "" {
		t.Skip("a helper process of the handover tests")
	}
	c, err := Dial(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	if _, err := c.Prepare(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("prepared")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "pause":
			_, err = c.Pause()
		case "commit":
			err = c.Commit()
		case "done":
			err = c.Done()
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(in.Text())
	}
}

// successorProc is a helper successor process.
type successorProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startSuccessor(t *testing.T, path string) *successorProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSuccessor$")
	cmd.Env = append(os.Environ(), helperEnv+"="+path)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &successorProc{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	p.expect(t, "prepared")
	return p
}

// do sends the helper an op and waits for it to say it did it.
func (p *successorProc) do(t *testing.T, op string) {
	t.Helper()
	if _, err := io.WriteString(p.in, op+"\n"); err != nil {
		t.Fatal(err)
	}
	p.expect(t, op)
}

func (p *successorProc) expect(t *testing.T, want string) {
	t.Helper()
	if !p.out.Scan() || p.out.Text() != want {
		t.Fatalf("the successor (pid %d) said %q, want %q", p.cmd.Process.Pid, p.out.Text(), want)
	}
}

// prepareRefused asks prepare from a new connection and returns the pid
// the refusal names (0 when it was not a BusyError, or took more than 3
// s: a prepare queued behind the restart in progress; err says what).
func prepareRefused(path string) (int, error) {
	c, err := Dial(path)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	type result struct {
		p   Prepared
		err error
	}
	got := make(chan result, 1)
	go func() {
		p, err := c.Prepare()
		got <- result{p, err}
	}()
	select {
	case r := <-got:
		var busy *BusyError
		if errors.As(r.err, &busy) {
			return busy.PID, nil
		}
		return 0, fmt.Errorf("prepare: %+v, %v", r.p, r.err)
	case <-time.After(3 * time.Second):
		return 0, errors.New("no answer within 3 s: the prepare waits behind the restart in progress")
	}
}

// TestConcurrentSuccessorsRefused: while one successor's restart is in
// progress (prepared, paused, and after done until the process is gone),
// every other successor's prepare is answered at once with
// "another restart (pid N) is in progress", N that successor's pid, and
// the Source is asked nothing for them; the first one takes over.
// (Formerly they queued behind it and read `connection reset by peer`
// when the old process exited.)
func TestConcurrentSuccessorsRefused(t *testing.T) {
	src, _, path, _ := serve(t)
	first := startSuccessor(t, path)
	pid := first.cmd.Process.Pid
	check := func(when string) {
		t.Helper()
		var wg sync.WaitGroup
		for i := range 2 { // two at once, as three simultaneous restarts are
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := prepareRefused(path)
				if got != pid {
					t.Errorf("%s: successor %d: refused for pid %d (%v), want the first successor's %d", when, i, got, err, pid)
				}
			}()
		}
		wg.Wait()
		if b := (&BusyError{PID: pid}).Error(); b != fmt.Sprintf("another restart (pid %d) is in progress", pid) {
			t.Errorf("the refusal says %q", b)
		}
	}
	check("prepared")
	// Paused: the refusals follow the commit (two at once take longer
	// than CommitTimeout on a loaded machine, and the pause would end).
	first.do(t, "pause")
	first.do(t, "commit")
	check("paused and committed")
	if src.resumed.Load() != 0 {
		t.Fatal("a refused successor resumed the paused daemon")
	}
	first.do(t, "done")
	check("after done")
	if !eventually(func() bool { return src.finished.Load() == 1 }) || src.prepared.Load() != 1 {
		t.Errorf("the Source prepared %d times and finished %d times, want once each", src.prepared.Load(), src.finished.Load())
	}
}

// TestHoldRefusesUntilRelease: Hold refuses successors as a restart in
// progress until Release; a successor that prepared and went away without
// pause leaves the daemon free for the next one.
func TestHoldRefusesUntilRelease(t *testing.T) {
	src, s, path, _ := serve(t)
	s.Hold(4242)
	if got, err := prepareRefused(path); got != 4242 {
		t.Fatalf("held: refused for pid %d (%v), want 4242", got, err)
	}
	s.Release(4243) // not the holder: nothing changes
	if got, err := prepareRefused(path); got != 4242 {
		t.Fatalf("held: refused for pid %d (%v), want 4242", got, err)
	}
	s.Release(4242)
	startSuccessor(t, path).in.Close() // prepares, then goes away
	var last error
	if !eventually(func() bool {
		c, err := Dial(path)
		if err != nil {
			last = err
			return false
		}
		defer c.Close()
		_, last = c.Prepare()
		return last == nil
	}) {
		t.Fatalf("the next successor, after the first went away before pause: %v", last)
	}
	if src.prepared.Load() < 2 || src.resumed.Load() != 0 {
		t.Errorf("prepared %d times, resumed %d times", src.prepared.Load(), src.resumed.Load())
	}
}

// ParseBusy reads back exactly what BusyError writes.
func TestParseBusy(t *testing.T) {
	if b, ok := ParseBusy((&BusyError{PID: 31337}).Error()); !ok || b.PID != 31337 {
		t.Errorf("ParseBusy: %v %v", b, ok)
	}
	for _, s := range []string{"", "another restart (pid 0) is in progress", "another restart (pid 12) is in progress; more",
		"hot restart: pidfd_open(12): no such process", "another restart (pid x) is in progress"} {
		if b, ok := ParseBusy(s); ok {
			t.Errorf("ParseBusy(%q) = %v", s, b)
		}
	}
}

// TestStalledSuccessorResumes: a successor that paused the daemon and
// then says nothing (stopped, a page-fault storm) costs CommitTimeout: the
// daemon resumes forwarding then, though the connection stays open, and a
// commit that comes later is not taken (the successor must not read).
func TestStalledSuccessorResumes(t *testing.T) {
	src, _, path, _ := serve(t)
	c, err := Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Prepare(); err != nil {
		t.Fatal(err)
	}
	if !c.Commits() {
		t.Fatalf("the server speaks %v: no commit", c.Peer())
	}
	t0 := time.Now()
	if _, err := c.Pause(); err != nil {
		t.Fatal(err)
	}
	for src.resumed.Load() == 0 && time.Since(t0) < PauseTimeout+2*time.Second {
		time.Sleep(time.Millisecond)
	}
	// Not before the deadline (a timer does not fire early), and well
	// before the old rule's PauseTimeout: how much after the deadline is
	// the machine's speed, which no pass condition may depend on (the
	// e2e stall test reports the figure).
	took := time.Since(t0)
	if src.resumed.Load() != 1 || took < CommitTimeout || took >= PauseTimeout {
		t.Fatalf("resumed %d times %v after pause, want once after %v", src.resumed.Load(), took, CommitTimeout)
	}
	if src.yielded.Load() != 0 {
		t.Errorf("yielded %d times without a commit", src.yielded.Load())
	}
	err = c.Commit()
	t.Logf("resumed %v after pause; the late commit: %v", took.Round(time.Millisecond), err)
	if err == nil {
		t.Fatal("a commit after the deadline was taken: both would read the rings")
	}
	if src.finished.Load() != 0 || src.resumed.Load() != 1 {
		t.Errorf("finished %d, resumed %d times", src.finished.Load(), src.resumed.Load())
	}
	c2, err := Dial(path) // the daemon is free for the next successor
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Prepare(); err != nil {
		t.Fatalf("a successor after the stalled one: %v", err)
	}
}

// TestCommittedSuccessorGoneFinishes: once the daemon answered commit it
// never resumes, past CommitTimeout too; a successor that then goes away
// without done makes it finish with an error (the rings are the
// successor's; the process exits so that a supervisor restarts netfwd).
func TestCommittedSuccessorGoneFinishes(t *testing.T) {
	src, _, path, _ := serve(t)
	c, err := Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Prepare(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pause(); err != nil {
		t.Fatal(err)
	}
	if src.yielded.Load() != 0 {
		t.Errorf("yielded before the commit")
	}
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	if !eventually(func() bool { return src.yielded.Load() == 1 }) { // after the answer is written
		t.Errorf("yielded %d times after the commit, want 1", src.yielded.Load())
	}
	time.Sleep(CommitTimeout + 300*time.Millisecond) // catching up: as long as it takes
	if src.resumed.Load() != 0 || src.finished.Load() != 0 {
		t.Fatalf("committed: resumed %d, finished %d times", src.resumed.Load(), src.finished.Load())
	}
	c.Close()
	if !eventually(func() bool { return src.finished.Load() == 1 }) {
		t.Fatal("the daemon did not finish after its committed successor went away")
	}
	if e := src.finishErr.Load(); e == nil || *e == nil {
		t.Errorf("finished without an error")
	} else {
		t.Logf("finished: %v", *e)
	}
	if src.resumed.Load() != 0 {
		t.Errorf("resumed %d times after a commit", src.resumed.Load())
	}
	// Held for good: the process is finishing.
	if got, err := prepareRefused(path); got != os.Getpid() {
		t.Errorf("after: refused for pid %d (%v), want %d (the successor's)", got, err, os.Getpid())
	}
}

// rawClient speaks the protocol line by line, as a successor of another
// version does.
type rawClient struct {
	c   net.Conn
	in  *bufio.Reader
	dec *json.Decoder
}

func dialRaw(t *testing.T, path string) *rawClient {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	in := bufio.NewReader(c)
	return &rawClient{c: c, in: in, dec: json.NewDecoder(in)}
}

func (r *rawClient) do(t *testing.T, line string, reply any) {
	t.Helper()
	r.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(r.c, line+"\n"); err != nil {
		t.Fatal(err)
	}
	if err := r.dec.Decode(reply); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
}

// TestVersion1Successor: a successor from before versions (no version in
// prepare, no commit) is served as 1.0: told the server's version, which
// it ignores; the pause yields at once (it reads from then on) and lasts
// past CommitTimeout, until done.
func TestVersion1Successor(t *testing.T) {
	src, _, path, _ := serve(t)
	r := dialRaw(t, path)
	var p Prepared
	r.do(t, `{"op":"prepare"}`, &p)
	if p.Error != "" || p.Version != Protocol.String() {
		t.Fatalf("prepare: %+v, want version %v", p, Protocol)
	}
	var ps Paused
	r.do(t, `{"op":"pause"}`, &ps)
	// The server yields after it wrote the answer: eventually.
	if ps.Error != "" || !eventually(func() bool { return src.yielded.Load() == 1 }) {
		t.Fatalf("pause: %+v; yielded %d times", ps, src.yielded.Load())
	}
	time.Sleep(CommitTimeout + 300*time.Millisecond)
	if src.resumed.Load() != 0 {
		t.Fatal("a 1.0 successor's pause ended after CommitTimeout: it reads the rings by then")
	}
	var d doneReply
	r.do(t, `{"op":"done"}`, &d)
	if d.Error != "" || !eventually(func() bool { return src.finished.Load() == 1 }) {
		t.Fatalf("done: %+v, finished %d", d, src.finished.Load())
	}
}

// TestVersionRefused: a successor of another major version is refused at
// prepare, before anything paused, naming both versions, and the daemon is
// free for the next; so is one whose server speaks another major version
// (the client checks too: a daemon from before versions cannot).
func TestVersionRefused(t *testing.T) {
	src, _, path, _ := serve(t)
	c, err := Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	c.version = Version{2, 0}
	_, err = c.Prepare()
	c.Close()
	var ve *VersionError
	want := fmt.Sprintf("handover protocol: this netfwd speaks 2.0, the running one %v;", Protocol)
	if !errors.As(err, &ve) || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("a 2.0 successor: %v, want %q...", err, want)
	}
	t.Logf("refused: %v", err)
	// A successor that does not know VersionError reads the reason in Error.
	r := dialRaw(t, path)
	var p Prepared
	r.do(t, `{"op":"prepare","version":"0.9"}`, &p)
	if !strings.HasPrefix(p.Error, fmt.Sprintf("handover protocol: this netfwd speaks 0.9, the running one %v;", Protocol)) || p.Version != Protocol.String() {
		t.Errorf("a 0.9 successor was answered %+v", p)
	}
	if src.prepared.Load() != 0 || src.paused.Load() != 0 {
		t.Errorf("prepared %d, paused %d times for refused successors", src.prepared.Load(), src.paused.Load())
	}
	c, err = Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Prepare(); err != nil {
		t.Fatalf("a successor of this version after the refusals: %v", err)
	}
}

// fakeRunning is a running daemon of another version: it answers prepare
// with version v ("": none, from before versions) and records the ops.
func fakeRunning(t *testing.T, v string) (string, *[]string, *sync.Mutex) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "h")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	var ops []string
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		dec, enc := json.NewDecoder(c), json.NewEncoder(c)
		for {
			var req request
			if dec.Decode(&req) != nil {
				return
			}
			mu.Lock()
			ops = append(ops, req.Op+" "+req.Version)
			mu.Unlock()
			switch req.Op {
			case "prepare":
				enc.Encode(Prepared{Version: v, PID: os.Getpid()})
			case "pause":
				enc.Encode(Paused{})
			case "done":
				enc.Encode(doneReply{})
			default:
				enc.Encode(doneReply{Error: fmt.Sprintf("unknown op %q", req.Op)})
				return
			}
		}
	}()
	return path, &ops, &mu
}

// TestVersion1Predecessor: a running daemon from before versions (it
// sends none) speaks 1.0: the successor takes over without commit, which
// that daemon does not know; a running daemon of another major version is
// refused by the successor itself.
func TestVersion1Predecessor(t *testing.T) {
	path, ops, mu := fakeRunning(t, "")
	c, err := Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Prepare(); err != nil {
		t.Fatal(err)
	}
	if c.Peer() != V1 || c.Commits() {
		t.Fatalf("a daemon without version: %v, commits %v", c.Peer(), c.Commits())
	}
	if _, err := c.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := c.Done(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := strings.Join(*ops, ",")
	mu.Unlock()
	if want := fmt.Sprintf("prepare %v,pause ,done ", Protocol); got != want {
		t.Errorf("the 1.0 daemon was asked %q, want %q", got, want)
	}

	path, ops, mu = fakeRunning(t, "2.3")
	c2, err := Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_, err = c2.Prepare()
	var ve *VersionError
	if !errors.As(err, &ve) || ve.This != Protocol || ve.Running != (Version{2, 3}) {
		t.Fatalf("a 2.3 daemon: %v", err)
	}
	t.Logf("refused: %v", err)
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]Version{"": V1, "1.0": {1, 0}, "1.1": {1, 1}, "12.34": {12, 34}} {
		if v, err := ParseVersion(in); err != nil || v != want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v", in, v, err, want)
		}
	}
	for _, in := range []string{"1", "1.", ".1", "a.b", "-1.0", "1.0.0"} {
		if v, err := ParseVersion(in); err == nil {
			t.Errorf("ParseVersion(%q) = %v", in, v)
		}
	}
	if !(Version{1, 0}).Compatible(Version{1, 7}) || (Version{1, 0}).Compatible(Version{2, 0}) || (Version{1, 0}).Has(1) || !Protocol.Has(1) {
		t.Error("Compatible/Has")
	}
}
