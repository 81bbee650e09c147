package bench

// The workload of bench/callgrind.sh: one pipeline case, warmed up, then a
// fixed number of frames between callgrindStart and callgrindStop, where the
// script has callgrind take its count. Instructions per frame are the count
// divided by the frames, which the test prints for the script to read. Without
// NETFWD_CALLGRIND set the test runs the same code on a few frames natively
// and checks that they moved, so the harness cannot rot unnoticed.

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/netfwd/netfwd/internal/fulltable"
)

// callgrindRoutes is the table size the instruction counts in
// docs/benchmarks.md are taken with (the count barely depends on it; the
// build time under callgrind does).
const callgrindRoutes = 50_000

// callgrindStart and callgrindStop mark the counted stretch: the script has
// callgrind dump its counters on entering each, so the dump taken at
// callgrindStop holds exactly what ran in between. (Counting inside one
// function with --toggle-collect is not reliable for Go: callgrind follows
// calls on a shadow stack, and the scheduler's stack switches, such as a
// goroutine preempted by sysmon every 10 ms, end the collection early.)
// Keep their names and keep them out of line.
//
//go:noinline
func callgrindStart() { callgrindMark++ }

//go:noinline
func callgrindStop() { callgrindMark++ }

var callgrindMark int

func TestCallgrindPipeline(t *testing.T) {
	caseName := os.Getenv("NETFWD_CALLGRIND")
	frames, warm := 1<<16, 1<<14
	if caseName == "" {
		caseName, frames, warm = "routed", 256, 64
	}
	if v := os.Getenv("NETFWD_CALLGRIND_FRAMES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("NETFWD_CALLGRIND_FRAMES=%q: want a positive number", v)
		}
		frames = n
	}
	c, err := callgrindCase(caseName)
	if err != nil {
		t.Fatal(err)
	}
	body := c.Body()
	body(warm) // neighbours resolved, scratch grown, branch history warm
	before := c.Out
	callgrindStart()
	body(frames)
	callgrindStop()
	if moved := c.Out - before; moved < frames {
		t.Fatalf("%s: %d of %d frames reached the sink", caseName, moved, frames)
	}
	if os.Getenv("NETFWD_CALLGRIND") != "" {
		fmt.Printf("callgrind-case %s frames %d\n", caseName, frames) // for the script
	}
}

func callgrindCase(name string) (*PipelineCase, error) {
	switch name {
	case "routed", "routed-trie":
		all, err := fulltable.Load()
		if err != nil {
			return nil, err
		}
		all = all[:min(callgrindRoutes, len(all))]
		return NewRoutedCase(all, fulltable.RandomProbes(all, 1<<14, 7), name == "routed")
	case "bridged-unicast":
		return NewBridgedUnicastCase()
	case "bridged-flood":
		return NewBridgedFloodCase()
	}
	return nil, fmt.Errorf("callgrind case %q: want routed, routed-trie, bridged-unicast or bridged-flood", name)
}
