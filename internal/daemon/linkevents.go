package daemon

// Following the kernel's interfaces (the link monitor's reports):
//   - carrier: an interface without carrier is down for the router
//     (Controller.SetCarrier): routes through it fail over;
//   - MTU: the kernel's MTU is the port's MTU (Controller.SetKernelMTU):
//     the router fragments or answers "fragmentation needed" for it, and the
//     port's transmit handles refuse (and count) longer frames. The config's
//     `link set DEV mtu N` is pushed to the kernel at start and at every
//     reload (netfwd owns its ports), and a ctl request's at once
//     (linkmtu.go); between those, whoever changes the
//     kernel's MTU is followed;
//   - deletion and re-creation (a driver reload, a container restart): the
//     packet sockets of a deleted interface are bound to an index that no
//     longer exists, so the port is retired (its sockets closed) and, when
//     an interface of the same name appears, opened again. The engine's
//     port and its configuration stay as they are throughout.
//
// Locking: called on the link monitor's goroutine only; reopening takes
// Daemon.mu through addPorts/retire.

import (
	"fmt"
	"net"

	"github.com/netfwd/netfwd/internal/pktio"
	"golang.org/x/sys/unix"
)

// linkChanged is the link monitor's callback.
func (d *Daemon) linkChanged(ev linkEvent) {
	d.hp.twinLinkEvent(ev) // a twin deleted: re-created (twinwatch.go)
	if d.e.Domain().Port(ev.name) == nil {
		return // not one of ours
	}
	p := d.ports.Load().byName(ev.name)
	switch {
	case ev.deleted:
		if p == nil || p.ifindex != ev.index {
			return
		}
		d.log.Warn("port interface deleted; it is re-opened when it returns", "dev", ev.name)
		d.setCarrier(ev.name, false)
		if err := d.retire(p); err != nil {
			d.log.Error("closing deleted port", "dev", ev.name, "err", err)
		}
		return
	case p != nil && p.ifindex != ev.index:
		// Re-created before its deletion reached us.
		d.log.Warn("port interface re-created", "dev", ev.name, "old_index", p.ifindex, "new_index", ev.index)
		if err := d.retire(p); err != nil {
			d.log.Error("closing re-created port", "dev", ev.name, "err", err)
		}
		p = nil
	}
	if p == nil {
		if !ev.up {
			// The kernel's own input on it dropped already (kernelguard.go).
			d.earlyGuard(ev.name, ev.index)
			// Not up yet (a new veth, a reloaded driver's device: they
			// come up after they appear). Opened then, with --host-path
			// (filtered data rings in a fanout group, a control ring),
			// the port's sockets received nothing once the device came
			// up (TestE2EBridgePortRecreatedHostPath, the combined test);
			// opened when it is up, they do.
			return
		}
		if !d.reopen(ev.name) {
			return
		}
	}
	d.setCarrier(ev.name, ev.up)
	if ev.mtu > 0 {
		d.followMTU(ev.name, ev.mtu)
	}
}

// reopen opens a port whose interface (re)appeared; false if it failed.
func (d *Daemon) reopen(name string) bool {
	d.mu.Lock()
	stopped := d.stopped
	d.mu.Unlock()
	if stopped {
		return false
	}
	opened, err := d.openPorts([]string{name})
	if err != nil {
		d.log.Error("re-opening port", "dev", name, "err", err)
		return false
	}
	if len(opened) == 0 {
		return false // opened meanwhile
	}
	p := opened[0]
	d.setCarrier(name, p.carrier)
	d.followMTU(name, p.mtu)
	if err := d.addPorts(opened); err != nil {
		d.log.Error("re-opening port", "dev", name, "err", err)
		return false
	}
	d.log.Info("port re-opened", "dev", name, "index", p.ifindex)
	if err := d.pushLinkStates(opened); err != nil {
		d.log.Error("re-opened port", "dev", name, "err", err)
	}
	return true
}

func (d *Daemon) setCarrier(name string, up bool) {
	changed, err := d.ctl.SetCarrier(name, up)
	switch {
	case err != nil:
		d.log.Error("carrier", "dev", name, "up", up, "err", err)
	case changed:
		d.log.Info("carrier", "dev", name, "up", up)
	}
}

// followMTU makes the kernel's MTU the port's.
func (d *Daemon) followMTU(name string, mtu int) {
	if p := d.ports.Load().byName(name); p != nil {
		p.setMTU(mtu)
	}
	changed, err := d.ctl.SetKernelMTU(name, mtu)
	switch {
	case err != nil:
		d.log.Error("mtu", "dev", name, "mtu", mtu, "err", err)
	case changed:
		d.log.Info("mtu", "dev", name, "mtu", mtu)
	}
}

// pushMTUs sets the kernel MTU of every open port whose config names one
// that differs; the link monitor then reports the new value.
func (d *Daemon) pushMTUs(ports []*port) {
	for _, p := range ports {
		want := d.ctl.ConfiguredMTU(p.name)
		if want <= 0 {
			continue
		}
		cur := p.mtu
		err := pktio.InNetns(d.opts.Netns, func() error {
			ifi, err := net.InterfaceByName(p.name)
			if err != nil {
				return err
			}
			cur = ifi.MTU
			if cur == want {
				return nil
			}
			return setKernelMTU(p.name, want)
		})
		if err != nil {
			d.log.Error("setting the configured MTU", "dev", p.name, "mtu", want, "err", err)
			continue
		}
		if cur != want {
			d.log.Info("set the configured MTU", "dev", p.name, "mtu", want, "was", cur)
		}
		d.followMTU(p.name, want)
	}
}

// setKernelMTU is `ip link set NAME mtu MTU` in the calling thread's
// namespace.
func setKernelMTU(name string, mtu int) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	ifr.SetUint32(uint32(mtu))
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFMTU, ifr); err != nil {
		return fmt.Errorf("SIOCSIFMTU %d: %w", mtu, err)
	}
	return nil
}
