package bench

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Without NETFWD_BENCH_EXE and without a netfwd beside the running binary
// (a test binary: none), netfwdExe builds the router from the module, and
// that binary is netfwd.
func TestNetfwdExeBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/netfwd")
	}
	t.Setenv("NETFWD_BENCH_EXE", "")
	os.Unsetenv("NETFWD_BENCH_EXE")
	defer RemoveBuilt()
	exe, err := netfwdExe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(exe, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "netfwd ") {
		t.Fatalf("%s version: %v: %s", exe, err, out)
	}
	if again, _ := netfwdExe(); again != exe {
		t.Errorf("second call: %s, want the same build %s", again, exe)
	}
}
