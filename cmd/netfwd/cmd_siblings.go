package main

// `netfwd lab ...` and `netfwd bench ...`: the lab and the benchmark suites
// are their own commands (cmd/netfwd-lab, cmd/netfwd-bench), so that the
// binary a router runs links none of their code (docs/architecture.md;
// TestRouterLinksNoBench). These two verbs replace this process with the
// sibling binary, netfwd-lab or netfwd-bench next to this executable or in
// PATH, with the same arguments; without one they say how to run it.

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

func init() {
	register(command{name: "lab", usage: "[ARGS]   (runs netfwd-lab: go run ./cmd/netfwd-lab, as root)",
		run: func(args []string, _ io.Reader, _, stderr io.Writer) int {
			return execSibling("netfwd-lab", args, stderr)
		}})
	register(command{name: "bench", usage: "SUITE [ARGS]   (runs netfwd-bench: go run ./cmd/netfwd-bench SUITE)",
		run: func(args []string, _ io.Reader, _, stderr io.Writer) int {
			return execSibling("netfwd-bench", args, stderr)
		}})
}

// siblingPath finds the command name next to this executable, then in PATH.
func siblingPath(name string) (string, bool) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, true
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, true
	}
	return "", false
}

// execSibling execs name with args; it returns only when it cannot.
func execSibling(name string, args []string, stderr io.Writer) int {
	p, ok := siblingPath(name)
	if !ok {
		fmt.Fprintf(stderr, "netfwd: %s is its own command, not part of the router's binary: run\n", name)
		fmt.Fprintf(stderr, "  go run ./cmd/%s %s   (from the source tree; the lab as root)\n", name, argsHint(name))
		fmt.Fprintf(stderr, "  or go build -o DIR ./cmd/... and put %s next to netfwd\n", name)
		return 2
	}
	err := syscall.Exec(p, append([]string{p}, args...), os.Environ())
	fmt.Fprintf(stderr, "netfwd: exec %s: %v\n", p, err)
	return 1
}

func argsHint(name string) string {
	if name == "netfwd-bench" {
		return "SUITE [--json] [--quick]"
	}
	return "[--keep] [--bgp]"
}
