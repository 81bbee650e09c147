// Package testenv gives tests real Linux network namespaces: it checks for
// root and the tools, creates namespaces with unique names and removes them
// when the test ends, pass or fail.
//
// Tests that need root skip when they cannot run, unless NETFWD_E2E=1 is
// set (CI sets it), in which case they fail: a CI run never silently skips.
// Every tool a test runs is named in its RequireRoot or Have call;
// cmd/netfwd/ci_test.go checks that .ci/run installs the package of each.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
)

// RequireRoot skips (or, under NETFWD_E2E=1, fails) a test that needs root
// and the given commands.
func RequireRoot(t testing.TB, tools ...string) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "needs root"
	}
	for _, tool := range append([]string{"ip"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil && why == "" {
			why = "needs " + tool
		}
	}
	if why == "" {
		return
	}
	if os.Getenv("NETFWD_E2E") == "1" {
		t.Fatalf("%s (NETFWD_E2E=1: end-to-end tests must run)", why)
	}
	t.Skip(why)
}

// Have reports whether tool is installed, for the part of a test that needs
// it while the rest runs without: missing, it fails the test under
// NETFWD_E2E=1 (.ci/run installs every tool) and otherwise logs why that
// part is left out.
func Have(t testing.TB, tool string) bool {
	t.Helper()
	if _, err := exec.LookPath(tool); err == nil {
		return true
	}
	if os.Getenv("NETFWD_E2E") == "1" {
		t.Fatalf("needs %s (NETFWD_E2E=1: end-to-end tests must run)", tool)
	}
	t.Logf("%s not installed: the checks that need it are skipped", tool)
	return false
}

var seq atomic.Int64

// Netns creates a network namespace that is deleted when the test ends.
func Netns(t testing.TB, prefix string) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), seq.Add(1))
	Run(t, "ip", "netns", "add", name)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	Run(t, "ip", "-n", name, "link", "set", "lo", "up")
	return name
}

// Run runs a command and fails the test if it fails; it returns stdout.
func Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := Output(name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// Output runs a command and returns its combined output.
func Output(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
