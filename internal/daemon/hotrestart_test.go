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
	prio0, err := threadPriority(os.Getpid())
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
	if p, err := threadPriority(os.Getpid()); err != nil || p != prio0 {
		t.Errorf("paused: priority %+v (%v), want %+v until the commit", p, err, prio0)
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
	defer waitPriority(t, prio0) // the rest of the package runs at its priority
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
	// Committed, the daemon only waits for done, at the background
	// priority (every thread); done ends it.
	if err := cl.Commit(); err != nil {
		t.Fatal(err)
	}
	// (Lowered right after the answer, which comes first.)
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		ps := threadPriorities(t)
		idle := true
		for _, p := range ps {
			idle = idle && p == background()
		}
		if idle {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("committed: threads at %+v, want all at %+v", ps, background())
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
	setProcessPriority(prio0) // this process's: the daemon left it in the background
}

// neighbourIPs maps each neighbour's address to its device.
func neighbourIPs(ns []handover.Neighbour) map[string]string {
	m := map[string]string{}
	for _, n := range ns {
		m[n.IP.String()] = n.Dev
	}
	return m
}

// waitPriority waits until this process's priority is p again.
func waitPriority(t *testing.T, p schedPriority) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		got, err := threadPriority(os.Getpid())
		if err == nil && got == p {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("resumed: priority %+v (%v), want %+v back", got, err, p)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// threadPriorities is the priority of each thread of this process.
func threadPriorities(t *testing.T) map[int]schedPriority {
	t.Helper()
	tids, err := threadIDs()
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]schedPriority{}
	for _, tid := range tids {
		if p, err := threadPriority(tid); err == nil {
			out[tid] = p
		}
	}
	return out
}

// TestResumeRestoresNegativeNice: a daemon run at a negative nice (a
// router given priority) that yields to a successor which then goes away
// gets its own priority back. The saved value used -1 for "none": a
// daemon at nice -1..-20 stayed at nice 19 after a failed restart.
func TestResumeRestoresNegativeNice(t *testing.T) {
	prio0, err := threadPriority(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	high := schedPriority{policy: prio0.policy, nice: -3}
	if err := setProcessPriority(high); err != nil {
		t.Skipf("cannot raise this process's priority: %v", err)
	}
	defer setProcessPriority(prio0)
	tp := newTopo(t)
	tp.writeConfig(t, tp.baseConfig()...)
	d := tp.start(t)
	src := handoverSource{d}
	if _, err := src.Pause(); err != nil {
		t.Fatal(err)
	}
	src.Yield(false) // protocol 1.0: it reads from the pause on
	if p, err := threadPriority(os.Getpid()); err != nil || p != background() {
		t.Fatalf("yielded: %+v (%v), want the background %+v", p, err, background())
	}
	src.Resume() // it went away
	waitPriority(t, high)
	for tid, p := range threadPriorities(t) {
		if p != high {
			t.Errorf("resumed: thread %d at %+v, want %+v", tid, p, high)
		}
	}
	if err := tp.ping(tp.h1, "10.2.0.2", 2); err != nil {
		t.Fatalf("after the resume: %v", err)
	}
}
