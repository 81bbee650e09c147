package main

// The router's binary links no benchmark or lab code, and the datapath
// packages import no test scaffolding (docs/architecture.md, "What the
// router links"). go list -deps without -test: test files never link into
// the binary, so cmd/netfwd's tests may use the lab.

import (
	"os/exec"
	"strings"
	"testing"
)

// scaffolding are the packages that exist only for benchmarks, labs and
// tests.
var scaffolding = []string{
	"bench",
	"internal/lab", "internal/vethlab", "internal/routinglab",
	"internal/fulltable", "internal/fibbench", "internal/fdbbench",
	"internal/race", "internal/testenv",
}

// linkedPackages returns every package pkgs link (go list -deps), the
// standard library's included.
func linkedPackages(t *testing.T, pkgs ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-deps"}, pkgs...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("go list: %v", err) // no go tool: nothing to check
	}
	return strings.Fields(string(out))
}

// moduleDeps returns the module's packages that pkgs link.
func moduleDeps(t *testing.T, pkgs ...string) []string {
	t.Helper()
	const module = "github.com/netfwd/netfwd/"
	var deps []string
	for _, line := range linkedPackages(t, pkgs...) {
		if p, ok := strings.CutPrefix(line, module); ok {
			deps = append(deps, p)
		}
	}
	return deps
}

// isScaffolding: one of the packages above, or any package of the module
// named like a benchmark or a lab.
func isScaffolding(p string) bool {
	for _, s := range scaffolding {
		if p == s || strings.HasPrefix(p, s+"/") {
			return true
		}
	}
	last := p[strings.LastIndexByte(p, '/')+1:]
	return strings.Contains(last, "bench") || strings.HasSuffix(last, "lab")
}

func TestRouterLinksNoBench(t *testing.T) {
	deps := moduleDeps(t, "./cmd/netfwd")
	if len(deps) < 10 {
		t.Fatalf("go list -deps ./cmd/netfwd: only %v", deps)
	}
	for _, p := range deps {
		if isScaffolding(p) {
			t.Errorf("the router's binary (cmd/netfwd) links %s", p)
		}
	}
}

// The datapath packages (and their dependencies) import no test
// scaffolding: no benchmark hooks installed from init.
func TestDatapathImportsNoScaffolding(t *testing.T) {
	for _, pkg := range []string{"./wire", "./nexthop", "./fib", "./fib/dir24", "./neigh", "./l2", "./l3"} {
		for _, p := range moduleDeps(t, pkg) {
			if isScaffolding(p) || (strings.HasPrefix(p, "internal/") && p != "internal/hashindex") {
				t.Errorf("%s links %s", pkg, p)
			}
		}
	}
}

// The scaffolding check itself knows the packages it guards against.
func TestIsScaffolding(t *testing.T) {
	for _, p := range []string{"bench", "internal/lab", "internal/fdbbench", "internal/testenv", "cmd/netfwd-bench", "cmd/netfwd-lab", "internal/newbench"} {
		if !isScaffolding(p) {
			t.Errorf("%s not recognised", p)
		}
	}
	for _, p := range []string{"l2", "fib", "internal/daemon", "internal/hashindex", "cmd/netfwd"} {
		if isScaffolding(p) {
			t.Errorf("%s taken for scaffolding", p)
		}
	}
}

// TestRouterLinksNoGopacket: gopacket's layers tables cost every start of
// the binary (each ctl call, a hot restart's successor) 19 ms of CPU in
// package initialisation; the binary's pcap I/O is internal/pcapfile
// (docs/architecture.md, "What the router links").
func TestRouterLinksNoGopacket(t *testing.T) {
	deps := linkedPackages(t, "./cmd/netfwd")
	if len(deps) < 50 {
		t.Fatalf("go list -deps ./cmd/netfwd: only %v", deps)
	}
	for _, p := range deps {
		if strings.HasPrefix(p, "github.com/google/gopacket") {
			t.Errorf("./cmd/netfwd links %s", p)
		}
	}
}
