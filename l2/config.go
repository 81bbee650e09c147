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
// validated list. Each op's check and apply live side by side in
// config_ops.go; this file holds the batch machinery and the view. Callers (the config reader, the control socket) are
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
//
// The view models what an op's apply does to what later ops can see: the
// bridges with their options and their own VLANs (and the local FDB
// entries of the bridge address that come with them), the ports with their
// bridge and VLANs, and the FDB and mdb entries, including the flushes
// that joining, leaving and losing VLANs cause. Anything not yet touched by
// the batch is read from the live state. TestViewMatchesCommit checks that
// a committed batch leaves exactly the state the view predicted.

type vidBits [64]uint64

func (b *vidBits) has(v uint16) bool { return b[v>>6]&(1<<(v&63)) != 0 }
func (b *vidBits) set(v uint16)      { b[v>>6] |= 1 << (v & 63) }
func (b *vidBits) clr(v uint16)      { b[v>>6] &^= 1 << (v & 63) }
func (b *vidBits) put(v uint16, on bool) {
	if on {
		b.set(v)
	} else {
		b.clr(v)
	}
}

// vlanSet is a device's VLAN memberships: which, their egress untagged
// flag, and the pvid.
type vlanSet struct {
	member, untagged vidBits
	pvid             uint16
}

func (s *vlanSet) has(vid uint16) bool { return s.member.has(vid) }

// add joins vid, replacing its flags (portVLANAddLocked, selfVLANAddLocked):
// without pvid the VID stops being the pvid.
func (s *vlanSet) add(vid uint16, pvid, untagged bool) {
	s.member.set(vid)
	s.untagged.put(vid, untagged)
	if pvid {
		s.pvid = vid
	} else if s.pvid == vid {
		s.pvid = 0
	}
}

// del leaves vid and reports whether the device was a member.
func (s *vlanSet) del(vid uint16) bool {
	if !s.member.has(vid) {
		return false
	}
	s.member.clr(vid)
	s.untagged.clr(vid)
	if s.pvid == vid {
		s.pvid = 0
	}
	return true
}

// isDefault reports whether vid is the pvid, untagged (what a change of
// vlan_default_pvid moves).
func (s *vlanSet) isDefault(vid uint16) bool {
	return s.member.has(vid) && s.pvid == vid && s.untagged.has(vid)
}

type brModel struct {
	exists      bool
	filtering   bool
	defaultPVID uint16
	mac         wire.MAC // zero for a bridge of the batch with a random address
	self        vlanSet  // the bridge's own VLANs
}

type portModel struct {
	exists bool
	master string
	vlans  vlanSet
}

type fdbModelKey struct {
	br  string
	key uint64
}

type fdbModel struct {
	present bool
	learned bool   // a learned entry: replaced silently by fdb add
	static  bool   // never flushed with a port's VLAN (local, static)
	dev     string // port name, or the bridge name for bridge entries
}

type mdbModelKey struct {
	br, port string
	key      uint64
}

// portVID names a port's membership in one VLAN.
type portVID struct {
	port string
	vid  uint16
}

type view struct {
	d       *Domain
	bridges map[string]*brModel
	ports   map[string]*portModel
	fdb     map[fdbModelKey]fdbModel
	mdb     map[mdbModelKey]bool
	// Entries the committed state still has but the batch will have flushed
	// by the time it gets there: those of ports that left their bridge, all
	// of bridges that were deleted (even if created again), and the
	// non-static ones of port-VLANs that were removed.
	releasedPorts  map[string]bool
	deletedBridges map[string]bool
	flushedVLANs   map[portVID]bool
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
			if f := vl.self.Load(); f&pvMember != 0 {
				m.self.add(vid, f&pvPVID != 0, f&pvUntagged != 0)
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
			if f := pv.flags.Load(); f&pvMember != 0 {
				m.vlans.add(vid, false, f&pvUntagged != 0)
			}
		})
		m.vlans.pvid = p.PVID()
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
	m := fdbModel{present: true, learned: flags&fdbLearned != 0, static: flags&fdbStatic != 0, dev: br}
	if pv != nil {
		m.dev = pv.port.Name
		if v.releasedPorts[m.dev] || !m.static && keyVID(key) != 0 && v.flushedVLANs[portVID{m.dev, keyVID(key)}] {
			return fdbModel{}
		}
	}
	return m
}

// forgetFDB removes from the view the entries of bridge br that match.
func (v *view) forgetFDB(br string, match func(key uint64, e fdbModel) bool) {
	for k, e := range v.fdb {
		if k.br == br && e.present && match(k.key, e) {
			v.fdb[k] = fdbModel{}
		}
	}
}

// putLocal records a local (permanent) entry of the bridge device.
func (v *view) putLocal(br string, mac wire.MAC, vid uint16) {
	if !mac.IsZero() {
		v.fdb[fdbModelKey{br, fdbKey(mac, vid)}] = fdbModel{present: true, static: true, dev: br}
	}
}

