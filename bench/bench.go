// Package bench holds the benchmark suites behind `netfwd-bench SUITE`.
//
// Flow: cmd/netfwd looks a suite up by name (Lookup), calls its Run with the
// options, and prints the records it returns (text table or one JSON array).
// Each suite measures its baselines in the same run as the implementation
// under test, so ratios between records are meaningful on a noisy machine.
// The same cases run under `go test -bench` from the *_test.go files of this
// package, through the same case functions.
//
// Locking: none; suites register from init and run one at a time.
package bench

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Record is one measured case, in the JSON shape the design notes fix:
// {"suite":"fib","impl":"merged","params":{...},"ns_op":12.3,"mops":81.3,"allocs_op":0}.
// Extra keys a suite wants to report (update latencies, memory) go in Params
// or Extra; scripts read only the fixed keys.
type Record struct {
	Suite    string         `json:"suite"`
	Impl     string         `json:"impl"`
	Params   map[string]any `json:"params"`
	NsOp     float64        `json:"ns_op"`
	Mops     float64        `json:"mops"`
	AllocsOp float64        `json:"allocs_op"`
	Extra    map[string]any `json:"extra,omitempty"`
	Env      *Env           `json:"env,omitempty"`
}

// Options are the knobs common to all suites.
type Options struct {
	// Quick shrinks inputs and measuring time so a suite finishes in seconds
	// (CI and smoke tests); the full run reproduces the documented tables.
	Quick bool
	// Only restricts a suite to these implementations (veth: forwarders such
	// as reflector,linux,netfwd-afxdp); empty: all. For short comparisons on
	// a shared machine; ratios need their baseline in the list.
	Only []string
	// Setups restricts the veth suite to these set-ups (unpinned, onecore).
	Setups []string
	// Rounds and Frames override the suite's rounds and frames per
	// measurement (0: the suite's own, or Quick's).
	Rounds int
	Frames uint64
	// Routes is how many prefixes of the full table the routes suite
	// uses (0: the suite's, all of them or Quick's 100,000).
	Routes int
	// SaturationOnly skips what follows the saturation rounds (veth: loss at
	// 50 %, soak, TCP).
	SaturationOnly bool
	// Log receives progress lines (stderr in the CLI); never nil after Normalize.
	Log func(format string, args ...any)
}

// Wants reports whether Only lets any of impls run.
func (o *Options) Wants(impls ...string) bool {
	if len(o.Only) == 0 {
		return true
	}
	for _, i := range impls {
		if slices.Contains(o.Only, i) {
			return true
		}
	}
	return false
}

// Normalize fills defaults.
func (o *Options) Normalize() {
	o.Only = slices.DeleteFunc(o.Only, func(s string) bool { return s == "" })
	o.Setups = slices.DeleteFunc(o.Setups, func(s string) bool { return s == "" })
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
}

// Suite is a named benchmark suite.
type Suite struct {
	Name string
	// Doc is one line for `netfwd-bench -h`.
	Doc string
	// Root reports whether the suite needs root (network namespaces).
	Root bool
	Run  func(opts Options) ([]Record, error)
}

var (
	mu     sync.Mutex
	suites = map[string]Suite{}
)

// Register adds a suite; called from init functions of the suite files.
func Register(s Suite) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := suites[s.Name]; dup {
		panic("bench: duplicate suite " + s.Name)
	}
	suites[s.Name] = s
}

// Lookup returns the suite with the given name.
func Lookup(name string) (Suite, bool) {
	mu.Lock()
	defer mu.Unlock()
	s, ok := suites[name]
	return s, ok
}

// Names lists the registered suites, sorted.
func Names() []string {
	mu.Lock()
	defer mu.Unlock()
	var n []string
	for k := range suites {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// Env names what a run measured with: the numbers mean little without it.
type Env struct {
	CPU     string `json:"cpu"`
	GOAMD64 string `json:"goamd64"`
	Go      string `json:"go"`
	CPUs    int    `json:"cpus"`
}

// CurrentEnv reads the CPU model, the GOAMD64 level the binary was built for
// and the Go version.
func CurrentEnv() *Env {
	return &Env{CPU: cpuModel(), GOAMD64: goamd64(), Go: runtime.Version(), CPUs: runtime.NumCPU()}
}

func (e *Env) String() string {
	return fmt.Sprintf("cpu=%q cpus=%d GOAMD64=%s go=%s", e.CPU, e.CPUs, e.GOAMD64, e.Go)
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}
