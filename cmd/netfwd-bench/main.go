// Command netfwd-bench runs the benchmark suites:
// `netfwd-bench SUITE [--json] [--quick] [--cpuprofile FILE]` runs one of the
// suites registered in package bench and prints its records, as a text table
// or as one JSON array (the design notes' record format). `netfwd bench`
// runs it when the binary sits next to netfwd. It is its own command so that
// the router's binary links none of the benchmarks (docs/architecture.md).
//
// `--svg DIR` also draws the records as DIR/SUITE.svg (package benchplot);
// `netfwd-bench plot --in FILE[,FILE...] --svg DIR [--name NAME]` draws saved
// JSON records without running anything (the figures of docs/plots come
// from recorded runs).
//
// `netfwd-bench bench-xdpfwd ...` is internal: an AF_XDP forwarder of suite
// veth as its own process (bench.XDPForwarderMain); the suites start the
// router itself as `netfwd run` (bench.netfwdExe finds or builds it).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"

	"github.com/netfwd/netfwd/bench"
	"github.com/netfwd/netfwd/bench/benchplot"
)

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	defer bench.RemoveBuilt()
	if len(args) > 0 && args[0] == "bench-xdpfwd" {
		return bench.XDPForwarderMain(args[1:], stderr)
	}
	if len(args) > 0 && args[0] == "plot" {
		return runPlot(args[1:], stderr)
	}
	return runBench(args, stdout, stderr)
}

func runBench(args []string, stdout, stderr io.Writer) (code int) {
	fs := flag.NewFlagSet("netfwd-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print one JSON array of records")
	quick := fs.Bool("quick", false, "small inputs and short measurements (smoke test)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the run to FILE (go tool pprof)")
	only := fs.String("only", "", "comma-separated implementations to run (veth: generator,ceiling,reflector,reflector-generic,reflector-process,minimal,linux,netfwd-afpacket,netfwd-afpacket-v3,netfwd-afxdp,netfwd-afxdp-generic; routes: config-load,fpm-nhg,fpm-inline,fpm-tcp,fpm-replay,fpm-paced-replay,fpm-paced-first,daemon-paced-replay,daemon-paced-first,lookup-churn,traffic-churn,bgp-e2e)")
	setups := fs.String("setup", "", "comma-separated set-ups to run (veth: unpinned,onecore)")
	rounds := fs.Int("rounds", 0, "rounds per measurement (0: the suite's)")
	frames := fs.Uint64("frames", 0, "frames per measurement (0: the suite's)")
	routes := fs.Int("routes", 0, "routes: prefixes of the full table (0: the suite's)")
	satOnly := fs.Bool("saturation-only", false, "veth: skip loss at 50%, soak and TCP")
	svgDir := fs.String("svg", "", "also draw the records as DIR/SUITE.svg")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: netfwd-bench SUITE [flags]   suites: %s\n", strings.Join(bench.Names(), ", "))
		fmt.Fprintf(stderr, "       netfwd-bench plot --in FILE[,FILE...] --svg DIR [--name NAME]   (draw saved --json output)\n")
		fs.PrintDefaults()
	}
	// Accept the suite name before or after the flags.
	var suite string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		suite, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if suite == "" && fs.NArg() > 0 {
		suite = fs.Arg(0)
	}
	s, ok := bench.Lookup(suite)
	if !ok {
		fmt.Fprintf(stderr, "netfwd-bench: unknown suite %q (have: %s)\n", suite, strings.Join(bench.Names(), ", "))
		return 2
	}
	if s.Root && os.Geteuid() != 0 {
		fmt.Fprintf(stderr, "netfwd-bench %s: needs root (network namespaces)\n", suite)
		return 1
	}
	env := bench.CurrentEnv()
	fmt.Fprintf(stderr, "# netfwd-bench %s: %s\n", suite, env)
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(stderr, "netfwd-bench:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "netfwd-bench:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	opts := bench.Options{Quick: *quick, Only: strings.Split(*only, ","), Setups: strings.Split(*setups, ","),
		Rounds: *rounds, Frames: *frames, Routes: *routes, SaturationOnly: *satOnly, Log: func(format string, a ...any) {
			fmt.Fprintf(stderr, "# "+format+"\n", a...)
		}}
	opts.Normalize()
	recs, err := s.Run(opts)
	if err != nil {
		fmt.Fprintf(stderr, "netfwd-bench %s: %v\n", suite, err)
		return 1
	}
	for i := range recs {
		recs[i].Env = env
	}
	if *svgDir != "" {
		// The records are printed even when drawing fails: a long run is
		// not lost to a plotting error.
		defer func() {
			if err := writePlots(*svgDir, "", recs, stderr); err != nil && code == 0 {
				code = 1
			}
		}()
	}
	if *asJSON {
		b, err := json.Marshal(recs)
		if err != nil {
			fmt.Fprintln(stderr, "netfwd-bench:", err)
			return 1
		}
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	printRecords(stdout, recs)
	return 0
}

// runPlot draws saved JSON records: netfwd-bench plot --in FILE --svg DIR.
func runPlot(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("netfwd-bench plot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "comma-separated files of `netfwd-bench SUITE --json` output (also as arguments)")
	dir := fs.String("svg", ".", "directory for SUITE.svg")
	name := fs.String("name", "", "file name instead of SUITE (records of one suite only)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	files := append(strings.Split(*in, ","), fs.Args()...)
	files = slices.DeleteFunc(files, func(s string) bool { return s == "" })
	if len(files) == 0 {
		fmt.Fprintln(stderr, "netfwd-bench plot: no input (--in FILE)")
		return 2
	}
	var recs []bench.Record
	for _, f := range files {
		rs, err := readRecordsFile(f)
		if err != nil {
			fmt.Fprintf(stderr, "netfwd-bench plot: %s: %v\n", f, err)
			return 1
		}
		recs = append(recs, rs...)
	}
	if err := writePlots(*dir, *name, recs, stderr); err != nil {
		return 1
	}
	return 0
}

func readRecordsFile(name string) ([]bench.Record, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return benchplot.ReadRecords(f)
}

// writePlots draws recs into dir and names the files written on stderr.
func writePlots(dir, name string, recs []bench.Record, stderr io.Writer) error {
	files, err := benchplot.WriteDir(dir, name, recs)
	for _, f := range files {
		fmt.Fprintf(stderr, "# wrote %s\n", f)
	}
	if err != nil {
		fmt.Fprintln(stderr, "netfwd-bench:", err)
	}
	return err
}

// printRecords writes a fixed-width table, one record per line.
func printRecords(w io.Writer, recs []bench.Record) {
	fmt.Fprintf(w, "%-8s %-16s %-44s %12s %10s %9s  %s\n", "suite", "impl", "params", "ns/op", "Mops", "allocs/op", "extra")
	for _, r := range recs {
		fmt.Fprintf(w, "%-8s %-16s %-44s %12.2f %10.3f %9.2f  %s\n", r.Suite, r.Impl, formatMap(r.Params), r.NsOp, r.Mops, r.AllocsOp, formatMap(r.Extra))
	}
}

func formatMap(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%v", k, m[k])
	}
	return b.String()
}
