package main

// Policy rules added with `netfwd ctl rule add` survive a hot restart (the
// ctl journal carries rule lines as it carries routes), and a reload that
// changes the config file's rules leaves the ctl ones alone.

import (
	"os"
	"strings"
	"testing"

	"github.com/netfwd/netfwd/internal/lab"
)

func TestHotRestartKeepsCtlRules(t *testing.T) {
	waitingTest(t)
	e := newE2E(t, lab.Standard(), nil)
	file, err := os.ReadFile(e.ConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	e.writeConfig(string(file) + "rule add pref 100 from 10.0.10.0/24 lookup 100\n")
	e.ctl("reload")
	e.ctl("rule add from 10.0.20.0/24 lookup 200") // pref 99: the second rule's minus one
	e.ctl("rule add pref 50 fwmark 0x10/0xf0 prohibit", "ip ru a pref 60 iif eth1 ipproto udp dport 53 goto 100")
	e.ctl("rule del pref 60")
	e.ctl("rule add pref 61 not to 198.18.0.0/15 lookup main suppress_prefixlength 0")
	want := "0:\tfrom all lookup local\n50:\tfrom all fwmark 0x10/0xf0 prohibit\n" +
		"61:\tnot from all to 198.18.0.0/15 lookup main suppress_prefixlength 0\n99:\tfrom 10.0.20.0/24 lookup 200\n" +
		"100:\tfrom 10.0.10.0/24 lookup 100\n32766:\tfrom all lookup main\n32767:\tfrom all lookup default\n"
	if got := e.ctl("rule show"); got != want {
		t.Fatalf("rules before the restart:\n%s\nwant:\n%s", got, want)
	}
	before := e.ctl("-j", "rule show")
	e.hotRestart()
	if got := e.ctl("rule show"); got != want {
		t.Errorf("rules after the hot restart:\n%s\nwant:\n%s", got, want)
	}
	if got := e.ctl("-j", "rule show"); got != before {
		t.Errorf("rule show -j after the hot restart:\n%s\nbefore:\n%s", got, before)
	}
	// A reload that changes the file's rule: the ctl rules stay.
	e.writeConfig(string(file) + "rule add pref 100 from 10.0.10.0/24 lookup 101\n")
	e.ctl("reload")
	want = strings.Replace(want, "lookup 100\n", "lookup 101\n", 1)
	if got := e.ctl("rule show"); got != want {
		t.Errorf("rules after the reload:\n%s\nwant:\n%s", got, want)
	}
}
