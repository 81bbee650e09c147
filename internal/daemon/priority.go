package daemon

// CPU priority around a hot restart. A router on a small machine has no
// idle core to spare while it forwards at rate: the successor's start
// (runtime, config, engine, rings) and the predecessor's shutdown would
// take CPU time from the workers that forward, and a worker off the CPU
// for longer than its ring holds loses frames. So `netfwd restart` starts
// the successor at the background priority (it prepares with what the
// forwarder leaves), the successor takes the predecessor's priority the
// moment it takes over, and the predecessor drops to the background
// priority for its shutdown.
//
// The background priority is nice 19 (SCHED_OTHER): `netfwd restart`
// while it waits, the predecessor for its shutdown. The successor prepares
// at SCHED_IDLE (nice 19 kept for when it leaves it): a waking worker of
// the predecessor preempts a SCHED_IDLE thread at once, where EEVDF lets a
// nice-19 one finish its slice, and the scheduler counts a CPU that runs
// only SCHED_IDLE threads as idle when it places a woken thread (so the
// worker is not queued beside the generator or another worker while the
// successor holds the other CPU). Measured with a generator that keeps its
// pace (docs/performance.md, 2026-12-06 night): 203 kpps, runs of 20
// rounds, 60 of 60 restarts without loss at SCHED_IDLE against 55 of 60
// at nice 19, whose 5 losing rounds lost 704-6,212 frames, 4 of them
// before the pause. An earlier measurement with an ordinary generator (34
// of 40 against 59 of 70) was within the noise of the generator's own
// stalls.
//
// SCHED_IDLE starves where nice 19 only slows: on a machine whose CPUs
// the forwarding fills, the successor's ~200 ms of start (this VM) would
// take a minute. So a successor still preparing after prepareIdleLimit
// goes on at nice 19 (guardIdleStart).
//
// The successor takes the predecessor's whole priority (policy, nice,
// real-time priority, and its autogroup's nice: autogroup.go), so a
// router run under chrt keeps it.
//
// sched_setattr(2) and setpriority(2) act on one thread on Linux: every
// thread of the process is set (threads created later inherit their
// creator's value).
//
// Locking: none.

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// niceIdle is the nice value of the background priority.
const niceIdle = 19

// schedPriority is a thread's scheduling policy and its parameters.
type schedPriority struct {
	policy uint32 // unix.SCHED_NORMAL (SCHED_OTHER), SCHED_BATCH, SCHED_IDLE, SCHED_FIFO, SCHED_RR
	nice   int    // SCHED_OTHER, SCHED_BATCH
	rtprio uint32 // SCHED_FIFO, SCHED_RR
	// resetOnFork: SCHED_FLAG_RESET_ON_FORK, kept as found.
	resetOnFork bool
}

// background is the priority of a process that must not take CPU from
// the forwarding.
func background() schedPriority {
	return schedPriority{policy: unix.SCHED_NORMAL, nice: niceIdle}
}

// preparing is the priority a successor starts at: it runs only on a CPU
// nothing else wants (SCHED_IDLE), with the background's nice for when
// it leaves the idle policy (guardIdleStart).
func preparing() schedPriority {
	return schedPriority{policy: unix.SCHED_IDLE, nice: niceIdle}
}

// processPriority is a process's whole priority: its threads' and, where
// it leads an autogroup of its own (autogroup.go), the group's nice.
type processPriority struct {
	threads  schedPriority
	group    int  // the autogroup's nice value
	hasGroup bool // group is known (autogroups on)
}

// backgroundProcess is background() for the whole process.
func backgroundProcess() processPriority {
	return processPriority{threads: background(), group: niceIdle, hasGroup: true}
}

// priorityOf is process pid's priority: its main thread's and its
// autogroup's nice.
func priorityOf(pid int) (processPriority, error) {
	t, err := threadPriority(pid)
	if err != nil {
		return processPriority{}, err
	}
	p := processPriority{threads: t}
	if _, nice, ok, err := autogroupOf(pid); err == nil && ok {
		p.group, p.hasGroup = nice, true
	}
	return p, nil
}

// setPriority gives this process priority p: every thread, and its
// autogroup if it leads one (a group it shares stays as it is).
func setPriority(p processPriority) error {
	err := setProcessPriority(p.threads)
	if p.hasGroup {
		if gerr := setAutogroupNice(os.Getpid(), p.group); err == nil {
			err = gerr
		}
	}
	return err
}

// threadPriority is the priority of thread (or process) tid.
func threadPriority(tid int) (schedPriority, error) {
	a, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return schedPriority{}, err
	}
	return schedPriority{policy: a.Policy, nice: int(a.Nice), rtprio: a.Priority,
		resetOnFork: a.Flags&unix.SCHED_FLAG_RESET_ON_FORK != 0}, nil
}

// setThreadPriority sets the priority of thread tid (0: the calling one).
func setThreadPriority(tid int, p schedPriority) error {
	if p.policy == unix.SCHED_IDLE {
		// The kernel sets the nice value only with SCHED_NORMAL or
		// SCHED_BATCH (__setscheduler_params): first that, then idle.
		q := p
		q.policy = unix.SCHED_NORMAL
		if err := setThreadPriority(tid, q); err != nil {
			return err
		}
	}
	a := unix.SchedAttr{Policy: p.policy, Nice: int32(p.nice), Priority: p.rtprio}
	if p.resetOnFork {
		a.Flags = unix.SCHED_FLAG_RESET_ON_FORK
	}
	return unix.SchedSetAttr(tid, &a, 0)
}

// setProcessPriority sets the priority of every thread of this process.
// A thread created meanwhile by one not yet set inherits the old value: so
// it passes over the threads until one pass finds them all set (a few).
func setProcessPriority(p schedPriority) error {
	var first error
	for range 5 {
		tids, err := threadIDs()
		if err != nil {
			return err
		}
		all := true
		for _, tid := range tids {
			if cur, err := threadPriority(tid); err != nil || cur == p {
				continue // exited, or set
			}
			all = false
			if err := setThreadPriority(tid, p); err != nil && first == nil && err != unix.ESRCH {
				first = err
			}
		}
		if all || first != nil {
			return first
		}
	}
	return first
}

// threadIDs lists the threads of this process.
func threadIDs() ([]int, error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, err
	}
	var tids []int
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// LowerPriority puts this process at the background priority (every
// thread, and its autogroup if it leads one): for a process that only
// waits beside the forwarding (`netfwd restart`).
func LowerPriority() error { return setPriority(backgroundProcess()) }

// LowerThreadForSuccessor puts the calling thread at the successor's
// preparing priority, which a process it starts inherits: `netfwd
// restart` starts the successor from it. The successor takes its
// predecessor's priority when it takes over (takeOver).
func LowerThreadForSuccessor() error { return setThreadPriority(0, preparing()) }
