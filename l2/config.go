package l2

// Checked, all-or-nothing configuration: Prepare validates a list of ops
// against the current state without changing anything the datapath sees;
// Commit applies them all; Abort drops them.
//
// Validation runs each op against a view: the live state overlaid with the
// effects of the earlier ops of the same list (copy-on-write models of the
// bridges, ports, FDB entries and mdb entries they touched), so a file may
// create a bridge, enslave ports and configure their VLANs in order. An op
// that fails is reported (with its index) and skipped; the others are still
// checked, so every error of a file is reported at once.
//
// Commit takes Domain.mu, checks that no other change was committed since
// Prepare (the configuration generation), re-validating if one was, and
// applies the ops in order with the *Locked methods, which cannot fail on a
// validated list. Callers (the config reader, the control socket) are
// expected to serialise changes; the generation check makes a race safe.

import (
	"errors"
	"fmt"
	"time"

	"github.com/netfwd/netfwd/wire"
)

// OpError is the error of one op of a list.
type OpError struct {
	Index int // position in the list given to Prepare
	Op    Op
	Err   error
}

func (e OpError) Error() string { return fmt.Sprintf("op %d (%s): %v", e.Index, e.Op, e.Err) }
func (e OpError) Unwrap() error { return e.Err }

// Change is a validated list of ops, ready to commit.
type Change struct {
	d    *Domain
	ops  []Op
	gen  uint64
	done bool
}

// errChangeDone is returned when a Change is committed twice or after Abort.
var errChangeDone = errors.New("l2: change already committed or aborted")

// Prepare validates ops against the current state. If any op fails it
// returns a nil Change and one OpError per failing op.
func (d *Domain) Prepare(ops []Op) (*Change, []OpError) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if errs := d.validateLocked(ops); len(errs) > 0 {
		return nil, errs
	}
	return &Change{d: d, ops: ops, gen: d.gen}, nil
}

// Apply is Prepare followed by Commit (tests, the control socket).
func (d *Domain) Apply(ops ...Op) error {
	c, errs := d.Prepare(ops)
	if len(errs) > 0 {
		return joinOpErrors(errs)
	}
	return c.Commit()
}

func joinOpErrors(errs []OpError) error {
	e := make([]error, len(errs))
	for i := range errs {
		e[i] = errs[i]
	}
	return errors.Join(e...)
}

// Commit applies the change. It fails only if another change committed in
// between made this one invalid; then nothing is applied.
func (c *Change) Commit() error {
	if c.done {
		return errChangeDone
	}
	c.done = true
	d := c.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.gen != c.gen {
		if errs := d.validateLocked(c.ops); len(errs) > 0 {
			return fmt.Errorf("configuration changed since it was checked: %w", joinOpErrors(errs))
		}
	}
	for _, op := range c.ops {
		d.applyLocked(op)
	}
	d.gen++
	return nil
}

// Abort drops the change.
func (c *Change) Abort() { c.done = true }

// Ops returns the ops of the change.
func (c *Change) Ops() []Op { return c.ops }

// ---- the view used by validation ----

type vidBits [64]uint64

func (b *vidBits) has(v uint16) bool { return b[v>>6]&(1<<(v&63)) != 0 }
func (b *vidBits) set(v uint16)      { b[v>>6] |= 1 << (v & 63) }
func (b *vidBits) clr(v uint16)      { b[v>>6] &^= 1 << (v & 63) }

type brModel struct {
	exists      bool
	filtering   bool
	defaultPVID uint16
	mac         wire.MAC
	self        vidBits
}

type portModel struct {
	exists bool
	master string
	vlans  vidBits
	pvid   uint16
}

type fdbModelKey struct {
	br  string
	key uint64
}

type fdbModel struct {
	present bool
	learned bool   // a learned entry: replaced silently by fdb add
	dev     string // port name, or the bridge name for bridge entries
}

type mdbModelKey struct {
	br, port string
	key      uint64
}

type view struct {
	d       *Domain
	bridges map[string]*brModel
	ports   map[string]*portModel
	fdb     map[fdbModelKey]fdbModel
	mdb     map[mdbModelKey]bool
	// Entries the committed state still has but the batch will have flushed
	// by the time it gets there: those of ports that left their bridge, and
	// all of bridges that were deleted (even if created again).
	releasedPorts  map[string]bool
	deletedBridges map[string]bool
}

