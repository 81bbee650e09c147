package handover

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeSource counts the calls a successor causes.
type fakeSource struct {
	prepared, paused, resumed, finished atomic.Int32
}

func (f *fakeSource) Prepare() (Prepared, error) {
	f.prepared.Add(1)
	return Prepared{PID: os.Getpid(), Listeners: map[string]Listener{}}, nil
}
func (f *fakeSource) Pause() (Paused, error) { f.paused.Add(1); return Paused{}, nil }
func (f *fakeSource) Resume()                { f.resumed.Add(1) }
func (f *fakeSource) Finish()                { f.finished.Add(1) }

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
	src, _, path, done := serve(t)
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
	if src.resumed.Load() != 0 {
		t.Errorf("resumed %d times in a takeover", src.resumed.Load())
	}
}

// helperEnv names the handover socket a helper successor process dials
// (TestHelperSuccessor): a successor with a pid of its own.
const helperEnv = "NETFWD_HANDOVER_TEST_SUCCESSOR"

// TestHelperSuccessor is a successor in a process of its own when run by
// startSuccessor: it prepares, says "prepared", then does what each line
// of its stdin says (pause, done), saying each, and exits at EOF.
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
	first.do(t, "pause")
	check("paused")
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
