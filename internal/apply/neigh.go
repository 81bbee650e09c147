package apply

// Neighbour lines: `neigh add|replace|change|del A [lladdr M] dev D
// [nud permanent|reachable|stale|noarp]` (iproute2's default state is
// permanent), and the router's ordered work after a commit.
//
// Flow: the batch's neighbour lines (parsed by internal/config) are queued
// as router actions in command order, interleaved with the flushes of devices
// the batch takes down. Before anything commits, checkNeigh replays that
// sequence against a model: the table's current entries (read once per key),
// the interfaces the batch leaves (bridges, VLAN interfaces, ports outside a
// bridge) and the flushes the batch causes, so an `add` of an existing entry
// or a `del` of a missing one fails the whole batch with the kernel's words.
// After the commit runActions flushes removed interfaces, then runs the
// actions in order; a `link set D address M` line flushes D's entries
// (neigh_changeaddr) where it stands, as Linux does for a batch.
//
// Admin link down flushes the device's non-permanent entries (as carrier
// loss does in Linux; Linux's admin down also drops permanent ones: netfwd
// keeps configured entries, as it keeps routes, see docs/daemon.md).
//
// Locking: called under Controller.mu; the table has its own lock.

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
	"github.com/netfwd/netfwd/neigh"
	"github.com/netfwd/netfwd/wire"
)

// neighOp is one neighbour line of a batch.
type neighOp struct {
	*config.NeighCmd
	pos     config.Pos
	lenient bool
	skip    bool // a lenient inverse with nothing to undo
}

// errNoDevice is iproute2's wording for an unknown dev.
func errNoDevice(dev string) error { return fmt.Errorf("Cannot find device %q", dev) }

// neighModel is checkNeigh's view of the table during the batch.
type neighModel struct {
	entries map[neighKey]neighEntry
	// cleared: the device's entries are all gone (interface removed or MAC
	// changed); flushed: its non-permanent ones are, from the live table's
	// point of view (entries created in the batch are tracked in entries).
	cleared, flushed map[string]bool
}

type neighKey struct {
	dev string
	ip  netip.Addr
}

type neighEntry struct{ exists, permanent bool }

// checkNeigh validates the batch's neighbour lines in order (see the file
// comment). ops is the validated bridge op list.
func (c *Controller) checkNeigh(p *pending, ops []l2.Op, bridges, vlanNames map[string]bool) {
	if len(p.actions) == 0 {
		return
	}
	r := c.e.Router()
	now := c.e.Domain().Clock().Now()
	// Interfaces after the batch: bridges, VLAN interfaces, unbridged ports.
	master := map[string]string{}
	for _, port := range c.e.Domain().Ports() {
		master[port.Name] = ""
		if b := port.Bridge(); b != nil {
			master[port.Name] = b.Name
		}
	}
	for _, op := range ops {
		switch o := op.(type) {
		case l2.PortAdd:
			if _, ok := master[o.Name]; !ok {
				master[o.Name] = ""
			}
		case l2.SetMaster:
			master[o.Port] = o.Master
		case l2.BridgeDel:
			for n, m := range master {
				if m == o.Name {
					master[n] = ""
				}
			}
		}
	}
	isIface := func(dev string) bool {
		if bridges[dev] || vlanNames[dev] {
			return true
		}
		m, ok := master[dev]
		return ok && m == ""
	}
	before := ifaceMap(r.Ifaces())
	m := neighModel{entries: map[neighKey]neighEntry{}, cleared: map[string]bool{}, flushed: map[string]bool{}}
	macLines := macActions(p)
	for name, ifc := range before {
		kindNow := ""
		switch {
		case bridges[name]:
			kindNow = "bridge"
		case vlanNames[name]:
			kindNow = "vlan"
		case isIface(name):
			kindNow = "port"
		}
		if kindNow != ifc.Kind.String() || p.settings[name].MAC != c.settings[name].MAC && !macLines[name] {
			m.cleared[name] = true
		}
	}
	get := func(k neighKey) neighEntry {
		if e, ok := m.entries[k]; ok {
			return e
		}
		var e neighEntry
		if !m.cleared[k.dev] {
			if info, ok := r.Neighbours().Get(r.IfIndex(k.dev), wire.Addr4From(k.ip), now); ok {
				e = neighEntry{exists: true, permanent: info.State == neigh.NUDPermanent}
				if m.flushed[k.dev] && !e.permanent {
					e = neighEntry{}
				}
			}
		}
		m.entries[k] = e
		return e
	}
	for _, a := range p.actions {
		if a.macDev != "" {
			m.cleared[a.macDev] = true
			for k := range m.entries {
				if k.dev == a.macDev {
					m.entries[k] = neighEntry{}
				}
			}
			continue
		}
		if a.neigh == nil {
			m.flushed[a.flushDev] = true
			for k, e := range m.entries {
				if k.dev == a.flushDev && !e.permanent {
					m.entries[k] = neighEntry{}
				}
			}
			continue
		}
		o := a.neigh
		if !isIface(o.Dev) {
			if !o.lenient {
				p.fail(o.pos, errNoDevice(o.Dev))
			}
			o.skip = true
			continue
		}
		k := neighKey{o.Dev, o.IP}
		e := get(k)
		switch {
		case o.Op == "delete" && !e.exists:
			if !o.lenient {
				p.fail(o.pos, neigh.ErrNotFound)
			}
			o.skip = true
		case o.Op == "add" && e.exists:
			p.fail(o.pos, neigh.ErrExists)
		case o.Op == "change" && !e.exists:
			p.fail(o.pos, neigh.ErrNotFound)
		case o.Op != "delete" && !e.exists && !o.HasLLAddr:
			p.fail(o.pos, neigh.ErrNoLLAddr)
		case o.Op == "delete":
			m.entries[k] = neighEntry{}
		default:
			m.entries[k] = neighEntry{exists: true, permanent: o.State == neigh.NUDPermanent}
		}
	}
}