func (v *view) bridge(name string) *brModel {
	if m, ok := v.bridges[name]; ok {
		return m
	}
	m := &brModel{}
	if b := v.d.bridges[name]; b != nil {
		cfg := b.cfg.Load()
		m.exists, m.filtering, m.defaultPVID, m.mac = true, cfg.vlanFiltering, cfg.defaultPVID, b.MAC
		b.vlans.each(func(vid uint16, vl *vlan) {
			if vl.self.Load()&pvMember != 0 {
				m.self.set(vid)
			}
		})
	}
	v.bridges[name] = m
	return m
}

func (v *view) port(name string) *portModel {
	if m, ok := v.ports[name]; ok {
		return m
	}
	m := &portModel{}
	if p := v.d.byName[name]; p != nil {
		m.exists = true
		if b := p.bridge.Load(); b != nil {
			m.master = b.Name
		}
		p.vlans.each(func(vid uint16, pv *PortVLAN) {
			if pv.Member() {
				m.vlans.set(vid)
			}
		})
		m.pvid = p.PVID()
	}
	v.ports[name] = m
	return m
}

func (v *view) fdbEntry(br string, key uint64) fdbModel {
	if m, ok := v.fdb[fdbModelKey{br, key}]; ok {
		return m
	}
	b := v.d.bridges[br]
	if b == nil || !v.bridge(br).exists {
		return fdbModel{}
	}
	if v.deletedBridges[br] {
		return fdbModel{}
	}
	pv, flags, ok := b.fdb.lookup(key)
	if !ok {
		return fdbModel{}
	}
	m := fdbModel{present: true, learned: flags&fdbLearned != 0, dev: br}
	if pv != nil {
		m.dev = pv.port.Name
		if v.releasedPorts[m.dev] {
			return fdbModel{}
		}
	}
	return m
}

// enslave records p joining br in the view (with the default pvid VLAN).
func (v *view) enslave(pm *portModel, br string) {
	pm.exists = true
	pm.master = br
	pm.vlans = vidBits{}
	pm.pvid = 0
	if pvid := v.bridge(br).defaultPVID; pvid != 0 {
		pm.vlans.set(pvid)
		pm.pvid = pvid
	}
}

func (d *Domain) validateLocked(ops []Op) []OpError {
	v := &view{d: d, bridges: map[string]*brModel{}, ports: map[string]*portModel{},
		fdb: map[fdbModelKey]fdbModel{}, mdb: map[mdbModelKey]bool{},
		releasedPorts: map[string]bool{}, deletedBridges: map[string]bool{}}
	var errs []OpError
	for i, op := range ops {
		if err := v.check(op); err != nil {
			errs = append(errs, OpError{Index: i, Op: op, Err: err})
		}
	}
	return errs
}

func checkAttrs(a BridgeAttrs) error {
	if a.AgeingTime != nil && (*a.AgeingTime < 0 || *a.AgeingTime > 1000000*time.Second) {
		return fmt.Errorf("ageing_time %v out of range (0-1000000 s)", *a.AgeingTime)
	}
	if a.DefaultPVID != nil && *a.DefaultPVID > wire.MaxVID {
		return fmt.Errorf("vlan_default_pvid %d out of range (0-%d)", *a.DefaultPVID, wire.MaxVID)
	}
	if a.MAC != nil && !a.MAC.IsValidUnicast() {
		return fmt.Errorf("invalid bridge address %s", *a.MAC)
	}
	return nil
}

func checkRange(lo, hi uint16) (uint16, uint16, error) {
	if hi == 0 {
		hi = lo
	}
	if lo == 0 || lo > wire.MaxVID {
		return 0, 0, errVID(lo)
	}
	if hi > wire.MaxVID {
		return 0, 0, errVID(hi)
	}
	if hi < lo {
		return 0, 0, fmt.Errorf("invalid VLAN range %d-%d", lo, hi)
	}
	return lo, hi, nil
}

// memberPort resolves dev to a bridge member in the view.
func (v *view) memberPort(dev string) (*portModel, *brModel, error) {
	if v.bridge(dev).exists {
		return nil, nil, fmt.Errorf("%s is a bridge, not a bridge port", dev)
	}
	pm := v.port(dev)
	if !pm.exists {
		return nil, nil, fmt.Errorf("cannot find device %q", dev)
	}
	if pm.master == "" {
		return nil, nil, fmt.Errorf("%s is not a bridge port", dev)
	}
	return pm, v.bridge(pm.master), nil
}

