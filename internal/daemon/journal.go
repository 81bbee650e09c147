package daemon

// The run-time journal: every config line the control socket applied
// (`netfwd ctl route add ...`, `neigh add ... nud permanent`, `bridge fdb
// add ... static`, `address add`, `nexthop add`, `link set ...`), and
// every `route flush` / `neigh flush` it ran, in the order they were
// acknowledged. The config file does not hold them, and a hot restart must
// not lose what ctl acknowledged (issue 28: `ip route add` on Linux stays
// until someone deletes it): the running daemon hands the journal over at
// prepare, and the successor applies its config file and then the
// journal, batch by batch, before it takes the ports. A batch the
// successor cannot apply fails the takeover (the old daemon forwards on):
// nothing acknowledged is dropped silently.
//
// A flush is journaled as its line (`route flush proto static` as
// written), one batch of its own, not as the deletes it made: the replay
// runs the selection again at that point (ctlFlushLocked), on the file
// and the earlier batches, so it takes what the flush took there, as
// `rule flush` does (a config line). Its deletes are lenient, so an entry
// the successor's file no longer has is skipped rather than failing the
// takeover, and a `neigh flush dev D` whose D is gone flushes nothing.
// The cost of replaying file then journal, where the old daemon may have
// had file, journal, reload, journal (docs/reliability.md): a route the
// file gained after the flush (a reload, an edit before the restart) that
// the selector takes is flushed by the replay too.
//
// While a successor holds the handover (from its prepare until the old
// daemon exits, or the successor gives up), ctl changes, flushes included,
// are refused with an error naming the restart: the journal the successor
// got at prepare is final. A plain restart (stop, start) starts with an
// empty journal: the config file is the truth then, as before. A reload
// (SIGHUP) keeps the journal: the ctl changes live on beside the file's,
// as they do in the engine.
//
// Locking: the journal is guarded by Daemon.ctlApplyMu (ctlApply and
// ctlFlush append to it; Prepare copies it holding the same lock, so a
// batch is either in the copy or refused).

import (
	"errors"
	"fmt"
	"strings"

	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/ctlsock"
)

// maxJournalLines bounds the journal (about 40 bytes a route line: 40 MB
// at the bound). Past it ctl changes are refused: put them in the config
// file and reload.
const maxJournalLines = 1 << 20

// journalBatch is one acknowledged ctl request's config lines.
type journalBatch []string

// errHandoverHeld refuses ctl changes while a hot restart holds the daemon.
type errHandoverHeld struct{ pid int }

func (e errHandoverHeld) Error() string {
	return fmt.Sprintf("a hot restart (pid %d) is in progress: the change is not applied; retry when it is done", e.pid)
}

// journalCheckLocked refuses a batch the journal cannot carry. Called with
// ctlApplyMu held, before the batch is applied.
func (d *Daemon) journalCheckLocked(cmds []config.Command) error {
	if d.handoverSrv != nil {
		if pid := d.handoverSrv.Holder(); pid != 0 {
			return errHandoverHeld{pid}
		}
	}
	if d.journalLines+len(cmds) > maxJournalLines {
		return fmt.Errorf("%d config lines applied through ctl since start: more are refused (a hot restart carries them all); put them in the config file and reload", d.journalLines)
	}
	return nil
}

// journalAppendLocked records an acknowledged batch. Called with
// ctlApplyMu held, after the batch was applied.
func (d *Daemon) journalAppendLocked(cmds []config.Command) {
	b := make(journalBatch, 0, len(cmds))
	for _, c := range cmds {
		b = append(b, c.Text)
	}
	d.journal = append(d.journal, b)
	d.journalLines += len(b)
}

// ctlFlush is the control socket's Flush (ctlsock.Handler): a `route
// flush` / `neigh flush` line checked, applied and journaled as ctlApply
// does a batch of config lines.
func (d *Daemon) ctlFlush(cmd config.Command) error {
	d.ctlApplyMu.Lock()
	defer d.ctlApplyMu.Unlock()
	cmds := []config.Command{cmd}
	if err := d.journalCheckLocked(cmds); err != nil {
		return err
	}
	if err := d.ctlFlushLocked(cmd, false); err != nil {
		return err
	}
	d.journalAppendLocked(cmds)
	return nil
}

// ctlFlushLocked deletes what flush line cmd selects now (lenient steps,
// one batch). replay: a journal's flush, whose `dev D` may be gone (then
// so are its entries: nothing to flush).
func (d *Daemon) ctlFlushLocked(cmd config.Command, replay bool) error {
	steps, err := ctlsock.FlushSteps(d.ctl, cmd)
	if replay && errors.Is(err, ctlsock.ErrFlushNoDevice) {
		return nil
	}
	if err != nil || len(steps) == 0 {
		return err
	}
	return d.ctl.ApplySteps(steps)
}

// journalCopy is the journal for a successor (Prepare).
func (d *Daemon) journalCopy() [][]string {
	d.ctlApplyMu.Lock()
	defer d.ctlApplyMu.Unlock()
	out := make([][]string, len(d.journal))
	for i, b := range d.journal {
		out[i] = append([]string(nil), b...)
	}
	return out
}

// parseJournal parses a predecessor's journal, batch by batch; positions
// name the batch and line ("ctl journal, batch 3:1").
func parseJournal(j [][]string) ([][]config.Command, error) {
	out := make([][]config.Command, 0, len(j))
	for i, b := range j {
		cmds, errs := config.Parse(fmt.Sprintf("ctl journal, batch %d", i+1), strings.NewReader(strings.Join(b, "\n")))
		if len(errs) > 0 {
			return nil, errors.Join(errs...)
		}
		out = append(out, cmds)
	}
	return out, nil
}

// replayJournal applies a predecessor's journal (New, before the workers
// exist) and makes it this daemon's journal.
func (d *Daemon) replayJournal(j [][]string) error {
	batches, err := parseJournal(j)
	if err != nil {
		return err
	}
	d.ctlApplyMu.Lock()
	defer d.ctlApplyMu.Unlock()
	for i, cmds := range batches {
		var err error
		if len(cmds) == 1 && ctlsock.IsFlush(&cmds[0]) {
			err = d.ctlFlushLocked(cmds[0], true)
		} else {
			err = d.ctlApplyLocked(cmds)
		}
		if err != nil {
			return fmt.Errorf("batch %d of %d: %w", i+1, len(batches), err)
		}
		d.journalAppendLocked(cmds)
	}
	if len(batches) > 0 {
		d.log.Info("hot restart: applied the running netfwd's ctl changes", "requests", len(batches), "lines", d.journalLines)
	}
	return nil
}
