package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
)

// docs/daemon.md's flag table gives the defaults `netfwd run` has: every
// row with a quoted default names the flag's real default.
func TestDaemonDocDefaults(t *testing.T) {
	doc, err := os.ReadFile("../../docs/daemon.md")
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	dispatch([]string{"run", "-h"}, strings.NewReader(""), &out, &errb)
	defaults := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^  -(\w+) \w+\n\s+.*\(default "([^"]*)"\)$`).FindAllStringSubmatch(errb.String(), -1) {
		defaults[m[1]] = m[2]
	}
	rows := regexp.MustCompile("(?m)^\\| `--(\\w+)` \\| `([^`]*)` \\|").FindAllStringSubmatch(string(doc), -1)
	if len(rows) < 3 {
		t.Fatalf("found %d flag rows with a default in docs/daemon.md", len(rows))
	}
	for _, r := range rows {
		if got, ok := defaults[r[1]]; !ok || got != r[2] {
			t.Errorf("docs/daemon.md: --%s defaults to %q; netfwd run: %q (%v)", r[1], r[2], got, ok)
		}
	}
}