// enslave records pm joining br (leaving its bridge first), as
// addPortLocked: the default pvid VLAN, pvid and untagged.
func (v *view) enslave(name string, pm *portModel, br string) {
	if pm.master != "" && pm.master != br {
		v.release(name, pm)
	}
	pm.exists = true
	if pm.master == br {
		return
	}
	pm.master = br
	if pvid := v.bridge(br).defaultPVID; pvid != 0 {
		pm.vlans.add(pvid, true, true)
	}
}

// release records pm leaving its bridge, as releasePortLocked: its VLANs,
// FDB entries and mdb memberships go.
func (v *view) release(name string, pm *portModel) {
	br := pm.master
	v.releasedPorts[name] = true
	v.forgetFDB(br, func(_ uint64, e fdbModel) bool { return e.dev == name })
	for k := range v.mdb {
		if k.br == br && k.port == name {
			v.mdb[k] = false
		}
	}
	pm.master, pm.vlans = "", vlanSet{}
}

// portVLANDel records portVLANDelLocked: the port's non-static entries in
// the VLAN are flushed.
func (v *view) portVLANDel(name string, pm *portModel, vid uint16) {
	if !pm.vlans.del(vid) {
		return
	}
	v.flushedVLANs[portVID{name, vid}] = true
	v.forgetFDB(pm.master, func(key uint64, e fdbModel) bool { return e.dev == name && keyVID(key) == vid && !e.static })
}

// selfVLANAdd records selfVLANAddLocked: the bridge address becomes a local
// entry in a VLAN the bridge joins.
func (v *view) selfVLANAdd(name string, bm *brModel, vid uint16, pvid, untagged bool) {
	if !bm.self.has(vid) {
		v.putLocal(name, bm.mac, vid)
	}
	bm.self.add(vid, pvid, untagged)
}

// selfVLANDel records selfVLANDelLocked.
func (v *view) selfVLANDel(name string, bm *brModel, vid uint16) {
	if !bm.self.del(vid) {
		return
	}
	if !bm.mac.IsZero() {
		k := fdbModelKey{name, fdbKey(bm.mac, vid)}
		if e := v.fdbEntry(name, k.key); e.present && e.dev == name {
			v.fdb[k] = fdbModel{}
		}
	}
}

// moveDefaultPVID records moveDefaultPVIDLocked: the bridge and the ports
// whose pvid is still the old default (pvid, untagged) move to the new one.
func (v *view) moveDefaultPVID(name string, bm *brModel, oldVID, newVID uint16) {
	if oldVID != 0 {
		if bm.self.isDefault(oldVID) {
			v.selfVLANDel(name, bm, oldVID)
			if newVID != 0 {
				v.selfVLANAdd(name, bm, newVID, true, true)
			}
		}
	} else if newVID != 0 && bm.self.pvid == 0 {
		v.selfVLANAdd(name, bm, newVID, true, true)
	}
	for pname := range v.d.byName {
		v.port(pname) // pull every live port into the view
	}
	for pname, pm := range v.ports {
		if pm.master != name {
			continue
		}
		if oldVID != 0 {
			if pm.vlans.isDefault(oldVID) {
				v.portVLANDel(pname, pm, oldVID)
				if newVID != 0 {
					pm.vlans.add(newVID, true, true)
				}
			}
		} else if newVID != 0 && pm.vlans.pvid == 0 {
			pm.vlans.add(newVID, true, true)
		}
	}
}

func (d *Domain) validateLocked(ops []Op) []OpError {
	_, errs := d.checkLocked(ops)
	return errs
}

// checkLocked checks ops in order and returns the view they leave: the
// state a commit of the list must produce (when nothing failed).
func (d *Domain) checkLocked(ops []Op) (*view, []OpError) {
	v := &view{d: d, bridges: map[string]*brModel{}, ports: map[string]*portModel{},
		fdb: map[fdbModelKey]fdbModel{}, mdb: map[mdbModelKey]bool{},
		releasedPorts: map[string]bool{}, deletedBridges: map[string]bool{}, flushedVLANs: map[portVID]bool{}}
	var errs []OpError
	for i, op := range ops {
		if err := v.check(op); err != nil {
			errs = append(errs, OpError{Index: i, Op: op, Err: err})
		}
	}
	return v, errs
}

// mdbEntry reports whether the view has port in group key of bridge br.
func (v *view) mdbEntry(br, port string, key uint64) bool {
	k := mdbModelKey{br, port, key}
	if cur, ok := v.mdb[k]; ok {
		return cur
	}
	if v.deletedBridges[br] || v.releasedPorts[port] || !v.bridge(br).exists {
		return false
	}
	if b := v.d.bridges[br]; b != nil {
		if mg := b.mdb[key]; mg != nil {
			for _, p := range mg.ports {
				if p.Name == port {
					return true
				}
			}
		}
	}
	return false
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
		return nil, nil, fmt.Errorf("Cannot find device %q", dev)
	}
	if pm.master == "" {
		return nil, nil, fmt.Errorf("%s is not a bridge port", dev)
	}
	return pm, v.bridge(pm.master), nil
}

// check validates one op against the view and records its effect there.
func (v *view) check(op Op) error {
	o, ok := op.(configOp)
	if !ok {
		return fmt.Errorf("unsupported operation %T", op)
	}
	return o.check(v)
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

func (d *Domain) applyLocked(op Op) { op.(configOp).apply(d) }

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
