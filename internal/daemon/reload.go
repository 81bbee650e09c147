package daemon

// Reload (SIGHUP, `netfwd ctl reload`): re-read the config file and apply
// only the difference, atomically; a bad file is refused and the running
// configuration kept.
//
// Flow: parse (FILE:LINE errors) -> apply the new file to a scratch engine
// (its errors, and the ports it names) -> open the ports that are new (all
// or none) -> control.Diff(old, new) -> for files up to verifyLines lines,
// check the diff on scratch engines (old + diff must equal new; on a
// mismatch the whole old file is undone and the new one applied, still in
// one transaction) -> one ApplySteps on the live engine -> start the new
// ports' workers. Any failure closes the ports it opened and leaves the
// engine as it was.
//
// Locking: reloadMu serialises reloads; the controller serialises applies.

import (
	"errors"
	"fmt"

	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/control"
	"github.com/netfwd/netfwd/l3"
	"github.com/netfwd/netfwd/wire"
)

// verifyLines bounds the files whose diff is checked on scratch engines
// (two extra engines: cheap for a router config, not for a full table).
const verifyLines = 20000

// Reload re-reads the config file and applies the difference. The error
// says why the new file was refused (the old configuration stays).
func (d *Daemon) Reload() error {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	d.mu.Lock()
	stopped := d.stopped
	old := d.cmds
	d.mu.Unlock()
	if stopped {
		return errors.New("daemon is shutting down")
	}
	cmds, err := readConfig(d.opts.ConfigFile)
	if err != nil {
		d.log.Error("reload refused", "err", err)
		return err
	}
	names, err := portNames(cmds, l3.EngineOptions{})
	if err != nil {
		d.log.Error("reload refused", "err", err)
		return err
	}
	opened, err := d.openPorts(names)
	if err != nil {
		d.log.Error("reload refused", "err", err)
		return err
	}
	closeOpened := func() {
		for _, p := range opened {
			p.io.Close()
		}
	}
	for _, p := range opened {
		if _, err := d.ctl.SetCarrier(p.name, p.carrier); err != nil {
			closeOpened()
			return err
		}
	}
	opts := control.DiffOptions{BridgeMAC: func(name string) (wire.MAC, bool) {
		if b := d.e.Domain().Bridge(name); b != nil {
			return b.MAC, true
		}
		return wire.MAC{}, false
	}}
	steps, st := control.Diff(old, cmds, opts)
	if len(old) <= verifyLines && len(cmds) <= verifyLines && !diffHolds(old, cmds, steps) {
		d.log.Warn("reload: the diff does not reproduce the new file on a scratch engine; re-applying the whole file")
		steps = control.FullRedo(old, cmds, opts)
	}
	if err := d.ctl.ApplySteps(steps); err != nil {
		closeOpened()
		err = fmt.Errorf("reload refused (running configuration kept): %w", err)
		d.log.Error("reload refused", "err", err)
		return err
	}
	if err := d.addPorts(opened); err != nil {
		return err
	}
	d.mu.Lock()
	d.cmds = cmds
	d.mu.Unlock()
	d.log.Info("reloaded", "config", d.opts.ConfigFile, "removed", st.Removed, "added", st.Added, "redone", st.Redone,
		"steps", len(steps), "new_ports", len(opened))
	return nil
}

// diffHolds applies old and then the diff to a scratch engine and compares
// the result with new on a fresh one.
func diffHolds(old, new []config.Command, steps []control.Step) bool {
	a := control.New(l3.NewEngine(l3.EngineOptions{}))
	b := control.New(l3.NewEngine(l3.EngineOptions{}))
	if a.Apply(old) != nil || b.Apply(new) != nil || a.ApplySteps(steps) != nil {
		return false
	}
	ports := map[string]bool{}
	for _, p := range b.Engine().Domain().Ports() {
		ports[p.Name] = true
	}
	return a.Snapshot(ports) == b.Snapshot(ports)
}
