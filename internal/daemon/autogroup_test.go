package daemon

// Autogroups (autogroup.go): /proc/PID/autogroup parses; a successor in a
// session of its own has its group's nice lowered and raised again; a
// process sharing its group (this test's child without setsid) never has
// it changed, since that would move every process of the group.

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
)

func TestParseAutogroup(t *testing.T) {
	for _, c := range []struct {
		in       string
		id, nice int
		ok       bool
	}{
		{"/autogroup-41 nice 0\n", 41, 0, true},
		{"/autogroup-7 nice -20", 7, -20, true},
		{"/autogroup-1041 nice 19", 1041, 19, true},
		{"/autogroup-x nice 0", 0, 0, false},
		{"/autogroup-4 nice", 0, 0, false},
		{"autogroup-4 nice 0", 0, 0, false},
		{"/autogroup-4 weight 0", 0, 0, false},
		{"", 0, 0, false},
	} {
		id, nice, err := parseAutogroup(c.in)
		if (err == nil) != c.ok || id != c.id || nice != c.nice {
			t.Errorf("parseAutogroup(%q) = %d, %d, %v; want %d, %d, ok %v", c.in, id, nice, err, c.id, c.nice, c.ok)
		}
	}
}

// startSleep starts `sleep 30`, in a session of its own if setsid.
func startSleep(t *testing.T, setsid bool) int {
	t.Helper()
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("needs sleep")
	}
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

func groupNice(t *testing.T, pid int) (id, nice int) {
	t.Helper()
	id, nice, ok, err := autogroupOf(pid)
	if err != nil || !ok {
		t.Fatalf("autogroup of %d: %v (ok %v)", pid, err, ok)
	}
	return id, nice
}

func TestSuccessorGroupLoweredAndRaised(t *testing.T) {
	if !autogroupsEnabled() {
		t.Skip("autogroups are off (kernel.sched_autogroup_enabled)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root (another process's autogroup)")
	}
	ownID, ownNice := groupNice(t, os.Getpid())
	t.Cleanup(func() { // should the guard fail, this shell's group gets its nice back
		if _, nice, ok, _ := autogroupOf(os.Getpid()); ok && nice != ownNice {
			os.WriteFile("/proc/self/autogroup", []byte(strconv.Itoa(ownNice)), 0)
		}
	})
	leader := startSleep(t, true)
	if id, _ := groupNice(t, leader); id == ownID {
		t.Fatalf("a setsid child shares this process's autogroup %d", id)
	}
	if !leadsAutogroup(leader) {
		t.Fatalf("a setsid child does not lead its autogroup")
	}
	if err := LowerSuccessorGroup(leader); err != nil {
		t.Fatal(err)
	}
	if _, nice := groupNice(t, leader); nice != niceIdle {
		t.Errorf("lowered successor's group at nice %d, want %d", nice, niceIdle)
	}
	if err := setAutogroupNice(leader, 0); err != nil {
		t.Fatal(err)
	}
	if _, nice := groupNice(t, leader); nice != 0 {
		t.Errorf("raised successor's group at nice %d, want 0", nice)
	}
	if p, err := priorityOf(leader); err != nil || !p.hasGroup || p.group != 0 {
		t.Errorf("priorityOf(%d) = %+v, %v; want its group's nice 0", leader, p, err)
	}

	// A child without a session of its own shares this process's group:
	// left alone, as is this process's own (not a session leader either).
	member := startSleep(t, false)
	if leadsAutogroup(member) || leadsAutogroup(os.Getpid()) {
		t.Fatalf("a process in its parent's session counted as leading the group")
	}
	if err := LowerSuccessorGroup(member); err != nil {
		t.Fatal(err)
	}
	if err := setAutogroupNice(os.Getpid(), niceIdle); err != nil {
		t.Fatal(err)
	}
	if id, nice := groupNice(t, member); id != ownID || nice != ownNice {
		t.Errorf("the shared group is now %d at nice %d, want %d left at nice %d", id, nice, ownID, ownNice)
	}
}

// TestDefaultAutogroup: init's group, which /proc/PID/autogroup shows
// empty (CI runners started by PID 1 forward and test from it), reads as
// nice 0 and is nobody's own: never written, not even for init, a session
// leader. Before, its empty file failed the parse, and a successor of a
// process in it forwarded with its own group left at nice 19.
func TestDefaultAutogroup(t *testing.T) {
	if !autogroupsEnabled() {
		t.Skip("autogroups are off (kernel.sched_autogroup_enabled)")
	}
	b, err := os.ReadFile("/proc/1/autogroup")
	if err != nil || len(b) != 0 {
		t.Skipf("PID 1 is not in the default autogroup here (%q, %v)", b, err)
	}
	id, nice, ok, err := autogroupOf(1)
	if err != nil || !ok || id != defaultAutogroup || nice != 0 {
		t.Fatalf("autogroupOf(1) = %d, %d, %v, %v; want the default group at nice 0", id, nice, ok, err)
	}
	if p, err := priorityOf(1); err != nil || !p.hasGroup || p.group != 0 {
		t.Errorf("priorityOf(1) = %+v, %v; want a group at nice 0 (what a successor of it takes)", p, err)
	}
	if leadsAutogroup(1) {
		t.Errorf("init counted as leading the default group")
	}
	if err := setAutogroupNice(1, niceIdle); err != nil {
		t.Errorf("setAutogroupNice(1) = %v; want nothing done", err)
	}
}
