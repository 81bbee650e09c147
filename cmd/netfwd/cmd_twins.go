package main

// `netfwd twins remove [--netns NAME] [TWIN...]`: deletes the Linux twins
// that `netfwd run --host-path` leaves behind on purpose (they outlive the
// daemon so that a restart is not seen by the routing daemons;
// docs/hostpath.md). Without names, every twin of the namespace (the TAP
// devices whose ifalias says "netfwd twin of ..."); twins a running netfwd
// holds are refused.
//
// `netfwd twins keep` is internal: the twin keeper the daemon starts
// (hostpath.RunKeeper), which holds the twins' files between two daemons.

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/netfwd/netfwd/internal/hostpath"
	"golang.org/x/sys/unix"
)

func init() {
	register(command{name: "twins", usage: "remove [--netns NAME] [TWIN...]", run: runTwins})
}

func runTwins(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "keep" {
		return runKeeper(args[1:], stderr)
	}
	if len(args) == 0 || args[0] != "remove" {
		fmt.Fprintln(stderr, "usage: netfwd twins remove [--netns NAME] [TWIN...]")
		return 2
	}
	fs := flag.NewFlagSet("twins remove", flag.ContinueOnError)
	fs.SetOutput(stderr)
	netns := fs.String("netns", "", "the twins' network namespace (ip netns name; default: this process's)")
	names, ok := parseInterspersed(fs, args[1:])
	if !ok {
		return 2
	}
	removed, err := hostpath.RemoveTwins(*netns, names)
	for _, n := range removed {
		fmt.Fprintf(stdout, "removed %s\n", n)
	}
	if err != nil {
		fmt.Fprintf(stderr, "netfwd twins remove: %v\n", err)
		return 1
	}
	return 0
}

// runKeeper: `netfwd twins keep ... --netfwd-twin-keeper PID LINGER NSID`.
func runKeeper(args []string, stderr io.Writer) int {
	i := slices.Index(args, hostpath.KeeperArg)
	if i < 0 || i+3 >= len(args) {
		fmt.Fprintln(stderr, "netfwd twins keep: internal command of netfwd run --host-path")
		return 2
	}
	pid, err1 := strconv.Atoi(args[i+1])
	linger, err2 := time.ParseDuration(args[i+2])
	if err1 != nil || err2 != nil || !strings.HasPrefix(args[i+3], "netns:") {
		fmt.Fprintf(stderr, "netfwd twins keep: bad arguments %q\n", args[i+1:])
		return 2
	}
	// Its comm, for ps and the holder scans (started as /proc/self/exe).
	if name, err := unix.BytePtrFromString("netfwd-keeper"); err == nil {
		unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(name)), 0, 0, 0)
	}
	hostpath.RunKeeper(pid, linger)
	return 0
}
