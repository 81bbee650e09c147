package daemon

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// A refused reload logs one line per error, each FILE:LINE: reason as is
// (not one line holding them all with escaped newlines).
func TestReloadRefusedLogsEachError(t *testing.T) {
	var b bytes.Buffer
	d := &Daemon{log: slog.New(slog.NewTextHandler(&b, nil))}
	d.logRefused(errors.Join(errors.New("r.conf:3: invalid prefix \"x\""), errors.New("r.conf:7: missing destination prefix")))
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 || strings.Contains(b.String(), `\n`) ||
		!strings.Contains(lines[0], `err="r.conf:3: invalid prefix \"x\"" n=1/2`) ||
		!strings.Contains(lines[1], `err="r.conf:7: missing destination prefix" n=2/2`) {
		t.Errorf("log:\n%s", b.String())
	}
}
