package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netfwd/netfwd/internal/apply"
	"github.com/netfwd/netfwd/internal/ctlsock"
	"github.com/netfwd/netfwd/l3"
)

// `netfwd ctl` exits as ip does: 0, 2 for a failed lookup (the answer on
// stdout all the same: -j's error object), 1 for a refused request (a
// message that offers only words the socket accepts), every line of a
// streamed request answered.
func TestCtlExitStatus(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "ctl.sock")
	s, err := ctlsock.Listen(sock, ctlsock.Handler{Ctl: apply.New(l3.NewEngine(l3.EngineOptions{}))})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.Serve(); close(done) }()
	defer func() { s.Close(); <-done }()
	run := func(stdin string, args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := dispatch(append([]string{"ctl", "--ctl", sock}, args...), strings.NewReader(stdin), &out, &errb)
		return out.String(), errb.String(), code
	}
	if _, errOut, code := run("", "address add 192.0.2.1/24 dev eth0\nroute add 8.8.8.0/24 via 192.0.2.5"); code != 0 {
		t.Fatalf("config: exit %d %s", code, errOut)
	}
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"route", "get", "8.8.8.8"}, 0, "8.8.8.8 via 192.0.2.5 dev eth0 src 192.0.2.1\n"},
		{[]string{"route", "get", "9.9.9.9"}, 2, "9.9.9.9: network unreachable\n"},
		{[]string{"-j", "route", "get", "9.9.9.9"}, 2, `{"dst":"9.9.9.9","error":"network unreachable"}` + "\n"},
		{[]string{"ip", "r", "g", "nonsense"}, 1, "nonsense: invalid IPv4 address\n"},
	} {
		out, errOut, code := run("", c.args...)
		if code != c.code || out != c.out {
			t.Errorf("ctl %v: exit %d %q %q, want exit %d %q", c.args, code, out, errOut, c.code, c.out)
		}
	}
	out, _, code := run("route get 9.9.9.9\nroute get 8.8.8.8\n", "-j")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 2 || len(lines) != 2 || !strings.Contains(lines[1], `"dst":"8.8.8.8"`) {
		t.Errorf("stdin: exit %d %q", code, out)
	}
	_, errOut, code := run("", "bridge-fdb", "show")
	if code != 1 || !strings.Contains(errOut, `unknown object "bridge-fdb"`) || strings.Contains(errOut, "bridge-fdb,") {
		t.Errorf("bridge-fdb show: exit %d %q", code, errOut)
	}
}
