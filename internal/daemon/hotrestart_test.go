package daemon

// The running daemon's side of a hot restart, driven by a handover client
// in the test (no successor process): prepare carries the neighbours
// learned so far and pause only those learned since; the pause parks the
// workers quickly, a successor that goes away resumes forwarding, and the
// commit lowers the process's priority while it waits for done.

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/handover"
)

func TestPauseSendsNeighboursLearnedSincePrepare(t *testing.T) {
	tp := newTopo(t)
	tp.writeConfig(t, tp.baseConfig()...)
	d := tp.start(t)
	ctl := filepath.Join(tp.dir, "ctl.sock")
	nice0, err := processNice(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}

	// Nothing learned yet: prepare carries no neighbour; the pings teach
	// the daemon h1 and h2 (learned, not from the config), which the pause
	// then carries.
	cl, err := handover.Dial(handover.Path(ctl))
	if err != nil {
		t.Fatal(err)
	}
	prep, err := cl.Prepare()
	if err != nil {
		t.Fatal(err)
	}
	if len(prep.Neighbours) != 0 {
		t.Fatalf("prepare before any traffic carried neighbours: %v", prep.Neighbours)
	}
	if err := tp.ping(tp.h1, "10.2.0.2", 2); err != nil {
		t.Fatal(err)
	}
	p, err := cl.Pause()
	if err != nil {
		t.Fatal(err)
	}
	if got := neighbourIPs(p.Neighbours); got["10.1.0.2"] != tp.r1 || got["10.2.0.2"] != tp.r2 {
		t.Fatalf("pause after the pings carried %v, want 10.1.0.2 on %s and 10.2.0.2 on %s", p.Neighbours, tp.r1, tp.r2)
	}
	if p.Took > time.Second {
		t.Errorf("the workers took %v to park (idle: they are woken)", p.Took)
	}
	if len(p.Positions[tp.r1]) != 2 || len(p.Positions[tp.r2]) != 2 {
		t.Errorf("positions of 2 queues a port expected: %v", p.Positions)
	}
	// Paused, not committed: the daemon must answer the commit at once,
	// at its priority.
	if n, err := processNice(os.Getpid()); err != nil || n != nice0 {
		t.Errorf("paused: nice %d (%v), want %d until the commit", n, err, nice0)
	}

	// The successor goes away: forwarding resumes.
	cl.Close()
	if err := tp.ping(tp.h1, "10.2.0.2", 2); err != nil {
		t.Fatalf("after the successor went away: %v", err)
	}

	// A second successor: prepare carries what was learned, the pause
	// nothing new.
	cl, err = handover.Dial(handover.Path(ctl))
	if err != nil {
		t.Fatal(err)
	}
	defer waitNice(t, nice0) // the rest of the package runs at its priority
	defer cl.Close()
	if prep, err = cl.Prepare(); err != nil {
		t.Fatal(err)
	}
	if got := neighbourIPs(prep.Neighbours); got["10.1.0.2"] != tp.r1 || got["10.2.0.2"] != tp.r2 {
		t.Fatalf("prepare carried %v", prep.Neighbours)
	}
	if p, err = cl.Pause(); err != nil {
		t.Fatal(err)
	}
	if len(p.Neighbours) != 0 {
		t.Fatalf("pause repeated neighbours prepare carried: %v", p.Neighbours)
	}
	// Committed, the daemon only waits for done, at nice 19 (every
	// thread); done ends it.
	if err := cl.Commit(); err != nil {
		t.Fatal(err)
	}
	// (Lowered right after the answer, which comes first.)
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		ns := threadNices(t)
		idle := true
		for _, n := range ns {
			idle = idle && n == niceIdle
		}
		if idle {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("committed: threads at nice %v, want all at %d", ns, niceIdle)
			break
		}
	}
	if err := cl.Done(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.finish:
	case <-time.After(5 * time.Second):
		t.Fatal("done did not finish the daemon")
	}
	setProcessNice(nice0) // this process's: the daemon left it at nice 19
}

// neighbourIPs maps each neighbour's address to its device.
func neighbourIPs(ns []handover.Neighbour) map[string]string {
	m := map[string]string{}
	for _, n := range ns {
		m[n.IP.String()] = n.Dev
	}
	return m
}

// waitNice waits until this process's priority is nice again.
func waitNice(t *testing.T, nice int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		n, err := processNice(os.Getpid())
		if err == nil && n == nice {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("resumed: nice %d (%v), want %d back", n, err, nice)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// threadNices is the nice value of each thread of this process.
func threadNices(t *testing.T) map[int]int {
	t.Helper()
	tids, err := threadIDs()
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int{}
	for _, tid := range tids {
		if n, err := processNice(tid); err == nil {
			out[tid] = n
		}
	}
	return out
}
