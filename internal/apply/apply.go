// Package apply is netfwd's one applier: it applies configuration parsed by
// internal/config to a running engine. The daemon's config file (and its
// reloads, diffed by diff.go), the control socket and replay all go through
// Controller.Apply, which checks a whole batch of commands against the
// bridge, the FIB, the router and the neighbour table and then applies all
// of it or none of it; LoadFIB (fib.go) does the same for a bare FIB.
//
// Flow: commands are sorted to their subsystems in file order: link and
// bridge lines become bridge operations (validated together by
// l2.Domain.Prepare), address/route/nexthop/link-state lines run in one FIB
// transaction, VLAN interfaces and interface settings are checked here, and
// neighbour lines are checked against the table and the interfaces the
// batch leaves (neigh.go). Every error names its FILE:LINE. With no error:
// the bridge change commits, the router's interfaces are rebuilt, the FIB
// transaction publishes, and the router's ordered actions run (neighbour
// changes, flushes of interfaces that went down, were removed or changed
// their MAC). A batch that passed the checks commits whole; the one thing
// that can still fail after the check is adding a non-permanent neighbour
// to a table the datapath filled meanwhile (gc_thresh3, "no buffer space
// available"), reported with its line while the rest stays applied.
//
// Devices named but never created are ports. Whether a name may become
// one is decided in one place, where applySteps declares the batch's new
// ports: the daemon's device check (SetDeviceCheck) refuses a name that is
// no interface with `Cannot find device "X"`; offline every name is a
// virtual port.
//
// Interface state is the admin state of the configuration combined with the
// carrier state the daemon reports (SetCarrier, carrier.go): an interface is
// up for the router when neither says down.
//
// Locking: Controller.mu serialises Apply and SetCarrier (one writer).
package apply

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
	"github.com/netfwd/netfwd/neigh"
	"github.com/netfwd/netfwd/nexthop"
	"github.com/netfwd/netfwd/wire"
)

// Controller holds what the engine's configuration consists of beyond the
// engine's own state: the VLAN interfaces and per-interface settings.
type Controller struct {
	e *l3.Engine

	mu          sync.Mutex
	vlans       []l3.VLANIfaceSpec          // guarded by mu
	settings    map[string]l3.IfaceSettings // admin settings of the configuration; guarded by mu
	carrierDown map[string]bool             // interfaces without carrier (daemon); guarded by mu
	carrierSeen map[string]bool             // interfaces whose carrier the daemon reports; guarded by mu
	kernelMTU   map[string]int              // MTUs the daemon reports for its ports; guarded by mu
	// autoHostVLAN: per bridge, the VIDs whose host membership was added
	// because a VLAN interface was created on them (it goes with the
	// interface); guarded by mu.
	autoHostVLAN map[string]map[uint16]bool
	// explicitHostVLAN: per bridge, the VIDs the configuration made the
	// bridge a member of (`bridge vlan add dev BR ... self`); guarded by mu.
	explicitHostVLAN map[string]map[uint16]bool
	maxLearned       map[string]uint32 // bridge fdb_max_learned as configured; guarded by mu
	// deviceExists says whether a name that is not a port yet is a
	// device a new port can stand for (nil: every name, offline); set
	// before the first Apply (SetDeviceCheck).
	deviceExists func(name string) bool
}

