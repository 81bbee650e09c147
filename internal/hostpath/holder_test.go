package hostpath

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// fakeProc writes /proc-like files for the holder scan.
func fakeProc(t *testing.T, root string, pid, stat, status string, fdinfo ...string) {
	t.Helper()
	dir := filepath.Join(root, pid)
	if err := os.MkdirAll(filepath.Join(dir, "fdinfo"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644)
	os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644)
	for i, info := range fdinfo {
		os.WriteFile(filepath.Join(dir, "fdinfo", string(rune('3'+i))), []byte(info), 0o644)
	}
}

func stat(comm, state string, flags int) string {
	return "123 (" + comm + ") " + state + " 1 1 1 0 -1 " + strconv.Itoa(flags) + " 0 0 0 0 1 2 3 4 20 0 1 0 100\n"
}

const tunInfo = "pos:\t0\nflags:\t02104002\nmnt_id:\t24\nino:\t104\niff:\tnf-eth1\n"

func TestTapHolders(t *testing.T) {
	root := t.TempDir()
	idle := "SigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\n"
	fakeProc(t, root, "100", stat("netfwd", "S", 0x400100), idle, "pos:\t0\n", tunInfo)                                 // live holder
	fakeProc(t, root, "200", stat("net fwd) (x", "S", 0x400104), idle, tunInfo)                                         // PF_EXITING
	fakeProc(t, root, "300", stat("netfwd", "S", 0), "SigPnd:\t0000000000000100\nShdPnd:\t0000000000000000\n", tunInfo) // SIGKILL pending
	fakeProc(t, root, "400", stat("netfwd", "Z", 0), idle, tunInfo)                                                     // zombie
	fakeProc(t, root, "500", stat("other", "S", 0), idle, "pos:\t0\niff:\tnf-eth10\n")                                  // another name
	fakeProc(t, root, "600", stat("other", "S", 0), "SigPnd:\t0000000000000200\n", "pos:\t0\n")                         // no TAP
	fakeProc(t, root, "700", stat("netfwd-keeper", "S", 0), idle, tunInfo)                                              // a twin keeper
	os.WriteFile(filepath.Join(root, "700", "cmdline"), []byte("/proc/self/exe\x00twins\x00keep\x00"+KeeperArg+"\x00100\x001m0s\x00netns:4:4026\x00"), 0o644)
	hs := tapHolders(root, "nf-eth1")
	slices.SortFunc(hs, func(a, b holder) int { return a.pid - b.pid })
	want := []holder{
		{pid: 100, comm: "netfwd", fd: 4},
		{pid: 200, comm: "net fwd) (x", exiting: true, fd: 3},
		{pid: 300, comm: "netfwd", exiting: true, fd: 3},
		{pid: 400, comm: "netfwd", exiting: true, fd: 3},
		{pid: 700, comm: "netfwd-keeper", fd: 3, keeper: true, keeperNS: "netns:4:4026"},
	}
	if !slices.Equal(hs, want) {
		t.Fatalf("holders %v, want %v", hs, want)
	}
	if got := holderList(want[:2]); got != "100 (netfwd), 200 (net fwd) (x) exiting" {
		t.Errorf("holderList = %q", got)
	}
}

func TestHolderOfSelf(t *testing.T) {
	h := procHolder("/proc", os.Getpid())
	if h.exiting || h.comm == "?" || h.pid != os.Getpid() {
		t.Fatalf("this process reads as %+v", h)
	}
}
