package daemon

// Reload (SIGHUP, `netfwd ctl reload`): re-read the config file and apply
// only the difference, atomically; a bad file is refused and the running
// configuration kept.
//
// Flow: read the file's text (the daemon keeps the text of the file it
// applied, not its parsed commands: 45 MB for a 900,000-route table
// instead of 340 MB). Files up to verifyLines lines (a router's config) are
// checked whole: parsed, applied to a scratch engine (every FILE:LINE
// error, and the ports the file names), diffed (apply.Diff), and the diff
// checked on scratch engines (old + diff must equal new; on a mismatch the
// whole old file is undone and the new one applied, still in one
// transaction). Larger files (full tables) are diffed as text
// (apply.DiffFiles: two passes over each, ~40 bytes per line kept): the
// ports come from the lines, and the errors from the parse and from the
// live check of the lines that changed, which are all the diff applies;
// no scratch engine (a second FIB) is built. A device that is no interface
// of the namespace is refused (`FILE:LINE: Cannot find device "X"`). Then:
// set the new ports' interfaces up -> open them (all or none) -> one
// ApplySteps on the live engine -> start the new ports' workers -> every
// port's interface up or down as the file says (linkstate.go) -> return
// the memory the reload freed to the system.
// Any failure closes the ports it opened and leaves the engine as it was.
//
// Locking: reloadMu serialises reloads; the controller serialises applies.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sort"
	"strconv"
	"strings"

	"github.com/netfwd/netfwd/internal/apply"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/l3"
	"github.com/netfwd/netfwd/wire"
)

// verifyLines bounds the files checked whole on scratch engines (cheap for
// a router config, a second and third FIB for a full table).
var verifyLines = 20000

// logRefused logs a refused reload one error per line (a file with three
// bad lines logs three lines, each FILE:LINE: reason, not one line of
// escaped newlines).
func (d *Daemon) logRefused(err error) {
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	for i, l := range lines {
		d.log.Error("reload refused", "err", strings.TrimSpace(l), "n", fmt.Sprintf("%d/%d", i+1, len(lines)))
	}
}

// Reload re-reads the config file and applies the difference. The error
// says why the new file was refused (the old configuration stays).
func (d *Daemon) Reload() error {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	d.mu.Lock()
	stopped := d.stopped
	old := d.conf
	d.mu.Unlock()
	if stopped {
		return errors.New("daemon is shutting down")
	}
	defer releaseMemory()
	defer boundReloadMemory()()
	f, steps, st, names, down, err := d.reloadSteps(old)
	if err != nil {
		d.logRefused(err)
		return err
	}
	if err := d.raiseLinks(names, down); err != nil {
		d.log.Error("reload refused", "err", err)
		return err
	}
	opened, err := d.openPorts(names)
	if err != nil {
		d.logRefused(err)
		return err
	}
	closeOpened := func() {
		for _, p := range opened {
			p.close()
		}
	}
	for _, p := range opened {
		if _, err := d.ctl.SetCarrier(p.name, p.carrier); err != nil {
			closeOpened()
			return err
		}
	}
	if err := d.ctl.ApplySteps(steps); err != nil {
		closeOpened()
		err = fmt.Errorf("reload refused (running configuration kept): %w", err)
		d.logRefused(err)
		return err
	}
	d.pushMTUs(opened)
	if err := d.addPorts(opened); err != nil {
		return err
	}
	d.pushMTUs(d.ports.Load().list)
	if err := d.pushLinkStates(d.ports.Load().list); err != nil {
		d.log.Error("reload: link state", "err", err)
	}
	d.mu.Lock()
	d.conf = f
	d.mu.Unlock()
	d.hp.requestSync()
	d.log.Info("reloaded", "config", d.opts.ConfigFile, "removed", st.Removed, "added", st.Added, "redone", st.Redone,
		"steps", len(steps), "new_ports", len(opened))
	return nil
}

