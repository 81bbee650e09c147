package daemon

// CPU priority around a hot restart. A router on a small machine has no
// idle core to spare while it forwards at rate: the successor's start
// (runtime, config, engine, rings) and the predecessor's shutdown would
// take CPU time from the workers that forward, and a worker off the CPU
// for longer than its ring holds loses frames. So `netfwd restart` starts
// the successor at nice 19 (it prepares with what the forwarder leaves),
// the successor takes the predecessor's priority the moment it takes over,
// and the predecessor drops to nice 19 for its shutdown.
//
// setpriority(2) acts on one thread on Linux: every thread of the process
// is set (threads created later inherit their creator's value).
//
// Locking: none.

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// niceIdle is the priority a process gets while it must not compete with
// the forwarder.
const niceIdle = 19

// setProcessNice sets the nice value of every thread of this process.
func setProcessNice(nice int) error {
	tids, err := threadIDs()
	if err != nil {
		return err
	}
	var first error
	for _, tid := range tids {
		if err := unix.Setpriority(unix.PRIO_PROCESS, tid, nice); err != nil && first == nil {
			first = err
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

// processNice is the nice value of process pid (its main thread).
func processNice(pid int) (int, error) {
	// getpriority returns 20 - nice for PRIO_PROCESS (the raw syscall).
	p, err := unix.Getpriority(unix.PRIO_PROCESS, pid)
	if err != nil {
		return 0, err
	}
	return 20 - p, nil
}

// LowerPriority puts every thread of this process at nice 19: for a
// process that only waits beside the forwarding (`netfwd restart`).
func LowerPriority() error { return setProcessNice(niceIdle) }