// macActions lists the devices whose MAC the batch's lines change: their
// flush happens where the line stands, not before everything else.
func macActions(p *pending) map[string]bool {
	m := map[string]bool{}
	for _, a := range p.actions {
		if a.macDev != "" {
			m[a.macDev] = true
		}
	}
	return m
}

// runActions does the router's work after a commit: flushes for interfaces
// that went away or whose MAC changed otherwise (a bridge re-created), then
// the batch's neighbour changes, link-down and MAC-change flushes in order. A neighbour the table refuses at this
// point (table full of non-permanent entries) is reported; the rest of the
// batch stays applied.
func (c *Controller) runActions(p *pending, before map[string]*l3.Iface) error {
	r := c.e.Router()
	t := r.Neighbours()
	now := c.e.Domain().Clock().Now()
	var acts neigh.Actions
	after := ifaceMap(r.Ifaces())
	macLines := macActions(p)
	for name, old := range before {
		n := after[name]
		switch {
		case n == nil || n.Kind != old.Kind:
			t.FlushDev(old.Index, false, now, &acts)
		case n.MAC != old.MAC && !macLines[name]:
			t.ChangeAddr(n.Index, now, &acts)
		}
	}
	var errs []error
	for _, a := range p.actions {
		if a.macDev != "" {
			if ifc := after[a.macDev]; ifc != nil {
				t.ChangeAddr(ifc.Index, now, &acts)
			}
			continue
		}
		if a.neigh == nil {
			if ifc := after[a.flushDev]; ifc != nil {
				t.FlushDev(ifc.Index, true, now, &acts)
			}
			continue
		}
		o := a.neigh
		if o.skip {
			continue
		}
		ifc := after[o.Dev]
		if ifc == nil {
			continue // checked: cannot happen
		}
		spec := neigh.Spec{IfIndex: ifc.Index, IP: wire.Addr4From(o.IP), LLAddr: o.LLAddr, HasLLAddr: o.HasLLAddr,
			State: o.State, IfMAC: ifc.MAC}
		var err error
		switch o.Op {
		case "add":
			err = t.Add(spec, now, &acts)
		case "replace":
			err = t.Replace(spec, now, &acts)
		case "change":
			err = t.Change(spec, now, &acts)
		case "delete":
			err = t.Delete(ifc.Index, spec.IP, now, &acts)
		}
		if err != nil && !(o.lenient && missing(err)) {
			errs = append(errs, &config.Error{Pos: o.pos, Err: fmt.Errorf("%w (the rest of the batch is applied)", err)})
		}
	}
	c.mirror(&acts, after)
	return errors.Join(errs...)
}

// mirror keeps the bridges' neighbour-suppression tables in step with
// admin changes (the datapath does the same for what it learns). Packets
// released or failed by an admin change are dropped: the control plane has
// no transmit path (they were waiting for ARP; their senders retransmit).
func (c *Controller) mirror(acts *neigh.Actions, ifaces map[string]*l3.Iface) {
	byIndex := map[uint32]*l3.Iface{}
	for _, i := range ifaces {
		byIndex[i.Index] = i
	}
	for _, ev := range acts.Events {
		ifc := byIndex[ev.IfIndex]
		if ifc == nil || ifc.Bridge == nil {
			continue
		}
		ip := ev.IP.Netip()
		switch ev.Kind {
		case neigh.EventResolved, neigh.EventLLAddrChanged:
			ifc.Bridge.SetNeighbor(ifc.VID, ip, wire.MAC(ev.LLAddr))
		default:
			ifc.Bridge.DelNeighbor(ifc.VID, ip)
		}
	}
	acts.Reset()
}
