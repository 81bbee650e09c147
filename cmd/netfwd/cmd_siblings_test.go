package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Without a netfwd-lab or netfwd-bench beside it or in PATH, `netfwd lab`
// and `netfwd bench` say how to run them and exit 2.
func TestSiblingMissingHint(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for _, c := range []struct{ verb, want string }{
		{"lab", "go run ./cmd/netfwd-lab"},
		{"bench", "go run ./cmd/netfwd-bench SUITE"},
	} {
		var out, errb bytes.Buffer
		code := dispatch([]string{c.verb, "fib"}, strings.NewReader(""), &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("netfwd %s: exit %d, stderr %q; want 2 and %q", c.verb, code, errb.String(), c.want)
		}
	}
}

// With netfwd-bench installed beside netfwd, `netfwd bench ARGS` runs it
// with the same arguments (the test binary, copied as DIR/netfwd, is
// netfwd through TestMain; DIR/netfwd-bench is a script).
func TestSiblingExec(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "netfwd")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho \"sibling $(basename \"$0\"): $*\"\n"
	for _, name := range []string{"netfwd-bench", "netfwd-lab"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "fib", "--quick", "--json"}, "sibling netfwd-bench: fib --quick --json\n"},
		{[]string{"lab", "--bgp"}, "sibling netfwd-lab: --bgp\n"},
	} {
		cmd := exec.Command(bin, c.args...)
		cmd.Env = append(os.Environ(), "NETFWD_TEST_MAIN=1", "PATH=/usr/bin:/bin")
		out, err := cmd.CombinedOutput()
		if err != nil || string(out) != c.want {
			t.Errorf("netfwd %s: %v, output %q, want %q", strings.Join(c.args, " "), err, out, c.want)
		}
	}
}
