package handover

import (
	"os"
	"path/filepath"
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
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("the server serves on after a takeover")
	}
	if src.finished.Load() != 1 {
		t.Errorf("finished %d times", src.finished.Load())
	}
	if src.resumed.Load() != 0 {
		t.Errorf("resumed %d times in a takeover", src.resumed.Load())
	}
}
