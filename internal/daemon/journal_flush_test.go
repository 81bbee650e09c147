package daemon

// `route flush` / `neigh flush` through the control socket are ctl changes
// like config lines: refused while a hot restart holds the daemon, and
// journaled as the flush line, which a replay runs again (journal.go).

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/netfwd/netfwd/internal/ctlsock"
)

func TestCtlFlushJournaled(t *testing.T) {
	tp := newTopo(t)
	tp.writeConfig(t, append(tp.baseConfig(), "route add 10.9.0.0/16 via 10.2.0.2 proto static")...)
	d := tp.start(t)
	sock := filepath.Join(tp.dir, "ctl.sock")
	do := func(lines ...string) (string, error) { return ctlsock.Do(sock, lines, false) }
	if _, err := do("route add 10.8.0.0/16 via 10.2.0.2 proto static",
		"neigh add 10.2.0.77 lladdr 02:00:00:00:00:77 dev "+tp.r2+" nud permanent"); err != nil {
		t.Fatal(err)
	}
	routes := func() string {
		out, err := do("route show")
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	perm := func() string {
		out, err := do("neigh show nud permanent")
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	flushes := []string{"route flush proto static", "neigh flush dev " + tp.r2 + " nud permanent"}

	// Held by a hot restart: refused as a config line is, nothing flushed
	// or journaled.
	journal := d.journalCopy()
	d.handoverSrv.Hold(4711)
	want := errHandoverHeld{4711}.Error()
	for _, f := range append(flushes, "route add 10.7.0.0/16 via 10.2.0.2") {
		if _, err := do(f); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("`%s` while a restart holds the daemon: %v, want %q", f, err, want)
		}
	}
	d.handoverSrv.Release(4711)
	if got := routes(); !strings.Contains(got, "10.8.0.0/16") || !strings.Contains(got, "10.9.0.0/16") {
		t.Errorf("a refused flush changed the routes:\n%s", got)
	}
	if got := perm(); !strings.Contains(got, "10.2.0.77") {
		t.Errorf("a refused flush changed the neighbours:\n%s", got)
	}
	if got := d.journalCopy(); !slices.EqualFunc(got, journal, slices.Equal) {
		t.Errorf("refused requests changed the journal: %q, was %q", got, journal)
	}

	// Applied: journaled as the lines, each a batch of its own.
	if _, err := do(flushes...); err != nil {
		t.Fatal(err)
	}
	if got := routes(); strings.Contains(got, "10.8.0.0/16") || strings.Contains(got, "10.9.0.0/16") {
		t.Errorf("after %s:\n%s", flushes[0], got)
	}
	if got := perm(); strings.Contains(got, "10.2.0.77") {
		t.Errorf("after %s:\n%s", flushes[1], got)
	}
	journal = d.journalCopy()
	if n := len(journal); n != 3 || !slices.Equal(journal[1], flushes[:1]) || !slices.Equal(journal[2], flushes[1:]) {
		t.Fatalf("journal %q, want the add batch, then %q and %q", journal, flushes[0], flushes[1])
	}

	// A replay runs the flushes again where they stand: the batch before
	// them adds the route and the neighbour back, the flushes take them.
	if err := d.replayJournal(journal); err != nil {
		t.Fatal(err)
	}
	if got := routes(); strings.Contains(got, "10.8.0.0/16") {
		t.Errorf("after the replay:\n%s", got)
	}
	if got := perm(); strings.Contains(got, "10.2.0.77") {
		t.Errorf("after the replay:\n%s", got)
	}
	// A flush whose device is gone flushes nothing and does not fail the
	// replay (its entries are gone with the device).
	if err := d.replayJournal([][]string{{"neigh flush dev nosuch0 nud all"}}); err != nil {
		t.Errorf("replaying a flush of a missing device: %v", err)
	}
	if _, err := do("neigh flush dev nosuch0"); err == nil || !strings.Contains(err.Error(), `Cannot find device "nosuch0"`) {
		t.Errorf("ctl neigh flush of a missing device: %v", err)
	}
}