// reloadSteps reads the config file and computes the steps from old to
// it, the ports it names and those it sets down (files checked whole; nil
// for a file diffed as text: its new ports are raised, then set as it says
// after the apply); the error lists the file's problems.
func (d *Daemon) reloadSteps(old *apply.File) (f *apply.File, steps []apply.Step, st apply.DiffStats, names []string, down map[string]bool, err error) {
	f, err = readConfigText(d.opts.ConfigFile)
	if err != nil {
		return nil, nil, st, nil, nil, err
	}
	opts := apply.DiffOptions{BridgeMAC: func(name string) (wire.MAC, bool) {
		if b := d.e.Domain().Bridge(name); b != nil {
			return b.MAC, true
		}
		return wire.MAC{}, false
	}}
	if fileLines(old) > verifyLines || fileLines(f) > verifyLines {
		fd := apply.DiffFiles(old, f, opts)
		if len(fd.Errs) > 0 {
			// Every problem at once: the lines that do not parse, and what
			// the changed lines that do would meet.
			errs := fd.Errs
			if err := d.ctl.CheckSteps(fd.Steps); err != nil {
				errs = append(errs, splitJoined(err)...)
			}
			sort.SliceStable(errs, func(i, j int) bool { return errLine(errs[i]) < errLine(errs[j]) })
			return nil, nil, st, nil, nil, errors.Join(errs...)
		}
		for _, n := range fd.Ports {
			if !deviceCheck(d.opts.Netns, d.hasPort)(n) {
				// The live check names the line (Cannot find device):
				// only a changed line can name a new port.
				if err := d.ctl.CheckSteps(fd.Steps); err != nil {
					return nil, nil, st, nil, nil, err
				}
				break
			}
		}
		return f, fd.Steps, fd.Stats, fd.Ports, nil, nil
	}
	exists := deviceCheck(d.opts.Netns, d.hasPort)
	cmds, err := parseConfig(f, exists)
	if err != nil {
		return nil, nil, st, nil, nil, err
	}
	if names, down, err = portNames(cmds, l3.EngineOptions{}, exists); err != nil {
		return nil, nil, st, nil, nil, err
	}
	oldCmds, _ := old.Commands()
	steps, st = apply.Diff(oldCmds, cmds, opts)
	if !diffHolds(oldCmds, cmds, steps) {
		d.log.Warn("reload: the diff does not reproduce the new file on a scratch engine; re-applying the whole file")
		steps = apply.FullRedo(oldCmds, cmds, opts)
	}
	return f, steps, st, names, down, nil
}

// fileLines counts a file's lines.
func fileLines(f *apply.File) int { return bytes.Count(f.Text, []byte("\n")) + 1 }

// readConfigText reads a config file's text (a regular file: see
// openRegular).
func readConfigText(file string) (*apply.File, error) {
	r, err := openRegular(file)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var b bytes.Buffer
	if st, err := r.Stat(); err == nil {
		b.Grow(int(st.Size()) + bytes.MinRead)
	}
	if _, err := io.Copy(&b, r); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &apply.File{Name: file, Text: b.Bytes()}, nil
}

// reloadGrowth bounds the memory a reload may add to the daemon's: 3/4 of
// its resident size at the start (at least reloadGrowthMin), so that a
// reload of a full table stays within twice the steady state. Past the
// bound the Go collector runs more often instead (a soft limit: a change
// that needs more, such as a whole new table, takes it).
const (
	reloadGrowthNum, reloadGrowthDen = 3, 4
	reloadGrowthMin                  = 64 << 20
)

// boundReloadMemory sets the Go runtime's memory limit for a reload
// (never above one already set, GOMEMLIMIT) and returns what restores it.
func boundReloadMemory() (restore func()) {
	rss, err := residentBytes()
	if err != nil {
		return func() {}
	}
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return func() {}
	}
	limit := int64(s[0].Value.Uint64()-s[1].Value.Uint64()) + max(rss*reloadGrowthNum/reloadGrowthDen, reloadGrowthMin)
	prev := debug.SetMemoryLimit(-1)
	if limit >= prev {
		return func() {}
	}
	debug.SetMemoryLimit(limit)
	return func() { debug.SetMemoryLimit(prev) }
}

// residentBytes is the process's resident size (/proc/self/statm).
func residentBytes() (int64, error) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, fmt.Errorf("/proc/self/statm: %q", b)
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, err
	}
	return pages * int64(os.Getpagesize()), nil
}

// releaseMemory returns the memory a load or reload freed to the system
// at once (the runtime would keep it for a while), so that the daemon's
// size is its configuration's.
func releaseMemory() { debug.FreeOSMemory() }

// diffHolds applies old and then the diff to a scratch engine and compares
// the result with new on a fresh one.
func diffHolds(old, new []config.Command, steps []apply.Step) bool {
	a := apply.New(l3.NewEngine(l3.EngineOptions{}))
	b := apply.New(l3.NewEngine(l3.EngineOptions{}))
	if a.Apply(old) != nil || b.Apply(new) != nil || a.ApplySteps(steps) != nil {
		return false
	}
	ports := map[string]bool{}
	for _, p := range b.Engine().Domain().Ports() {
		ports[p.Name] = true
	}
	return a.Snapshot(ports) == b.Snapshot(ports)
}
