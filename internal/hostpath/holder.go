package hostpath

// Who holds a TAP device: when the twin's name is taken by a TAP that some
// process has open (attaching to it fails with EBUSY), the Manager looks for the
// processes whose fdinfo says `iff: NAME` (tun's show_fdinfo). If every one
// of them is exiting (kill -9 of an earlier netfwd, or one finishing its
// shutdown), the name is free in a moment: the Manager waits, bounded. If
// one is alive, it refuses and names it.
//
// fdinfo does not say which namespace a TAP is in, so a TAP of the same
// name in another namespace shows up too; the message says "a process
// holding a TAP of that name" for that reason, and the decision only
// matters when the name is held in our namespace (the queue count says so).
//
// Locking: none; reads /proc.

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// holder is a process with a TAP of some name open.
type holder struct {
	pid     int
	comm    string
	exiting bool
	fd      int  // the holder's file descriptor attached to the TAP
	keeper  bool // a twin keeper (keeper.go): its file is ours to take
	// keeperNS identifies the namespace of the twins a keeper holds
	// (netnsID), from its command line.
	keeperNS string
}

func (h holder) String() string {
	s := fmt.Sprintf("%d (%s)", h.pid, h.comm)
	if h.keeper {
		s += " twin keeper"
	}
	if h.exiting {
		s += " exiting"
	}
	return s
}

// pfExiting is PF_EXITING in /proc/PID/stat's flags: do_exit has begun.
const pfExiting = 0x4

// sigkillBit is SIGKILL's bit in /proc/PID/status's signal masks.
const sigkillBit = 1 << (9 - 1)

// tapHolders lists the processes (under procRoot, normally /proc) that have
// a TUN/TAP file attached to name.
func tapHolders(procRoot, name string) []holder {
	want := []byte("iff:\t" + name + "\n")
	pids, _ := filepath.Glob(filepath.Join(procRoot, "[0-9]*"))
	var out []holder
	for _, dir := range pids {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil {
			continue
		}
		fds, err := os.ReadDir(filepath.Join(dir, "fdinfo"))
		if err != nil {
			continue // gone, or not ours to read
		}
		for _, fd := range fds {
			b, err := os.ReadFile(filepath.Join(dir, "fdinfo", fd.Name()))
			if err == nil && bytes.Contains(b, want) {
				h := procHolder(procRoot, pid)
				h.fd, _ = strconv.Atoi(fd.Name())
				out = append(out, h)
				break
			}
		}
	}
	return out
}

// procHolder describes process pid: its name and whether it is exiting
// (PF_EXITING, a zombie or dead state, or SIGKILL pending).
func procHolder(procRoot string, pid int) holder {
	h := holder{pid: pid, comm: "?"}
	dir := filepath.Join(procRoot, strconv.Itoa(pid))
	if b, err := os.ReadFile(filepath.Join(dir, "stat")); err == nil {
		comm, state, flags, ok := parseStat(string(b))
		if ok {
			h.comm = comm
			h.exiting = flags&pfExiting != 0 || state == "Z" || state == "X"
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "status")); err == nil && sigkillPending(b) {
		h.exiting = true
	}
	if b, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil {
		args := strings.Split(string(b), "\x00")
		if i := slices.Index(args, KeeperArg); i >= 0 && i+3 < len(args) {
			h.keeper, h.keeperNS = true, args[i+3]
		}
	}
	return h
}

// parseStat reads comm, state and flags from /proc/PID/stat ("pid (comm)
// state ppid pgrp session tty tpgid flags ..."); comm may hold spaces and
// parentheses, so the fields are counted from the last ')'.
func parseStat(s string) (comm, state string, flags uint64, ok bool) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", "", 0, false
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 7 {
		return "", "", 0, false
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	if err != nil {
		return "", "", 0, false
	}
	return s[open+1 : end], f[0], flags, true
}

// sigkillPending reads the SigPnd (thread) and ShdPnd (process) masks.
func sigkillPending(status []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != "SigPnd" && k != "ShdPnd" {
			continue
		}
		m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err == nil && m&sigkillBit != 0 {
			return true
		}
	}
	return false
}
