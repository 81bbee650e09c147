package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/netfwd/netfwd/internal/handover"
)

// A successor refused because another restart is in progress reports it
// on the status pipe in the words `netfwd restart` reads back
// (handover.ParseBusy) and prints, however the error was wrapped; other
// failures go as they are.
func TestStatusPipeBusy(t *testing.T) {
	for _, c := range []struct {
		err      error
		busy     int
		wantLine string
	}{
		{fmt.Errorf("hot restart: %w", &handover.BusyError{PID: 4711}), 4711, "another restart (pid 4711) is in progress"},
		{&handover.BusyError{PID: 12}, 12, "another restart (pid 12) is in progress"},
		{errors.New("hot restart: pidfd_open(12): no such process"), 0, "hot restart: pidfd_open(12): no such process"},
	} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		(&statusPipe{f: w}).failed(c.err)
		b, _ := io.ReadAll(r)
		r.Close()
		line := strings.TrimSpace(string(b))
		if line != c.wantLine {
			t.Errorf("%v: status line %q, want %q", c.err, line, c.wantLine)
		}
		got, ok := handover.ParseBusy(line)
		if ok != (c.busy != 0) || (ok && got.PID != c.busy) {
			t.Errorf("%q: ParseBusy %v %v, want pid %d", line, got, ok, c.busy)
		}
	}
}
