package daemon

// Config lines from the control socket (`netfwd ctl`), applied as the
// config file's are: a device they name must exist (devices.go: `Cannot
// find device "X"`), an interface of the namespace they newly name becomes
// an open port (opened before the batch is applied, all or none, closed
// again when the batch is refused, as a reload does), and their `link set
// DEV up|down` lines set the port's kernel interface up or down
// (linkstate.go).
//
// Locking: reloadMu serialises the batches that open ports with reloads,
// so two of them never open the same interface; the controller serialises
// the applies themselves.

import (
	"slices"

	"github.com/netfwd/netfwd/internal/apply"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/l3"
)

// applyCtl applies a control socket request's config lines.
func (d *Daemon) applyCtl(cmds []config.Command) error {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	opened, err := d.openPorts(d.newPorts(cmds))
	if err != nil {
		return err
	}
	for _, p := range opened {
		if _, err := d.ctl.SetCarrier(p.name, p.carrier); err != nil {
			closePortsParallel(opened)
			return err
		}
	}
	if err := d.ctl.Apply(cmds); err != nil {
		closePortsParallel(opened)
		return err
	}
	if err := d.addPorts(opened); err != nil {
		return err
	}
	for _, p := range opened {
		d.followMTU(p.name, p.mtu)
	}
	if len(opened) > 0 {
		d.hp.requestSync()
	}
	// The batch is committed: a kernel refusal is reported to the client
	// (as `ip link set` would) and the port keeps its carrier state.
	return d.pushLinkStates(append(opened, d.linkSetPorts(cmds)...))
}

// newPorts lists the interfaces of the namespace that cmds name as ports
// and that are not ports yet (the ones missing are refused by the apply).
func (d *Daemon) newPorts(cmds []config.Command) []string {
	var pn apply.PortNamer
	for i := range cmds {
		pn.Add(&cmds[i])
	}
	vlans := d.ctl.VLANIfaces()
	var out []string
	for _, n := range pn.Names() {
		if d.hasPort(n) || d.e.Domain().Bridge(n) != nil ||
			slices.ContainsFunc(vlans, func(v l3.VLANIfaceSpec) bool { return v.Name == n }) || !kernelHas(d.opts.Netns, n) {
			continue
		}
		out = append(out, n)
	}
	return out
}

// linkSetPorts lists the open ports whose admin state cmds set.
func (d *Daemon) linkSetPorts(cmds []config.Command) []*port {
	t := d.ports.Load()
	var out []*port
	for _, c := range cmds {
		if l := c.Link; l != nil && l.Op == "set" && (l.Up || l.Down) {
			if p := t.byName(l.Name); p != nil && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}
