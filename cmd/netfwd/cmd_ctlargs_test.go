package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"testing"
)

// netfwd ctl reads its arguments as ip does: its own -j and --ctl
// anywhere, every other word (ip's -br, -s, ...) for the line.
func TestCtlArgs(t *testing.T) {
	for _, c := range []struct {
		args  []string
		sock  string
		json  bool
		words []string
	}{
		{[]string{"-br", "link", "show"}, defaultCtl, false, []string{"-br", "link", "show"}},
		{[]string{"-br link"}, defaultCtl, false, []string{"-br link"}},
		{[]string{"-s", "link", "--ctl", "/tmp/s"}, "/tmp/s", false, []string{"-s", "link"}},
		{[]string{"-j", "route", "show"}, defaultCtl, true, []string{"route", "show"}},
		{[]string{"--ctl=/x", "route", "show", "-j"}, "/x", true, []string{"route", "show"}},
		{[]string{"--", "-j", "x"}, defaultCtl, false, []string{"-j", "x"}},
	} {
		sock, js, words, err := ctlArgs(c.args)
		if err != nil || sock != c.sock || js != c.json || !reflect.DeepEqual(words, c.words) {
			t.Errorf("%q: %q %v %q %v", c.args, sock, js, words, err)
		}
	}
	if _, _, _, err := ctlArgs([]string{"route", "--ctl"}); err == nil {
		t.Error("--ctl without a value accepted")
	}
}

// netfwd version and --version print the build information.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out, errb bytes.Buffer
		if code := dispatch(args, nil, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d %s", args, code, errb.String())
		}
		if !regexp.MustCompile(`^netfwd \S+\nrevision .+\nbuilt with go1\.\d+`).MatchString(out.String()) {
			t.Errorf("%v: %q", args, out.String())
		}
	}
}

// netfwd replay without --out writes into a new temporary directory it
// names, not into the working directory (a checkout, usually).
func TestReplayDefaultOutput(t *testing.T) {
	cwd, _ := os.Getwd()
	examples := filepath.Join(cwd, "../../docs/examples")
	dir := t.TempDir()
	t.Chdir(dir)
	var out, errb bytes.Buffer
	args := []string{"replay", "--config", filepath.Join(examples, "replay.conf"), "--in", "eth1=" + filepath.Join(examples, "eth1.pcap")}
	if code := dispatch(args, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("replay wrote into the working directory: %v", entries)
	}
	m := regexp.MustCompile(`(?m)^output: (\S+) `).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no output line:\n%s", out.String())
	}
	defer os.RemoveAll(m[1])
	if files, _ := filepath.Glob(filepath.Join(m[1], "*.pcap")); len(files) == 0 {
		t.Errorf("no pcap in %s:\n%s", m[1], out.String())
	}
}
