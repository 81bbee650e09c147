// Package control applies configuration to a running engine: the daemon's
// config file (and its reloads), the control socket and replay all go
// through Apply, which checks a whole batch of commands against the bridge,
// the FIB and the router and then applies all of it or none of it.
//
// Flow: commands are sorted to their subsystems in file order: link and
// bridge lines become bridge operations (validated together by
// l2.Domain.Prepare), address/route/nexthop/link-state lines run in one FIB
// transaction, VLAN interfaces and interface settings are checked here.
// Every error names its FILE:LINE. With no error: the bridge change commits,
// the router's interfaces are rebuilt, then the FIB transaction publishes.
//
// Locking: Controller.mu serialises Apply calls (one writer).
package control

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
)

// Controller holds what the engine's configuration consists of beyond the
// engine's own state: the VLAN interfaces and per-interface settings.
type Controller struct {
	e *l3.Engine

	mu       sync.Mutex
	vlans    []l3.VLANIfaceSpec          // guarded by mu
	settings map[string]l3.IfaceSettings // guarded by mu
}

// New returns a controller for an engine.
func New(e *l3.Engine) *Controller {
	return &Controller{e: e, settings: map[string]l3.IfaceSettings{}}
}

// Engine returns the controlled engine.
func (c *Controller) Engine() *l3.Engine { return c.e }

// pending is one Apply's work, sorted by subsystem.
type pending struct {
	l2ops    []l2.Op
	l2pos    []config.Pos // position of each l2 op
	vlans    []l3.VLANIfaceSpec
	settings map[string]l3.IfaceSettings
	errs     []*config.Error
	names    map[string]config.Pos // devices named, for implicit ports
}

func (p *pending) fail(pos config.Pos, err error) {
	p.errs = append(p.errs, &config.Error{Pos: pos, Err: err})
}

// Apply applies commands entirely or not at all. Query commands (show, get)
// are refused: they are for the control socket's own handling.
func (c *Controller) Apply(cmds []config.Command) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := &pending{vlans: append([]l3.VLANIfaceSpec(nil), c.vlans...), settings: map[string]l3.IfaceSettings{}, names: map[string]config.Pos{}}
	for k, v := range c.settings {
		p.settings[k] = v
	}
	bridges := map[string]bool{}
	for _, b := range c.e.Domain().Bridges() {
		bridges[b.Name] = true
	}
	vlanNames := map[string]bool{}
	for _, v := range p.vlans {
		vlanNames[v.Name] = true
	}
	tx := c.e.FIB().Begin(len(cmds))
	for i := range cmds {
		cmd := &cmds[i]
		switch {
		case cmd.Link != nil:
			c.link(p, cmd, bridges, vlanNames, tx)
		case cmd.Bridge != nil:
			if cmd.Bridge.Op == nil {
				p.fail(cmd.Pos, errors.New("bridge show is a query, not configuration"))
				continue
			}
			p.l2ops = append(p.l2ops, cmd.Bridge.Op)
			p.l2pos = append(p.l2pos, cmd.Pos)
		case cmd.Neigh != nil:
			p.fail(cmd.Pos, errors.New("neigh lines are not supported yet"))
		default:
			if cmd.Addr != nil {
				p.names[cmd.Addr.Dev] = cmd.Pos
			}
			if cmd.Route != nil && cmd.Route.Spec.Dev != "" {
				p.names[cmd.Route.Spec.Dev] = cmd.Pos
			}
			if cmd.Nexthop != nil && cmd.Nexthop.Spec.Single.Dev != "" {
				p.names[cmd.Nexthop.Spec.Single.Dev] = cmd.Pos
			}
			if err := config.ApplyFIBCommand(tx, cmd); err != nil {
				p.fail(cmd.Pos, err)
			}
		}
	}
	// Devices named but never created are ports (real interfaces under the
	// daemon): declare them first so the bridge ops can use them.
	var ports []l2.Op
	var portPos []config.Pos
	names := make([]string, 0, len(p.names))
	for n := range p.names {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !bridges[n] && !vlanNames[n] {
			ports = append(ports, l2.PortAdd{Name: n})
			portPos = append(portPos, p.names[n])
		}
	}
	ops := append(ports, p.l2ops...)
	pos := append(portPos, p.l2pos...)
	change, opErrs := c.e.Domain().Prepare(ops)
	for _, oe := range opErrs {
		p.fail(pos[oe.Index], oe.Err)
	}
	if len(p.errs) > 0 {
		tx.Abort()
		if change != nil {
			change.Abort()
		}
		sort.SliceStable(p.errs, func(i, j int) bool { return p.errs[i].Pos.Line < p.errs[j].Pos.Line })
		errs := make([]error, len(p.errs))
		for i, e := range p.errs {
			errs[i] = e
		}
		return errors.Join(errs...)
	}
	if err := change.Commit(); err != nil {
		tx.Abort()
		return err
	}
	if err := c.e.Router().SyncIfaces(p.vlans, p.settings); err != nil {
		tx.Abort()
		return err
	}
	tx.Commit()
	c.vlans, c.settings = p.vlans, p.settings
	return nil
}

// link sorts one link line: bridges and masters to the bridge, VLAN
// interfaces and settings to the router, up/down to the FIB too.
func (c *Controller) link(p *pending, cmd *config.Command, bridges, vlanNames map[string]bool, tx *fib.Txn) {
	l := cmd.Link
	switch l.Op {
	case "add":
		if bridges[l.Name] || vlanNames[l.Name] {
			p.fail(cmd.Pos, fmt.Errorf("%s: file exists", l.Name))
			return
		}
		switch l.Kind {
		case "bridge":
			attrs, err := config.BridgeAttrs(l.Options, l.Address)
			if err != nil {
				p.fail(cmd.Pos, err)
				return
			}
			bridges[l.Name] = true
			p.l2ops = append(p.l2ops, l2.BridgeAdd{Name: l.Name, Attrs: attrs})
			p.l2pos = append(p.l2pos, cmd.Pos)
		case "vlan":
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
		case vlanNames[l.Name]:
			delete(vlanNames, l.Name)
			for i, v := range p.vlans {
				if v.Name == l.Name {
					p.vlans = append(p.vlans[:i:i], p.vlans[i+1:]...)
					break
				}
			}
		case bridges[l.Name]:
			delete(bridges, l.Name)
			p.l2ops = append(p.l2ops, l2.BridgeDel{Name: l.Name})
			p.l2pos = append(p.l2pos, cmd.Pos)
		default:
			p.fail(cmd.Pos, fmt.Errorf("%s: cannot delete a port (only bridges and VLAN interfaces)", l.Name))
		}
	case "set":
		if !bridges[l.Name] && !vlanNames[l.Name] {
			p.names[l.Name] = cmd.Pos
		}
		if l.Master != "" || l.NoMaster {
			p.l2ops = append(p.l2ops, l2.SetMaster{Port: l.Name, Master: l.Master})
			p.l2pos = append(p.l2pos, cmd.Pos)
		}
		s := p.settings[l.Name]
		if l.Up || l.Down {
			s.Down = l.Down
			if err := tx.SetLinkUp(l.Name, l.Up); err != nil {
				p.fail(cmd.Pos, err)
			}
		}
		if l.MTU > 0 {
			s.MTU = l.MTU
		}
		if len(l.Address) == 6 {
			s.MAC = l2.MAC(net.HardwareAddr(l.Address))
		}
		p.settings[l.Name] = s
	default:
		p.fail(cmd.Pos, fmt.Errorf("link %s is a query, not configuration", l.Op))
	}
}
