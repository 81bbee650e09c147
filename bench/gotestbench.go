package bench

// goTestBench runs benchmarks that need a package's internals and so live
// in its own _test.go files (l2's BenchmarkFDB, through its
// export_test.go): `go test -run ^$ -bench PATTERN -benchmem` of the
// package, from the module this process runs in, and parses the standard
// benchmark lines into results keyed by sub-benchmark name. With count > 1
// each name keeps its fastest run (interference on a shared machine only
// adds time), and the last value of every other metric.

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// goBenchResult is one benchmark line: ns/op, allocs/op and the custom
// metrics (b.ReportMetric) by unit.
type goBenchResult struct {
	NsOp, AllocsOp float64
	Metrics        map[string]float64
}

func goTestBench(pkg, pattern string, benchtime time.Duration, count int) (map[string]goBenchResult, error) {
	cmd := exec.Command("go", "test", "-run", "^$", "-bench", pattern, "-benchmem",
		"-benchtime", benchtime.String(), "-count", strconv.Itoa(count), pkg)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go test -bench %s %s (run from the module's directory): %v\n%s%s", pattern, pkg, err, out, stderr.Bytes())
	}
	return parseGoBench(out)
}

// parseGoBench parses `BenchmarkX/sub-P  N  V unit  V unit ...` lines; the
// name loses its Benchmark prefix and its -GOMAXPROCS suffix.
func parseGoBench(out []byte) (map[string]goBenchResult, error) {
	res := map[string]goBenchResult{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		name := strings.TrimPrefix(f[0], "Benchmark")
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		r := goBenchResult{Metrics: map[string]float64{}}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("benchmark line %q: %v", sc.Text(), err)
			}
			switch f[i+1] {
			case "ns/op":
				r.NsOp = v
			case "allocs/op":
				r.AllocsOp = v
			default:
				r.Metrics[f[i+1]] = v
			}
		}
		if old, ok := res[name]; ok && old.NsOp <= r.NsOp {
			continue
		}
		res[name] = r
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("no benchmark results in:\n%s", out)
	}
	return res, nil
}
