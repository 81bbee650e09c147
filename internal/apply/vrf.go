package apply

// VRF lines: `link add NAME type vrf table N`, `link set DEV master NAME`
// (or `vrf NAME`), `link set DEV nomaster`, `link del NAME`. A VRF lives in
// the FIB (fib/vrf.go: a name bound to a table; an enslaved device derives
// its routes in that table); the router's interfaces learn their VRF from
// the settings SyncIfaces gets (vrfSettings), so a packet received on one
// walks the rules with the VRF's l3mdev table.
//
// Masters: a device has one master, a bridge or a VRF, as in Linux, where
// `link set DEV master X` moves DEV from its old master to X. So enslaving
// a bridge port to a VRF first takes it out of its bridge, and enslaving a
// VRF's port to a bridge first takes it out of the VRF. Bridges and VLAN
// interfaces (SVIs) may be enslaved to a VRF too.
//
// Deliberate differences from Linux (docs/fib.md): the VRF device carries
// no addresses or routes of its own (netfwd refuses them: it is not a port);
// `link set VRF down` is refused (Linux's down VRF stops its devices'
// traffic; netfwd has no such state); `link set VRF up` is accepted and
// changes nothing (a VRF is always up).
//
// Locking: inside Controller.applySteps (Controller.mu held).

import (
	"errors"
	"fmt"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
)

// errVRFDevice refuses a VRF device where a port is needed.
func errVRFDevice(name string) error {
	return fmt.Errorf("%s is a VRF device: netfwd gives a VRF no addresses, routes or bridge membership of its own (use its table)", name)
}

// addVRF is `link add NAME type vrf table N`.
func (c *Controller) addVRF(p *pending, st *Step, bridges, vlanNames map[string]bool, tx *fib.Txn) {
	cmd := &st.Command
	l := cmd.Link
	if c.e.Domain().Port(l.Name) != nil {
		p.fail(cmd.Pos, fmt.Errorf("device %s already exists", l.Name))
		return
	}
	if err := tx.AddVRF(l.Name, l.Table); err != nil {
		if errors.Is(err, fib.ErrVRFTableUse) {
			err = fmt.Errorf("%s: %w (table %d)", l.Name, err, l.Table)
		}
		p.fail(cmd.Pos, err)
	}
}

// setVRFLink is `link set VRF ...`: only up, which changes nothing.
func (c *Controller) setVRFLink(p *pending, st *Step) {
	l := st.Command.Link
	if l.Down || l.MTU != 0 || len(l.Address) != 0 || l.Master != "" || l.NoMaster {
		p.fail(st.Command.Pos, fmt.Errorf("%s is a VRF device: netfwd takes only \"link set %s up\" for it", l.Name, l.Name))
	}
}

// setMaster is `link set DEV master M|vrf M|nomaster` for a device that is
// not a VRF: M a VRF moves DEV into it, M a bridge (or nomaster) takes it
// out of its VRF and on to the bridge op as before.
func (c *Controller) setMaster(p *pending, st *Step, bridges, vlanNames map[string]bool, tx *fib.Txn) {
	cmd := &st.Command
	l := cmd.Link
	isPort := !bridges[l.Name] && !vlanNames[l.Name]
	if l.Master != "" && tx.IsVRF(l.Master) {
		if isPort && c.mayBeBridgePort(p, l.Name) { // out of its bridge first
			p.addL2(l2.SetMaster{Port: l.Name}, cmd.Pos, st.Lenient)
		}
		if err := tx.SetMaster(l.Name, l.Master); err != nil {
			p.fail(cmd.Pos, err)
		}
		return
	}
	if l.VRFOnly {
		p.fail(cmd.Pos, fmt.Errorf("%s is not a VRF", l.Master))
		return
	}
	if v, _ := tx.DevVRF(l.Name); v != "" {
		if err := tx.SetMaster(l.Name, ""); err != nil {
			p.fail(cmd.Pos, err)
			return
		}
		if l.NoMaster {
			return // leaving the VRF was all of it
		}
	}
	p.addL2(l2.SetMaster{Port: l.Name, Master: l.Master}, cmd.Pos, st.Lenient)
}

// mayBeBridgePort reports whether name is a bridge port now or may become
// one earlier in this batch: only then does entering a VRF need a nomaster
// (which would otherwise make a port of a name that is, say, a VLAN
// interface created later in the batch).
func (c *Controller) mayBeBridgePort(p *pending, name string) bool {
	if port := c.e.Domain().Port(name); port != nil && port.Bridge() != nil {
		return true
	}
	for _, op := range p.l2ops {
		if m, ok := op.(l2.SetMaster); ok && m.Port == name && m.Master != "" {
			return true
		}
	}
	return false
}

// vrfSettings adds each enslaved device's VRF to the router settings
// (effective's output): devs are the enslaved devices, devVRF gives a
// device's VRF and table (fib.Txn.DevVRF, fib.FIB.DevVRF).
func vrfSettings(out map[string]l3.IfaceSettings, devs map[string]string, devVRF func(string) (string, uint32)) {
	for dev := range devs {
		s := out[dev]
		s.VRF, s.VRFTable = devVRF(dev)
		out[dev] = s
	}
}
