package daemon

// `link set DEV mtu N` through the control socket does what
// `ip link set DEV mtu N` does: the kernel interface's MTU changes, and the
// router's port follows it (the kernel's MTU is the port's, linkevents.go:
// fragmentation, "fragmentation needed", the transmit handles' limit, the
// twin's MTU). The config file's lines reach the kernel at start and at
// every reload (pushMTUs); this is the same for a ctl request.
//
// Flow (ctlApply): for each `link set PORT mtu N` of an open port, the
// kernel's MTU is set first (SIOCSIFMTU in the ports' namespace); if the
// kernel refuses, the MTUs already changed by the request are put back and
// the request fails whole with the kernel's reason, nothing applied (so
// does an MTU above what an AF_XDP port's 2 KiB frames hold). Then
// the lines are applied to the router; if that fails, the kernel's MTUs
// are put back too. Lines for other devices (a VLAN interface, a bridge, a
// port whose interface is gone) change the router's view only, as before.
//
// Locking: Daemon.ctlApplyMu serialises ctl requests' configuration (the
// kernel's MTU and the router's change together); followMTU races
// harmlessly with the link monitor reporting the same value.

import (
	"fmt"
	"net"

	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/pktio"
)

// ctlApply is the control socket's Apply: refused while a hot restart
// holds the daemon, journaled once applied (journal.go).
func (d *Daemon) ctlApply(cmds []config.Command) error {
	d.ctlApplyMu.Lock()
	defer d.ctlApplyMu.Unlock()
	if err := d.journalCheckLocked(cmds); err != nil {
		return err
	}
	if err := d.ctlApplyLocked(cmds); err != nil {
		return err
	}
	d.journalAppendLocked(cmds)
	return nil
}

// ctlApplyLocked applies a ctl batch (or a predecessor's journal batch):
// kernel MTUs first, undone if the rest fails.
func (d *Daemon) ctlApplyLocked(cmds []config.Command) error {
	type change struct {
		p        *port
		old, new int
	}
	var done []change
	undo := func() {
		for i := len(done) - 1; i >= 0; i-- {
			c := done[i]
			if _, err := d.setPortKernelMTU(c.p, c.old); err != nil {
				d.log.Error("putting the MTU back", "dev", c.p.name, "mtu", c.old, "err", err)
				continue
			}
			d.followMTU(c.p.name, c.old)
		}
	}
	for _, c := range cmds {
		l := c.Link
		if l == nil || l.Op != "set" || l.MTU == 0 || l.Kind != "" {
			continue
		}
		p := d.ports.Load().byName(l.Name)
		if p == nil {
			continue
		}
		if p.xp != nil && l.MTU > xdpFrameMTU {
			// The kernel would take it, and the XDP program would drop
			// every longer frame: its UMEM frames are 2 KiB.
			undo()
			return fmt.Errorf("%s: %s: mtu %d is above AF_XDP's %d with 2 KiB frames (%s is an AF_XDP port; --io afpacket takes larger MTUs)", c.Pos, c.Text, l.MTU, xdpFrameMTU, l.Name)
		}
		old, err := d.setPortKernelMTU(p, l.MTU)
		if err != nil {
			undo()
			return fmt.Errorf("%s: %s: the kernel refused mtu %d on %s (it keeps mtu %d): %w", c.Pos, c.Text, l.MTU, l.Name, old, err)
		}
		done = append(done, change{p, old, l.MTU})
	}
	// applyCtl opens the ports the batch newly names and sets the kernel's
	// link states around the Controller's apply (ctlapply.go).
	if err := d.applyCtl(cmds); err != nil {
		undo()
		return err
	}
	for _, c := range done {
		if c.old != c.new {
			d.log.Info("set the MTU", "dev", c.p.name, "mtu", c.new, "was", c.old, "by", "ctl")
		}
		d.followMTU(c.p.name, c.new)
	}
	if len(done) > 0 {
		d.hp.requestSync() // the twins' MTUs
	}
	return nil
}

// setPortKernelMTU is `ip link set PORT mtu MTU` in the ports' namespace;
// it returns the MTU the interface had.
func (d *Daemon) setPortKernelMTU(p *port, mtu int) (old int, err error) {
	old = p.mtu
	err = pktio.InNetns(d.opts.Netns, func() error {
		ifi, err := net.InterfaceByName(p.name)
		if err != nil {
			return err
		}
		old = ifi.MTU
		if old == mtu {
			return nil
		}
		return setKernelMTU(p.name, mtu)
	})
	return old, err
}
