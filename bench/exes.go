package bench

// The executables the suites start as child processes. The benchmarks are
// their own command (cmd/netfwd-bench), not part of the router's binary, so
// there are two:
//
//   - netfwdExe, the router (`netfwd run ...`): NETFWD_BENCH_EXE when set,
//     else the netfwd next to this executable (both installed in one
//     directory), else one built from the module this process runs in
//     (`go build ./cmd/netfwd`, once per process, into a temporary
//     directory that RemoveBuilt deletes).
//   - benchExe, the bench binary itself (`netfwd-bench bench-xdpfwd ...`):
//     NETFWD_BENCH_SELF when set (tests, whose binary has no such
//     command), else this executable.
//
// Locking: the build runs once (sync.Once); the results are read-only.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

var built struct {
	once sync.Once
	dir  string
	exe  string
	err  error
}

func netfwdExe() (string, error) {
	if e := os.Getenv("NETFWD_BENCH_EXE"); e != "" {
		return e, nil
	}
	if self, err := os.Executable(); err == nil && !strings.Contains(self, "go-build") {
		sibling := filepath.Join(filepath.Dir(self), "netfwd")
		if _, err := os.Stat(sibling); err == nil {
			return sibling, nil
		}
	}
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "netfwd-bench-router-")
		if err != nil {
			built.err = err
			return
		}
		built.dir = dir
		exe := filepath.Join(dir, "netfwd")
		out, err := exec.Command("go", "build", "-o", exe, "github.com/netfwd/netfwd/cmd/netfwd").CombinedOutput()
		if err != nil {
			built.err = fmt.Errorf("the suite runs the router as a child process: no netfwd next to this binary, "+
				"NETFWD_BENCH_EXE unset, and `go build ./cmd/netfwd` failed (run from the module's directory): %v: %s", err, out)
			return
		}
		built.exe = exe
	})
	return built.exe, built.err
}

func benchExe() (string, error) {
	if e := os.Getenv("NETFWD_BENCH_SELF"); e != "" {
		return e, nil
	}
	return os.Executable()
}

// RemoveBuilt deletes the router netfwdExe built, if it built one.
func RemoveBuilt() {
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
}