func (v *view) check(op Op) error {
	switch o := op.(type) {
	case BridgeAdd:
		if o.Name == "" {
			return errors.New("missing bridge name")
		}
		if v.bridge(o.Name).exists || v.port(o.Name).exists {
			return fmt.Errorf("device %s already exists", o.Name)
		}
		if err := checkAttrs(o.Attrs); err != nil {
			return err
		}
		m := v.bridges[o.Name]
		*m = brModel{exists: true, defaultPVID: 1}
		if o.Attrs.VLANFiltering != nil {
			m.filtering = *o.Attrs.VLANFiltering
		}
		if o.Attrs.DefaultPVID != nil {
			m.defaultPVID = *o.Attrs.DefaultPVID
		}
		if o.Attrs.MAC != nil {
			m.mac = *o.Attrs.MAC
		}
		if m.defaultPVID != 0 {
			m.self.set(m.defaultPVID)
		}
	case BridgeSet:
		m := v.bridge(o.Name)
		if !m.exists {
			return fmt.Errorf("cannot find bridge %q", o.Name)
		}
		if o.Attrs.MAC != nil {
			return errors.New("the bridge address can only be set when it is created")
		}
		if err := checkAttrs(o.Attrs); err != nil {
			return err
		}
		if o.Attrs.VLANFiltering != nil {
			m.filtering = *o.Attrs.VLANFiltering
		}
		if o.Attrs.DefaultPVID != nil {
			m.defaultPVID = *o.Attrs.DefaultPVID
		}
	case BridgeDel:
		m := v.bridge(o.Name)
		if !m.exists {
			return fmt.Errorf("cannot find bridge %q", o.Name)
		}
		m.exists = false
		v.deletedBridges[o.Name] = true
		for name := range v.d.byName {
			v.port(name) // pull every live port into the view
		}
		for name, pm := range v.ports {
			if pm.master == o.Name {
				v.releasedPorts[name] = true
				pm.master, pm.vlans, pm.pvid = "", vidBits{}, 0
			}
		}
	case PortAdd:
		if o.Name == "" {
			return errors.New("missing port name")
		}
		if v.bridge(o.Name).exists {
			return fmt.Errorf("%s is a bridge, not a port", o.Name)
		}
		v.port(o.Name).exists = true
	case SetMaster:
		if o.Port == "" {
			return errors.New("missing device name")
		}
		if v.bridge(o.Port).exists {
			return fmt.Errorf("%s is a bridge: bridges cannot be bridge ports", o.Port)
		}
		pm := v.port(o.Port)
		if pm.master != "" && pm.master != o.Master {
			v.releasedPorts[o.Port] = true // leaving its bridge flushes its entries
		}
		if o.Master == "" {
			pm.exists = true
			pm.master, pm.vlans, pm.pvid = "", vidBits{}, 0
			return nil
		}
		if !v.bridge(o.Master).exists {
			if v.port(o.Master).exists {
				return fmt.Errorf("%s is not a bridge", o.Master)
			}
			return fmt.Errorf("cannot find bridge %q", o.Master)
		}
		if pm.master != o.Master {
			v.enslave(pm, o.Master)
		}
	case VLANAdd:
		lo, hi, err := checkRange(o.VID, o.VIDEnd)
		if err != nil {
			return err
		}
		if o.PVID && lo != hi {
			return errors.New("pvid cannot be given for a VLAN range")
		}
		if bm := v.bridge(o.Dev); bm.exists {
			for vid := lo; vid <= hi; vid++ {
				bm.self.set(vid)
			}
			return nil
		}
		if o.Self {
			return fmt.Errorf("self is only valid with the bridge device, %s is a port", o.Dev)
		}
		pm, _, err := v.memberPort(o.Dev)
		if err != nil {
			return err
		}
		for vid := lo; vid <= hi; vid++ {
			pm.vlans.set(vid)
		}
		if o.PVID {
			pm.pvid = lo
		} else if pm.pvid >= lo && pm.pvid <= hi {
			pm.pvid = 0
		}
	case VLANDel:
		lo, hi, err := checkRange(o.VID, o.VIDEnd)
		if err != nil {
			return err
		}
		if bm := v.bridge(o.Dev); bm.exists {
			for vid := lo; vid <= hi; vid++ {
				if !bm.self.has(vid) {
					return fmt.Errorf("VLAN %d is not configured on %s", vid, o.Dev)
				}
			}
			for vid := lo; vid <= hi; vid++ {
				bm.self.clr(vid)
			}
			return nil
		}
		if o.Self {
			return fmt.Errorf("self is only valid with the bridge device, %s is a port", o.Dev)
		}
		pm, _, err := v.memberPort(o.Dev)
		if err != nil {
			return err
		}
		for vid := lo; vid <= hi; vid++ {
			if !pm.vlans.has(vid) {
				return fmt.Errorf("VLAN %d is not configured on %s", vid, o.Dev)
			}
		}
		for vid := lo; vid <= hi; vid++ {
			pm.vlans.clr(vid)
			if pm.pvid == vid {
				pm.pvid = 0
			}
		}
	case FDBAdd:
		return v.checkFDB(o.MAC, o.Dev, o.VID, o.HasVID, o.Kind == FDBPermanent, func(br string, key uint64, devName string) error {
			if o.Sticky && o.Kind == FDBPermanent {
				return errors.New("sticky entries cannot be local/permanent")
			}
			cur := v.fdbEntry(br, key)
			if cur.present && !cur.learned && !o.Replace {
				return fmt.Errorf("fdb entry %s vlan %d already exists", keyMAC(key), keyVID(key))
			}
			v.fdb[fdbModelKey{br, key}] = fdbModel{present: true, dev: devName}
			return nil
		})
	case FDBDel:
		return v.checkFDB(o.MAC, o.Dev, o.VID, o.HasVID, true, func(br string, key uint64, devName string) error {
			cur := v.fdbEntry(br, key)
			if !cur.present || cur.dev != devName {
				return fmt.Errorf("fdb entry %s vlan %d on %s not found", keyMAC(key), keyVID(key), devName)
			}
			v.fdb[fdbModelKey{br, key}] = fdbModel{}
			return nil
		})
	case LinkSet:
		if _, _, err := v.memberPort(o.Dev); err != nil {
			return err
		}
		if o.Set&o.Clear != 0 {
			return errors.New("a flag is both set and cleared")
		}
		if o.State != nil && *o.State > StateBlocking {
			return fmt.Errorf("invalid port state %d (0-4)", *o.State)
		}
	case MDBAdd, MDBDel:
		var br, port string
		var g wire.MAC
		var vid uint16
		add := false
		if a, ok := o.(MDBAdd); ok {
			br, port, g, vid, add = a.Bridge, a.Port, a.Group, a.VID, true
		} else {
			d := o.(MDBDel)
			br, port, g, vid = d.Bridge, d.Port, d.Group, d.VID
		}
		if !v.bridge(br).exists {
			return fmt.Errorf("cannot find bridge %q", br)
		}
		pm, _, err := v.memberPort(port)
		if err != nil {
			return err
		}
		if pm.master != br {
			return fmt.Errorf("%s is not a port of %s", port, br)
		}
		if err := checkGroup(g); err != nil {
			return err
		}
		if vid != 0 && (vid > wire.MaxVID || !pm.vlans.has(vid)) {
			return fmt.Errorf("VLAN %d is not configured on %s", vid, port)
		}
		k := mdbModelKey{br, port, fdbKey(g, vid)}
		cur, ok := v.mdb[k]
		if !ok && !v.deletedBridges[br] && !v.releasedPorts[port] {
			if b := v.d.bridges[br]; b != nil {
				if mg := b.mdb[k.key]; mg != nil {
					for _, p := range mg.ports {
						cur = cur || p.Name == port
					}
				}
			}
		}
		if add && cur {
			return fmt.Errorf("mdb entry %s vid %d on %s already exists", g, vid, port)
		}
		if !add && !cur {
			return fmt.Errorf("mdb entry %s vid %d on %s not found", g, vid, port)
		}
		v.mdb[k] = add
	default:
		return fmt.Errorf("unsupported operation %T", op)
	}
	return nil
}

