package daemon

// The priorities of a hot restart (priority.go): a thread's priority
// reads back as set (a negative nice included: the value a pause saved
// used to be -1 for "none"), a process started from a lowered thread
// inherits it, and setting the process reaches every thread.

import (
	"io"
	"log/slog"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestThreadPriorityRoundTrip(t *testing.T) {
	if unix.Geteuid() != 0 {
		t.Skip("needs root (CAP_SYS_NICE)")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with its changed priority
		tid := unix.Gettid()
		orig, err := threadPriority(tid)
		if err != nil {
			t.Error(err)
			return
		}
		for _, p := range []schedPriority{
			background(),
			{policy: unix.SCHED_IDLE, nice: 19},
			{policy: unix.SCHED_FIFO, rtprio: 1},
			{policy: unix.SCHED_NORMAL, nice: -1},
			{policy: unix.SCHED_BATCH, nice: -5},
			{policy: unix.SCHED_NORMAL, nice: 7, resetOnFork: true},
			orig,
		} {
			if err := setThreadPriority(0, p); err != nil {
				t.Errorf("set %+v: %v", p, err)
				continue
			}
			if got, err := threadPriority(tid); err != nil || got != p {
				t.Errorf("set %+v, read back %+v (%v)", p, got, err)
			}
		}
	}()
	<-done
}

func TestLoweredThreadStartsBackgroundChild(t *testing.T) {
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("needs sleep")
	}
	type result struct {
		tid   int
		child schedPriority
	}
	got := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked (as in netfwd restart)
		r := result{tid: unix.Gettid()}
		defer func() { got <- r }()
		if err := LowerThreadForSuccessor(); err != nil {
			t.Error(err)
		}
		cmd := exec.Command("sleep", "5")
		if err := cmd.Start(); err != nil {
			t.Error(err)
			return
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		p, err := threadPriority(cmd.Process.Pid)
		if err != nil {
			t.Error(err)
		}
		r.child = p
	}()
	r := <-got
	if r.child != preparing() {
		t.Errorf("the child of a lowered thread runs at %+v, want %+v", r.child, preparing())
	}
	// Only the one thread (which may be the main thread: a goroutine
	// locks whichever thread it runs on).
	for tid, p := range threadPriorities(t) {
		if tid != r.tid && p == preparing() {
			t.Errorf("thread %d is at %+v too: only thread %d was to be lowered", tid, p, r.tid)
		}
	}
}

// keepProcessPriority skips a test without root (CAP_SYS_NICE: back from
// a lowered priority) and gives the process its priority back at the end.
func keepProcessPriority(t *testing.T) schedPriority {
	t.Helper()
	if unix.Geteuid() != 0 {
		t.Skip("needs root (CAP_SYS_NICE)")
	}
	orig, err := threadPriority(unix.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { setProcessPriority(orig) })
	return orig
}

func TestSetProcessPriorityReachesEveryThread(t *testing.T) {
	orig := keepProcessPriority(t)
	// Threads that exist: goroutines blocked in a system call each hold one.
	stop := make(chan struct{})
	defer close(stop)
	for range 4 {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			<-stop
		}()
	}
	for _, p := range []schedPriority{background(), orig} {
		if err := setProcessPriority(p); err != nil {
			t.Fatal(err)
		}
		tids, err := threadIDs()
		if err != nil {
			t.Fatal(err)
		}
		if len(tids) < 2 {
			t.Fatalf("%d threads: the check means nothing", len(tids))
		}
		for _, tid := range tids {
			if got, err := threadPriority(tid); err == nil && got != p {
				t.Errorf("thread %d at %+v after setting the process to %+v", tid, got, p)
			}
		}
	}
}

// TestIdleStartGuard: a successor still preparing at SCHED_IDLE after the
// guard's limit goes on at nice 19 (on a machine the forwarding fills it
// would otherwise wait for a gap in the traffic); one that took its
// predecessor's priority already is left alone.
func TestIdleStartGuard(t *testing.T) {
	keepProcessPriority(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, took := range []bool{false, true} {
		if err := setProcessPriority(preparing()); err != nil {
			t.Fatal(err)
		}
		d := &Daemon{log: log, succ: &successor{}}
		d.succ.tookPriority = took
		d.guardIdleStart(20 * time.Millisecond)
		want, wait := background(), 5*time.Second // until the guard has set every thread
		if took {
			// Nothing to wait for: what must not change is checked after
			// the guard's time (on a slower machine the check is weaker,
			// never wrong).
			want, wait = preparing(), 0
			time.Sleep(200 * time.Millisecond)
		}
		deadline := time.Now().Add(wait)
		for {
			off := map[int]schedPriority{}
			for tid, p := range threadPriorities(t) {
				if p != want {
					off[tid] = p
				}
			}
			if len(off) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("took over %v: threads %+v, want all at %+v", took, off, want)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		d.succ.idleGuard.Stop()
		d.succ.prioMu.Lock() // a guard that fired has returned: it holds prioMu throughout
		d.succ.prioMu.Unlock()
	}
}
