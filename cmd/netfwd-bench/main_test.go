package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netfwd/netfwd/bench"
)

const mcastJSON = `[
{"suite":"mcast","impl":"nofilter","params":{"frames":1048576,"ports":8},"ns_op":246,"mops":4,"allocs_op":0},
{"suite":"mcast","impl":"filter","params":{"frames":1048576,"ports":8},"ns_op":31.9,"mops":31,"allocs_op":0}]`

func isSVG(t *testing.T, name string) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("<svg")) || !bytes.Contains(b, []byte("nofilter (baseline)")) {
		t.Errorf("%s: not the mcast figure: %.200s", name, b)
	}
}

func TestPlotCommand(t *testing.T) {
	tmp := t.TempDir()
	in := filepath.Join(tmp, "mcast.json")
	if err := os.WriteFile(in, []byte(mcastJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "plots")
	var stdout, stderr bytes.Buffer
	if rc := dispatch([]string{"plot", "--in", in, "--svg", dir}, &stdout, &stderr); rc != 0 {
		t.Fatalf("plot --in --svg: exit %d: %s", rc, stderr.String())
	}
	isSVG(t, filepath.Join(dir, "mcast.svg"))
	if !strings.Contains(stderr.String(), "# wrote "+filepath.Join(dir, "mcast.svg")) {
		t.Errorf("stderr does not name the file: %q", stderr.String())
	}
	// Files as arguments, and --name.
	if rc := dispatch([]string{"plot", "--svg", dir, "--name", "mcast-old", in}, &stdout, &stderr); rc != 0 {
		t.Fatalf("plot FILE --name: exit %d: %s", rc, stderr.String())
	}
	isSVG(t, filepath.Join(dir, "mcast-old.svg"))
	for _, tc := range []struct {
		args []string
		rc   int
	}{
		{[]string{"plot"}, 2},                                          // no input
		{[]string{"plot", "--bogus"}, 2},                               // unknown flag
		{[]string{"plot", "--in", filepath.Join(tmp, "none.json")}, 1}, // missing file
		{[]string{"plot", "--svg", dir, "--name", "a/b", in}, 1},       // bad name
	} {
		stderr.Reset()
		if rc := dispatch(tc.args, &stdout, &stderr); rc != tc.rc {
			t.Errorf("%v: exit %d, want %d (%s)", tc.args, rc, tc.rc, stderr.String())
		}
	}
}

// --svg after a suite's run: the records are printed and the figure written.
func TestSuiteSVGFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("runs suite mcast --quick")
	}
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	// 64 Ki frames a case, not quick's 1 Mi: the figure is what is
	// tested, and the full count took 30 s under -race.
	if rc := dispatch([]string{"--svg", dir, "--quick", "--frames", "65536", "--json", "mcast"}, &stdout, &stderr); rc != 0 {
		t.Fatalf("exit %d: %s", rc, stderr.String())
	}
	var recs []bench.Record
	if err := json.Unmarshal(stdout.Bytes(), &recs); err != nil || len(recs) != 2 {
		t.Fatalf("records %q: %v", stdout.String(), err)
	}
	isSVG(t, filepath.Join(dir, "mcast.svg"))
	// A figure that cannot be written fails the command, after the records.
	stdout.Reset()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if rc := dispatch([]string{"mcast", "--quick", "--frames", "65536", "--json", "--svg", file}, &stdout, &stderr); rc != 1 || stdout.Len() == 0 {
		t.Errorf("--svg onto a file: exit %d, %d bytes of records, want 1 and the records", rc, stdout.Len())
	}
}