// checkFDB resolves an fdb add/del target to (bridge, keys) and calls each
// for every key the op touches.
func (v *view) checkFDB(mac wire.MAC, dev string, vid uint16, hasVID, local bool, each func(br string, key uint64, devName string) error) error {
	if !mac.IsValidUnicast() {
		return fmt.Errorf("invalid unicast address %s", mac)
	}
	if hasVID && (vid == 0 || vid > wire.MaxVID) {
		return errVID(vid)
	}
	if bm := v.bridge(dev); bm.exists {
		// An entry of the bridge device itself: always local (Linux
		// rejects other states without a port).
		if !local {
			return fmt.Errorf("entries of the bridge device %s must be local/permanent", dev)
		}
		if hasVID && bm.filtering && !bm.self.has(vid) {
			return fmt.Errorf("VLAN %d is not configured on %s", vid, dev)
		}
		if !hasVID {
			vid = 0
		}
		return each(dev, fdbKey(mac, vid), dev)
	}
	pm, bm, err := v.memberPort(dev)
	if err != nil {
		return err
	}
	if hasVID {
		if !pm.vlans.has(vid) {
			return fmt.Errorf("VLAN %d is not configured on %s", vid, dev)
		}
		return each(pm.master, fdbKey(mac, vid), dev)
	}
	if err := each(pm.master, fdbKey(mac, 0), dev); err != nil {
		return err
	}
	if bm.filtering {
		for vid := uint16(1); vid <= wire.MaxVID; vid++ {
			if pm.vlans.has(vid) {
				if err := each(pm.master, fdbKey(mac, vid), dev); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// ---- apply (Domain.mu held; ops validated) ----

func (d *Domain) applyLocked(op Op) {
	switch o := op.(type) {
	case BridgeAdd:
		d.newBridgeLocked(o.Name, o.Attrs)
	case BridgeSet:
		d.bridges[o.Name].setAttrsLocked(o.Attrs)
	case BridgeDel:
		b := d.bridges[o.Name]
		for len(b.members) > 0 {
			b.releasePortLocked(b.members[0])
		}
		delete(d.bridges, o.Name)
	case PortAdd:
		d.ensurePortLocked(o.Name, o.MAC)
	case SetMaster:
		p := d.ensurePortLocked(o.Port, wire.MAC{})
		if o.Master == "" {
			if b := p.bridge.Load(); b != nil {
				b.releasePortLocked(p)
			}
			return
		}
		d.bridges[o.Master].addPortLocked(p)
	case VLANAdd:
		lo, hi, _ := checkRange(o.VID, o.VIDEnd)
		if b := d.bridges[o.Dev]; b != nil {
			for vid := lo; vid <= hi; vid++ {
				b.selfVLANAddLocked(vid, o.PVID, o.Untagged)
			}
			return
		}
		p := d.byName[o.Dev]
		b := p.bridge.Load()
		for vid := lo; vid <= hi; vid++ {
			b.portVLANAddLocked(p, vid, o.PVID, o.Untagged)
		}
	case VLANDel:
		lo, hi, _ := checkRange(o.VID, o.VIDEnd)
		if b := d.bridges[o.Dev]; b != nil {
			for vid := lo; vid <= hi; vid++ {
				b.selfVLANDelLocked(vid)
			}
			return
		}
		p := d.byName[o.Dev]
		b := p.bridge.Load()
		for vid := lo; vid <= hi; vid++ {
			b.portVLANDelLocked(p, vid)
		}
	case FDBAdd:
		flags := uint64(0)
		switch o.Kind {
		case FDBPermanent:
			flags |= fdbLocal | fdbStatic
		case FDBStatic:
			flags |= fdbStatic
		}
		if o.Sticky {
			flags |= fdbSticky
		}
		d.eachFDBTargetLocked(o.Dev, o.MAC, o.VID, o.HasVID, func(b *Bridge, key uint64, pv *PortVLAN) {
			b.fdb.putLocked(key, pv, flags, true, d.clock.Now())
		})
	case FDBDel:
		d.eachFDBTargetLocked(o.Dev, o.MAC, o.VID, o.HasVID, func(b *Bridge, key uint64, pv *PortVLAN) {
			if dst, _, ok := b.fdb.m.lookupLocked(key); ok && dst == pv {
				b.fdb.deleteLocked(key)
			}
		})
	case LinkSet:
		p := d.byName[o.Dev]
		p.bridge.Load().setPortLocked(p, o.Set, o.Clear, o.State, o.MaxLearned)
	case MDBAdd:
		d.bridges[o.Bridge].addMDBLocked(d.byName[o.Port], o.Group, o.VID)
	case MDBDel:
		d.bridges[o.Bridge].delMDBLocked(d.byName[o.Port], o.Group, o.VID)
	}
}

// eachFDBTargetLocked mirrors checkFDB on the live state; fn runs with the
// FDB writer lock held.
func (d *Domain) eachFDBTargetLocked(dev string, mac wire.MAC, vid uint16, hasVID bool, fn func(b *Bridge, key uint64, pv *PortVLAN)) {
	if b := d.bridges[dev]; b != nil {
		if !hasVID {
			vid = 0
		}
		b.fdb.mu.Lock()
		fn(b, fdbKey(mac, vid), nil)
		b.fdb.mu.Unlock()
		return
	}
	p := d.byName[dev]
	b := p.bridge.Load()
	b.fdb.mu.Lock()
	defer b.fdb.mu.Unlock()
	if hasVID {
		fn(b, fdbKey(mac, vid), p.vlans.get(vid))
		return
	}
	fn(b, fdbKey(mac, 0), &p.raw)
	if b.cfg.Load().vlanFiltering {
		p.vlans.each(func(vid uint16, pv *PortVLAN) {
			if pv.Member() {
				fn(b, fdbKey(mac, vid), pv)
			}
		})
	}
}
