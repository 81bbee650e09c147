package daemon

// The scheduler's autogroups (CONFIG_SCHED_AUTOGROUP), which the thread
// priorities of priority.go do not reach on their own.
//
// With autogroups on (kernel.sched_autogroup_enabled, the default of
// Debian's and most distributions' kernels, for tasks in the root CPU
// cgroup) every session (setsid(2)) is a task group of its own: the
// scheduler shares a CPU between the groups first, each weighted by its
// group's nice value (/proc/PID/autogroup), and a thread's own nice value
// weighs only against the threads of its own group. The successor that
// `netfwd restart` starts is a session leader (it must outlive the
// command's terminal), so its threads' nice 19 meant nothing against the
// predecessor's workers: traced (docs/performance.md, 2026-12-06), a
// predecessor's worker woken at nice 0 waited 7.5 ms for a CPU on which
// the "nice 19" successor ran for 10 ms, and its ring overflowed.
//
// So a process that leads its own session sets its group's nice along with
// its threads': 19 in the background, the predecessor's group's nice when
// it takes over. A process that shares its group with others (started
// without setsid: from a shell, by a test harness) leaves the group alone,
// since its nice would move the others too; there the threads' nice does
// the work, as it does within any one group.
//
// Raising a group's nice (lowering its weight) needs no privilege; going
// back down needs CAP_SYS_NICE below 0 only, but without CAP_SYS_ADMIN
// the kernel takes one change every 100 ms system-wide (EAGAIN otherwise:
// proc_sched_autogroup_set_nice), so a write is retried for a while.
//
// Locking: none.

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// autogroupNiceRetry bounds the retries of a write the kernel's rate
// limit refused.
const autogroupNiceRetry = time.Second

// autogroupsEnabled reports whether the kernel schedules by autogroup.
func autogroupsEnabled() bool {
	b, err := os.ReadFile("/proc/sys/kernel/sched_autogroup_enabled")
	return err == nil && strings.TrimSpace(string(b)) == "1"
}

// parseAutogroup parses /proc/PID/autogroup: "/autogroup-41 nice 0".
func parseAutogroup(s string) (id, nice int, err error) {
	f := strings.Fields(s)
	if len(f) != 3 || f[1] != "nice" || !strings.HasPrefix(f[0], "/autogroup-") {
		return 0, 0, fmt.Errorf("autogroup: unexpected %q", s)
	}
	if id, err = strconv.Atoi(strings.TrimPrefix(f[0], "/autogroup-")); err != nil {
		return 0, 0, fmt.Errorf("autogroup: unexpected %q", s)
	}
	if nice, err = strconv.Atoi(f[2]); err != nil {
		return 0, 0, fmt.Errorf("autogroup: unexpected %q", s)
	}
	return id, nice, nil
}

// defaultAutogroup is the id autogroupOf gives the kernel's default group:
// init's, which every process is in that no setsid moved out (PID 1 and
// what it starts in its own session; CI runners started so). It is the
// root task group itself: its tasks weigh one by one, each as much as a
// group at nice 0 (so nice 0 here), and it has no nice to set (EINVAL).
// /proc/PID/autogroup is empty for it (proc_sched_autogroup_show_task).
const defaultAutogroup = 0

// autogroupOf is process pid's autogroup (ok false: autogroups are off, or
// the kernel has none); id defaultAutogroup and nice 0 for init's group.
func autogroupOf(pid int) (id, nice int, ok bool, err error) {
	if !autogroupsEnabled() {
		return 0, 0, false, nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/autogroup", pid))
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, false, nil // no CONFIG_SCHED_AUTOGROUP (or pid is gone)
	}
	if err != nil {
		return 0, 0, false, err
	}
	if strings.TrimSpace(string(b)) == "" {
		return defaultAutogroup, 0, true, nil
	}
	id, nice, err = parseAutogroup(string(b))
	return id, nice, err == nil, err
}

// ownAutogroupNice is the nice of process pid's autogroup if the group is
// pid's own: it leads its session (setsid made the group for it) and
// autogroups are on (ok false otherwise). The default group is nobody's
// own, not even init's, a session leader in it.
func ownAutogroupNice(pid int) (nice int, ok bool) {
	sid, err := unix.Getsid(pid)
	if err != nil || sid != pid {
		return 0, false
	}
	id, nice, ok, err := autogroupOf(pid)
	return nice, ok && err == nil && id != defaultAutogroup
}

// leadsAutogroup reports whether process pid's autogroup is its own.
func leadsAutogroup(pid int) bool {
	_, ok := ownAutogroupNice(pid)
	return ok
}

// setAutogroupNice sets the nice value of process pid's autogroup if the
// group is pid's own (leadsAutogroup); otherwise it does nothing.
func setAutogroupNice(pid, nice int) error {
	if cur, ok := ownAutogroupNice(pid); !ok || cur == nice {
		return nil
	}
	path := fmt.Sprintf("/proc/%d/autogroup", pid)
	deadline := time.Now().Add(autogroupNiceRetry)
	for {
		err := os.WriteFile(path, []byte(strconv.Itoa(nice)), 0)
		if !errors.Is(err, unix.EAGAIN) || time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("autogroup nice %d: %w", nice, err)
			}
			return nil
		}
		time.Sleep(20 * time.Millisecond) // the kernel's rate limit: one change in 100 ms
	}
}

// LowerSuccessorGroup puts the autogroup of a successor `netfwd restart`
// started in its own session at the background nice, at once (its threads
// started at the background priority already: LowerThreadForSuccessor).
// The successor does the same itself (New), later in its start.
func LowerSuccessorGroup(pid int) error { return setAutogroupNice(pid, niceIdle) }

// lowerOwnAutogroup puts a successor that leads its own session (netfwd
// restart starts it so) at the background's group nice until it takes
// over: its group weighs against the predecessor's whole. netfwd restart
// lowered it already (LowerSuccessorGroup); this covers other starts.
func (d *Daemon) lowerOwnAutogroup() {
	if err := setAutogroupNice(os.Getpid(), niceIdle); err != nil {
		d.log.Warn("hot restart: lowering this process's autogroup", "err", err)
	}
}
