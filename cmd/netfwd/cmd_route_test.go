package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The command-line contract of `netfwd route get|show` (design notes).
func TestRouteCommands(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "r.conf")
	os.WriteFile(conf, []byte(`address add 192.0.2.1/24 dev eth0
route add 8.8.8.0/24 via 192.0.2.5 dev eth0
route add blackhole 10.66.0.0/16
`), 0o644)
	run := func(stdin string, args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := dispatch(args, strings.NewReader(stdin), &out, &errb)
		return out.String(), errb.String(), code
	}
	out, _, code := run("", "route", "get", "--config", conf, "-j", "8.8.8.8", "9.9.9.9", "nonsense", "10.66.1.1")
	want := `{"dst":"8.8.8.8","type":"unicast","table":"main","prefix":"8.8.8.0/24","gateway":"192.0.2.5","dev":"eth0","prefsrc":"192.0.2.1","metric":0}
{"dst":"9.9.9.9","error":"network unreachable"}
{"dst":"nonsense","error":"invalid IPv4 address"}
{"dst":"10.66.1.1","type":"blackhole","table":"main","prefix":"10.66.0.0/16","metric":0}
`
	if code != 2 || out != want { // 2: lookups failed (ip's status), every line answered
		t.Fatalf("route get -j: exit %d\n%s\nwant\n%s", code, out, want)
	}
	out, _, code = run("8.8.8.8\n192.0.2.1\n", "route", "get", "--config", conf)
	if code != 0 || out != "8.8.8.8 via 192.0.2.5 dev eth0 src 192.0.2.1\nlocal 192.0.2.1 dev eth0 table local src 192.0.2.1\n" {
		t.Fatalf("route get from stdin: exit %d\n%s", code, out)
	}
	out, _, code = run("", "route", "show", "--config", conf)
	if code != 0 || out != "8.8.8.0/24 via 192.0.2.5 dev eth0\nblackhole 10.66.0.0/16\n192.0.2.0/24 dev eth0 proto kernel scope link src 192.0.2.1\n" {
		t.Fatalf("route show: exit %d\n%s", code, out)
	}
	// The table argument is read as a `route show` line: iproute2's
	// abbreviations apply.
	long, _, _ := run("", "route", "show", "--config", conf, "table", "all", "-j")
	short, _, code := run("", "route", "show", "--config", conf, "t", "all", "-j")
	if code != 0 || long != short || !strings.Contains(long, `{"type":"local","dst":"192.0.2.1","dev":"eth0","table":"local","protocol":"kernel","scope":"host","prefsrc":"192.0.2.1","flags":[]}`) {
		t.Fatalf("route show table all -j: exit %d\n%s\n%s", code, long, short)
	}
	if _, errOut, code := run("", "route", "show", "--config", conf, "table", "nosuch"); code != 2 || !strings.Contains(errOut, `invalid table "nosuch"`) {
		t.Fatalf("bad table: exit %d %q", code, errOut)
	}
	if _, errOut, code := run("", "route", "get", "--config", conf+".missing", "1.1.1.1"); code != 1 || errOut == "" {
		t.Fatalf("missing config: exit %d %q", code, errOut)
	}
}

// route get exits as `ip route get` does: 0 for a usable route, 2 when the
// lookup fails (no route; blackhole, unreachable and prohibit routes, which
// the kernel refuses), 1 for an address that does not parse; from stdin
// every line is still answered and the status is the worst answer's. The
// -j output is the contract's whatever the status (error object on stdout).
func TestRouteGetExitStatus(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "r.conf")
	os.WriteFile(conf, []byte(`address add 192.0.2.1/24 dev eth0
route add 8.8.8.0/24 via 192.0.2.5 dev eth0
route add blackhole 10.66.0.0/16
route add unreachable 10.67.0.0/16
route add prohibit 10.68.0.0/16
`), 0o644)
	run := func(stdin string, args ...string) (string, int) {
		var out, errb bytes.Buffer
		code := dispatch(append([]string{"route", "get", "--config", conf}, args...), strings.NewReader(stdin), &out, &errb)
		return out.String(), code
	}
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"8.8.8.8"}, 0, "8.8.8.8 via 192.0.2.5 dev eth0 src 192.0.2.1\n"},
		{[]string{"9.9.9.9"}, 2, "9.9.9.9: network unreachable\n"},
		{[]string{"-j", "9.9.9.9"}, 2, `{"dst":"9.9.9.9","error":"network unreachable"}` + "\n"},
		{[]string{"10.66.0.1"}, 2, "blackhole 10.66.0.1\n"},
		{[]string{"10.67.0.1"}, 2, "unreachable 10.67.0.1\n"},
		{[]string{"10.68.0.1"}, 2, "prohibit 10.68.0.1\n"},
		{[]string{"nonsense"}, 1, "nonsense: invalid IPv4 address\n"},
		{[]string{"nonsense", "9.9.9.9", "8.8.8.8"}, 2, ""},
		{[]string{"8.8.8.8", "192.0.2.1"}, 0, ""},
	} {
		out, code := run("", c.args...)
		if code != c.code || c.out != "" && out != c.out {
			t.Errorf("route get %v: exit %d %q, want exit %d %q", c.args, code, out, c.code, c.out)
		}
	}
	// Streaming: a failure in the middle answers every line.
	out, code := run("8.8.8.8\n9.9.9.9\nnonsense\n8.8.8.4\n", "-j")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 2 || len(lines) != 4 ||
		lines[1] != `{"dst":"9.9.9.9","error":"network unreachable"}` || !strings.Contains(lines[3], `"prefix":"8.8.8.0/24"`) {
		t.Errorf("stdin: exit %d\n%s", code, out)
	}
	if _, code := run("8.8.8.8\n192.0.2.1\n"); code != 0 {
		t.Errorf("stdin, all found: exit %d", code)
	}
	if _, code := run("8.8.8.8\nbad\n"); code != 1 {
		t.Errorf("stdin, an invalid address: exit %d", code)
	}
}