// SetDeviceCheck makes a device named by the configuration that is not a
// port, bridge or VLAN interface yet a port only when exists(name) says it
// is there; otherwise the line is refused with iproute2's
// `Cannot find device "X"`. The daemon checks its namespace's interfaces;
// without a check (route get --config, replay, tests) every name is a
// virtual port. Call it before the first Apply.
func (c *Controller) SetDeviceCheck(exists func(name string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deviceExists = exists
}

// New returns a controller for an engine.
func New(e *l3.Engine) *Controller {
	return &Controller{e: e, settings: map[string]l3.IfaceSettings{}, carrierDown: map[string]bool{}, carrierSeen: map[string]bool{}, kernelMTU: map[string]int{},
		autoHostVLAN: map[string]map[uint16]bool{}, explicitHostVLAN: map[string]map[uint16]bool{},
		maxLearned: map[string]uint32{}}
}

// Engine returns the controlled engine.
func (c *Controller) Engine() *l3.Engine { return c.e }

// Step is one command of an Apply batch.
type Step struct {
	config.Command
	// Lenient marks an inverse produced by a reload diff: when what it
	// would undo is absent (route, address, nexthop, neighbour, bridge
	// membership already gone), it is skipped instead of failing.
	Lenient bool
}

// Steps wraps commands as strict steps.
func Steps(cmds []config.Command) []Step {
	s := make([]Step, len(cmds))
	for i := range cmds {
		s[i] = Step{Command: cmds[i]}
	}
	return s
}

// pending is one Apply's work, sorted by subsystem.
type pending struct {
	l2ops     []l2.Op
	l2pos     []config.Pos // position of each l2 op
	l2lenient []bool
	vlans     []l3.VLANIfaceSpec
	settings  map[string]l3.IfaceSettings
	errs      []*config.Error
	names     map[string]config.Pos // devices named, for implicit ports
	unchecked map[string]bool       // names that were bridges or VLAN interfaces where they were named
	actions   []routerAction        // ordered router work after the commit
	maxLearn  map[string]uint32
}

// declare records a device a command names, at its first line: a port of
// the batch unless it is (at the end of the batch) a bridge or VLAN
// interface. A name that is not one where it stands must be allowed to be a
// port (mayBePort); false when it is not (the line's error recorded).
func (c *Controller) declare(p *pending, dev string, pos config.Pos, bridges, vlanNames map[string]bool) bool {
	if _, ok := p.names[dev]; ok {
		return true
	}
	if bridges[dev] || vlanNames[dev] {
		p.unchecked[dev] = true // checked at the end if it is no longer one
	} else if !c.mayBePort(dev) {
		p.fail(pos, errNoDevice(dev))
		return false
	}
	p.names[dev] = pos
	return true
}

// mayBePort is the one check of a device named as a port: a port already,
// or, under the daemon, an interface that exists (SetDeviceCheck); offline
// every name may be a (virtual) port.
func (c *Controller) mayBePort(dev string) bool {
	return c.deviceExists == nil || c.e.Domain().Port(dev) != nil || c.deviceExists(dev)
}

func (p *pending) fail(pos config.Pos, err error) {
	p.errs = append(p.errs, &config.Error{Pos: pos, Err: err})
}

// routerAction is work for the router after the commit, in command order:
// a neighbour change (neigh != nil), a flush of a device that went down
// (its non-permanent entries), or of a device whose MAC changed (all its
// entries: neigh_changeaddr).
type routerAction struct {
	neigh    *neighOp
	flushDev string
	macDev   string
}

// Apply applies commands entirely or not at all. Query commands (show, get)
// are refused: they are for the control socket's own handling.
func (c *Controller) Apply(cmds []config.Command) error { return c.ApplySteps(Steps(cmds)) }

// ApplySteps is Apply with per-step leniency (reload inverses).
func (c *Controller) ApplySteps(steps []Step) error { return c.applySteps(steps, true) }

// CheckSteps checks steps as ApplySteps does and changes nothing: the
// errors the batch would meet.
func (c *Controller) CheckSteps(steps []Step) error { return c.applySteps(steps, false) }

func (c *Controller) applySteps(steps []Step, commit bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := &pending{vlans: append([]l3.VLANIfaceSpec(nil), c.vlans...), settings: map[string]l3.IfaceSettings{},
		names: map[string]config.Pos{}, unchecked: map[string]bool{}, maxLearn: map[string]uint32{}}
	for k, v := range c.settings {
		p.settings[k] = v
	}
	for k, v := range c.maxLearned {
		p.maxLearn[k] = v
	}
	bridges := map[string]bool{}
	for _, b := range c.e.Domain().Bridges() {
		bridges[b.Name] = true
	}
	vlanNames := map[string]bool{}
	for _, v := range p.vlans {
		vlanNames[v.Name] = true
	}
	startBridges := map[string]bool{}
	for n := range bridges {
		startBridges[n] = true
	}
	tx := c.e.FIB().Begin(len(steps))
	for i := range steps {
		st := &steps[i]
		cmd := &st.Command
		switch {
		case cmd.Link != nil:
			c.link(p, st, bridges, vlanNames, tx)
		case cmd.Bridge != nil:
			p.addL2(cmd.Bridge.Op, cmd.Pos, st.Lenient)
		case cmd.Neigh != nil:
			p.actions = append(p.actions, routerAction{neigh: &neighOp{NeighCmd: cmd.Neigh, pos: cmd.Pos, lenient: st.Lenient}})
		case cmd.Query != nil:
			p.fail(cmd.Pos, errQuery(cmd.Query))
		default:
			if !st.Lenient { // an inverse never declares a port
				ok := true
				namedDevs(cmd, func(dev string) { ok = c.declare(p, dev, cmd.Pos, bridges, vlanNames) && ok })
				if !ok {
					continue // its one error: the device (as ip)
				}
			}
			if err := FIBCommand(tx, cmd); err != nil && !(st.Lenient && missing(err)) {
				p.fail(cmd.Pos, err)
			}
		}
	}
	// An interface without carrier stays down for the FIB whatever the
	// configuration says.
	for name := range c.carrierDown {
		if err := tx.SetLinkUp(name, false); err != nil {
			p.fail(config.Pos{File: "carrier", Line: 0}, fmt.Errorf("%s: %w", name, err))
		}
	}
	// Devices named but never created are ports (real interfaces under the
	// daemon): declare them first so the bridge ops can use them.
	var ports []l2.Op
	var portPos []config.Pos
	var portLenient []bool
	names := make([]string, 0, len(p.names))
	for n := range p.names {
		names = append(names, n)
	}
	sort.Strings(names)
	var late []l2.Op // ports named after their bridge of the same name was deleted
	var latePos []config.Pos
	for _, n := range names {
		switch {
		case bridges[n] || vlanNames[n]:
		case tx.IsVRF(n):
			p.fail(p.names[n], errVRFDevice(n))
		case p.unchecked[n] && !c.mayBePort(n): // a bridge or VLAN interface where it was named
			p.fail(p.names[n], errNoDevice(n))
		case startBridges[n]:
			late = append(late, l2.PortAdd{Name: n})
			latePos = append(latePos, p.names[n])
		default:
			ports = append(ports, l2.PortAdd{Name: n})
			portPos = append(portPos, p.names[n])
			portLenient = append(portLenient, false)
		}
	}
	ops := append(append(ports, p.l2ops...), late...)
	pos := append(append(portPos, p.l2pos...), latePos...)
	lenient := append(portLenient, p.l2lenient...)
	for range late {
		lenient = append(lenient, false)
	}
	change := c.prepareL2(p, &ops, &pos, &lenient)
	c.checkNeigh(p, ops, bridges, vlanNames) // every error of a batch is reported at once
	if len(p.errs) > 0 {
		tx.Abort()
		if change != nil {
			change.Abort()
		}
		return p.joinErrs()
	}
	if !commit {
		tx.Abort()
		if change != nil {
			change.Abort()
		}
		return nil
	}
	before := ifaceMap(c.e.Router().Ifaces())
	if err := change.Commit(); err != nil {
		tx.Abort()
		return err
	}
	// The host membership a new VLAN interface adds (in SyncIfaces) is
	// remembered, so it can go with the interface.
	c.dropAutoHostVLANs(p.vlans, ops)
	newAuto := c.autoHostVLANsBefore(p.vlans)
	if err := c.e.Router().SyncIfaces(p.vlans, c.effective(p.settings, tx.DevVRFs(), tx.DevVRF)); err != nil {
		tx.Abort()
		return err
	}
	tx.Commit()
	c.vlans, c.settings, c.maxLearned = p.vlans, p.settings, p.maxLearn
	for _, v := range newAuto {
		if c.autoHostVLAN[v.Bridge] == nil {
			c.autoHostVLAN[v.Bridge] = map[uint16]bool{}
		}
		c.autoHostVLAN[v.Bridge][v.VID] = true
	}
	return c.runActions(p, before)
}

func (p *pending) addL2(op l2.Op, pos config.Pos, lenient bool) {
	p.l2ops = append(p.l2ops, op)
	p.l2pos = append(p.l2pos, pos)
	p.l2lenient = append(p.l2lenient, lenient)
}

// joinErrs reports the batch's errors in line order, at most
// config.MaxErrors of them in full (a bad million-line reload must not
// become a million-line log message).
func (p *pending) joinErrs() error {
	sort.SliceStable(p.errs, func(i, j int) bool { return p.errs[i].Pos.Line < p.errs[j].Pos.Line })
	l := config.ErrorList{File: p.errs[0].Pos.File}
	for _, e := range p.errs {
		l.Add(e)
	}
	return l.Err()
}

// prepareL2 validates the bridge ops; failing lenient ops are dropped and
// the rest validated again (an inverse of something already gone).
func (c *Controller) prepareL2(p *pending, ops *[]l2.Op, pos *[]config.Pos, lenient *[]bool) *l2.Change {
	for {
		change, opErrs := c.e.Domain().Prepare(*ops)
		if len(opErrs) == 0 {
			return change
		}
		drop := map[int]bool{}
		for _, oe := range opErrs {
			if (*lenient)[oe.Index] {
				drop[oe.Index] = true
			}
		}
		if len(drop) == 0 {
			for _, oe := range opErrs {
				p.fail((*pos)[oe.Index], oe.Err)
			}
			return nil
		}
		var o []l2.Op
		var ps []config.Pos
		var ls []bool
		for i := range *ops {
			if !drop[i] {
				o, ps, ls = append(o, (*ops)[i]), append(ps, (*pos)[i]), append(ls, (*lenient)[i])
			}
		}
		*ops, *pos, *lenient = o, ps, ls
	}
}

// missing reports an error that says "what you wanted to delete is not
// there".
func missing(err error) bool {
	return errors.Is(err, fib.ErrNoRoute) || errors.Is(err, fib.ErrAddrNotFound) ||
		errors.Is(err, nexthop.ErrNotFound) || errors.Is(err, neigh.ErrNotFound) || errors.Is(err, fib.ErrRuleNotFound)
}

// effective combines the admin settings with the carrier state, the
// kernel's MTUs and the devices' VRFs (devs: the enslaved devices of the
// FIB state being made, devVRF: a device's VRF and table there).
func (c *Controller) effective(settings map[string]l3.IfaceSettings, devs map[string]string, devVRF func(string) (string, uint32)) map[string]l3.IfaceSettings {
	out := make(map[string]l3.IfaceSettings, len(settings)+len(c.carrierSeen))
	for k, v := range settings {
		out[k] = v
	}
	// Every interface with a reported carrier gets an entry, so SyncIfaces
	// sets its state either way (it keeps the state of names it is not
	// given).
	for name := range c.carrierSeen {
		s := out[name]
		s.Down = s.Down || c.carrierDown[name]
		out[name] = s
	}
	for name, mtu := range c.kernelMTU {
		s := out[name]
		s.MTU = mtu
		out[name] = s
	}
	vrfSettings(out, devs, devVRF)
	return out
}

// adminUp is the configured state of a device, combined with its carrier.
func (c *Controller) up(settings map[string]l3.IfaceSettings, name string) bool {
	return !settings[name].Down && !c.carrierDown[name]
}

// link sorts one link line: bridges and masters to the bridge, VLAN
// interfaces and settings to the router, up/down to the FIB too.
func (c *Controller) link(p *pending, st *Step, bridges, vlanNames map[string]bool, tx *fib.Txn) {
	cmd := &st.Command
	l := cmd.Link
	switch l.Op {
	case "add":
		if bridges[l.Name] || vlanNames[l.Name] || tx.IsVRF(l.Name) {
			p.fail(cmd.Pos, fmt.Errorf("%s: file exists", l.Name))
			return
		}
		switch l.Kind {
		case "vrf":
			c.addVRF(p, st, bridges, vlanNames, tx)
		case "bridge":
			attrs, err := config.BridgeAttrs(l.Options, l.Address)
			if err != nil {
				p.fail(cmd.Pos, err)
				return
			}
			bridges[l.Name] = true
			p.maxLearn[l.Name] = 0
			if attrs.FDBMaxLearned != nil {
				p.maxLearn[l.Name] = *attrs.FDBMaxLearned
			}
			p.addL2(l2.BridgeAdd{Name: l.Name, Attrs: attrs}, cmd.Pos, st.Lenient)
		case "vlan":
			if c.e.Domain().Port(l.Name) != nil {
				// A name once used as a port stays one (ports are never
				// deleted): as for bridges, l2's "already exists".
				p.fail(cmd.Pos, fmt.Errorf("device %s already exists", l.Name))
				return
			}
			if !bridges[l.Parent] {
				p.fail(cmd.Pos, fmt.Errorf("%s: link %s is not a bridge", l.Name, l.Parent))
				return
			}
			for _, v := range p.vlans {
				if v.Bridge == l.Parent && v.VID == l.VID {
					p.fail(cmd.Pos, fmt.Errorf("%s: VLAN %d of %s already has interface %s", l.Name, l.VID, l.Parent, v.Name))
					return
				}
			}
			vlanNames[l.Name] = true
			p.vlans = append(p.vlans, l3.VLANIfaceSpec{Name: l.Name, Bridge: l.Parent, VID: l.VID})
		}
	case "delete":
		switch {
		case tx.IsVRF(l.Name):
			if err := tx.DelVRF(l.Name); err != nil {
				p.fail(cmd.Pos, err)
			}
		case vlanNames[l.Name]:
			delete(vlanNames, l.Name)
			for i, v := range p.vlans {
				if v.Name == l.Name {
					p.vlans = append(p.vlans[:i:i], p.vlans[i+1:]...)
					break
				}
			}
		case bridges[l.Name]:
			for _, v := range p.vlans {
				if v.Bridge == l.Name {
					p.fail(cmd.Pos, fmt.Errorf("%s: VLAN interface %s still uses it", l.Name, v.Name))
					return
				}
			}
			delete(bridges, l.Name)
			delete(p.maxLearn, l.Name)
			p.addL2(l2.BridgeDel{Name: l.Name}, cmd.Pos, st.Lenient)
		case st.Lenient:
		default:
			p.fail(cmd.Pos, fmt.Errorf("%s: cannot delete a port (only bridges and VLAN interfaces)", l.Name))
		}
	case "set":
		if l.Kind == "bridge" { // bridge attributes (reload diffs)
			if !bridges[l.Name] {
				if !st.Lenient {
					p.fail(cmd.Pos, fmt.Errorf("%s: no such bridge", l.Name))
				}
				return
			}
			attrs, err := config.BridgeAttrs(l.Options, nil)
			if err != nil {
				p.fail(cmd.Pos, err)
				return
			}
			if attrs.FDBMaxLearned != nil {
				p.maxLearn[l.Name] = *attrs.FDBMaxLearned
			}
			p.addL2(l2.BridgeSet{Name: l.Name, Attrs: attrs}, cmd.Pos, st.Lenient)
			return
		}
		if tx.IsVRF(l.Name) {
			c.setVRFLink(p, st)
			return
		}
		if !bridges[l.Name] && !vlanNames[l.Name] && !st.Lenient && !c.declare(p, l.Name, cmd.Pos, bridges, vlanNames) {
			return
		}
		if l.Master != "" || l.NoMaster {
			c.setMaster(p, st, bridges, vlanNames, tx)
		}
		s := p.settings[l.Name]
		if l.Up || l.Down {
			wasUp := c.up(p.settings, l.Name)
			s.Down = l.Down
			p.settings[l.Name] = s
			nowUp := c.up(p.settings, l.Name)
			if err := tx.SetLinkUp(l.Name, nowUp); err != nil {
				p.fail(cmd.Pos, err)
			}
			if wasUp && !nowUp {
				p.actions = append(p.actions, routerAction{flushDev: l.Name})
			}
		}
		if l.MTU > 0 {
			s.MTU = l.MTU
		}
		if len(l.Address) == 6 {
			// The all-zero address restores the default (reload inverses).
			if mac := wire.MAC(net.HardwareAddr(l.Address)); mac != s.MAC {
				s.MAC = mac
				p.actions = append(p.actions, routerAction{macDev: l.Name})
			}
		}
		p.settings[l.Name] = s
	default:
		p.fail(cmd.Pos, fmt.Errorf("link %s is a query, not configuration", l.Op))
	}
}

// autoHostVLANsBefore lists the new VLAN interfaces whose VID the bridge is
// not yet a member of: SyncIfaces will add that membership for them.
func (c *Controller) autoHostVLANsBefore(vlans []l3.VLANIfaceSpec) []l3.VLANIfaceSpec {
	old := map[l3.VLANIfaceSpec]bool{}
	for _, v := range c.vlans {
		old[v] = true
	}
	var out []l3.VLANIfaceSpec
	for _, v := range vlans {
		if old[v] {
			continue
		}
		b := c.e.Domain().Bridge(v.Bridge)
		if b == nil {
			continue // checked: cannot happen
		}
		if c.explicitHostVLAN[v.Bridge][v.VID] {
			continue
		}
		// Without vlan_filtering HostMember says yes to every VID; the
		// bridge's own pvid membership is there from its creation.
		if member, _ := b.HostMember(v.VID); !member || !b.VLANFiltering() && v.VID != b.HostPVID() {
			out = append(out, v)
		}
	}
	return out
}

// dropAutoHostVLANs removes the host membership of VLAN interfaces that went
// away, when it came with them; an explicit `bridge vlan ... self` for the
// VID makes the membership the configuration's own.
func (c *Controller) dropAutoHostVLANs(vlans []l3.VLANIfaceSpec, ops []l2.Op) {
	for _, op := range ops {
		switch o := op.(type) {
		case l2.VLANAdd:
			if o.Self || c.e.Domain().Bridge(o.Dev) != nil {
				if c.explicitHostVLAN[o.Dev] == nil {
					c.explicitHostVLAN[o.Dev] = map[uint16]bool{}
				}
				forVIDs(o.VID, o.VIDEnd, func(v uint16) {
					delete(c.autoHostVLAN[o.Dev], v)
					c.explicitHostVLAN[o.Dev][v] = true
				})
			}
		case l2.VLANDel:
			if o.Self || c.e.Domain().Bridge(o.Dev) != nil {
				forVIDs(o.VID, o.VIDEnd, func(v uint16) {
					delete(c.autoHostVLAN[o.Dev], v)
					delete(c.explicitHostVLAN[o.Dev], v)
				})
			}
		case l2.BridgeDel:
			delete(c.autoHostVLAN, o.Name)
			delete(c.explicitHostVLAN, o.Name)
		case l2.BridgeAdd:
			delete(c.autoHostVLAN, o.Name)
			delete(c.explicitHostVLAN, o.Name)
		}
	}
	keep := map[l3.VLANIfaceSpec]bool{}
	for _, v := range vlans {
		keep[v] = true
	}
	for _, v := range c.vlans {
		if keep[v] || !c.autoHostVLAN[v.Bridge][v.VID] {
			continue
		}
		delete(c.autoHostVLAN[v.Bridge], v.VID)
		if b := c.e.Domain().Bridge(v.Bridge); b != nil {
			b.DelHostVLAN(v.VID)
		}
	}
}

func forVIDs(a, b uint16, fn func(uint16)) {
	if b < a {
		b = a
	}
	for v := a; v <= b; v++ {
		fn(v)
	}
}

func ifaceMap(ifs []*l3.Iface) map[string]*l3.Iface {
	m := make(map[string]*l3.Iface, len(ifs))
	for _, i := range ifs {
		m[i.Name] = i
	}
	return m
}

// FDBMaxLearned returns a bridge's fdb_max_learned as configured (0:
// unlimited) and whether the bridge exists.
func (c *Controller) FDBMaxLearned(bridge string) (uint32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.maxLearned[bridge]
	return v, ok
}

// AdminDown reports whether the configuration sets a device down, and
// CarrierDown whether the daemon reported it without carrier.
func (c *Controller) AdminDown(dev string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.settings[dev].Down
}

// VLANIfaces returns the VLAN interfaces of the configuration.
func (c *Controller) VLANIfaces() []l3.VLANIfaceSpec {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]l3.VLANIfaceSpec(nil), c.vlans...)
}
