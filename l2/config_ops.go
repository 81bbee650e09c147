package l2

// Each configuration op's check and apply, side by side: check validates
// the op against the view of the batch (config.go), recording its effect
// there so that later ops of the same batch see it; apply performs it on
// the live state during Commit, where it cannot fail because the batch was
// checked. A change to what an op does changes both halves here, together;
// TestViewMatchesCommit checks that they agree.
//
// Locking: check runs under Domain.mu (Prepare, Commit's re-validation),
// apply under Domain.mu (Commit), taking the FDB writer lock for entries.

import (
	"errors"
	"fmt"
	"github.com/netfwd/netfwd/wire"
)

// configOp is implemented by every Op.
type configOp interface {
	// check validates the op against v and records its effect in v.
	check(v *view) error
	// apply performs the validated op; Domain.mu held.
	apply(d *Domain)
}

// ---- BridgeAdd: a new bridge: the name is free, the attributes in range.

func (o BridgeAdd) check(v *view) error {
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
	v.putLocal(o.Name, m.mac, 0)
	if m.defaultPVID != 0 {
		v.selfVLANAdd(o.Name, m, m.defaultPVID, true, true)
	}
	return nil
}

func (o BridgeAdd) apply(d *Domain) {
	d.newBridgeLocked(o.Name, o.Attrs)
}

// ---- BridgeSet: options of an existing bridge; its address only at creation.

func (o BridgeSet) check(v *view) error {
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
	if o.Attrs.DefaultPVID != nil && *o.Attrs.DefaultPVID != m.defaultPVID {
		old := m.defaultPVID
		m.defaultPVID = *o.Attrs.DefaultPVID
		v.moveDefaultPVID(o.Name, m, old, m.defaultPVID)
	}
	return nil
}

func (o BridgeSet) apply(d *Domain) {
	d.bridges[o.Name].setAttrsLocked(o.Attrs)
}

// ---- BridgeDel: the bridge exists; its ports are released (their entries go).

func (o BridgeDel) check(v *view) error {
	m := v.bridge(o.Name)
	if !m.exists {
		return fmt.Errorf("cannot find bridge %q", o.Name)
	}
	for name := range v.d.byName {
		v.port(name) // pull every live port into the view
	}
	for name, pm := range v.ports {
		if pm.master == o.Name {
			v.release(name, pm)
		}
	}
	*m = brModel{}
	v.deletedBridges[o.Name] = true
	v.forgetFDB(o.Name, func(uint64, fdbModel) bool { return true })
	for k := range v.mdb {
		if k.br == o.Name {
			v.mdb[k] = false
		}
	}
	return nil
}

func (o BridgeDel) apply(d *Domain) {
	b := d.bridges[o.Name]
	for len(b.members) > 0 {
		b.releasePortLocked(b.members[0])
	}
	delete(d.bridges, o.Name)
}

// ---- PortAdd: declares a port (idempotent); a bridge cannot be one.

func (o PortAdd) check(v *view) error {
	if o.Name == "" {
		return errors.New("missing port name")
	}
	if v.bridge(o.Name).exists {
		return fmt.Errorf("%s is a bridge, not a port", o.Name)
	}
	v.port(o.Name).exists = true
	return nil
}

func (o PortAdd) apply(d *Domain) {
	d.ensurePortLocked(o.Name, o.MAC)
}

// ---- SetMaster: a port joins a bridge (with the default pvid VLAN) or leaves it.

func (o SetMaster) check(v *view) error {
	if o.Port == "" {
		return errors.New("missing device name")
	}
	if v.bridge(o.Port).exists {
		return fmt.Errorf("%s is a bridge: bridges cannot be bridge ports", o.Port)
	}
	pm := v.port(o.Port)
	if o.Master == "" {
		pm.exists = true
		if pm.master != "" {
			v.release(o.Port, pm)
		}
		return nil
	}
	if !v.bridge(o.Master).exists {
		if v.port(o.Master).exists {
			return fmt.Errorf("%s is not a bridge", o.Master)
		}
		return fmt.Errorf("cannot find bridge %q", o.Master)
	}
	v.enslave(o.Port, pm, o.Master)
	return nil
}

func (o SetMaster) apply(d *Domain) {
	p := d.ensurePortLocked(o.Port, wire.MAC{})
	if o.Master == "" {
		if b := p.bridge.Load(); b != nil {
			b.releasePortLocked(p)
		}
		return
	}
	d.bridges[o.Master].addPortLocked(p)
}

// ---- VLANAdd: VLANs of a bridge port, or of the bridge itself (self).

func (o VLANAdd) check(v *view) error {
	lo, hi, err := checkRange(o.VID, o.VIDEnd)
	if err != nil {
		return err
	}
	if o.PVID && lo != hi {
		return errors.New("pvid cannot be given for a VLAN range")
	}
	if bm := v.bridge(o.Dev); bm.exists {
		for vid := lo; vid <= hi; vid++ {
			v.selfVLANAdd(o.Dev, bm, vid, o.PVID, o.Untagged)
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
		pm.vlans.add(vid, o.PVID, o.Untagged)
	}
	return nil
}

func (o VLANAdd) apply(d *Domain) {
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
}

// ---- VLANDel: the VLANs must be configured.

func (o VLANDel) check(v *view) error {
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
			v.selfVLANDel(o.Dev, bm, vid)
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
		v.portVLANDel(o.Dev, pm, vid)
	}
	return nil
}

func (o VLANDel) apply(d *Domain) {
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
}

// ---- FDBAdd: a configured entry; over a configured one only with replace.

func (o FDBAdd) check(v *view) error {
	return v.checkFDB(o.MAC, o.Dev, o.VID, o.HasVID, o.Kind == FDBPermanent, func(br string, key uint64, devName string) error {
		if o.Sticky && o.Kind == FDBPermanent {
			return errors.New("sticky entries cannot be local/permanent")
		}
		cur := v.fdbEntry(br, key)
		if cur.present && !cur.learned && !o.Replace {
			return fmt.Errorf("fdb entry %s vlan %d already exists", keyMAC(key), keyVID(key))
		}
		v.fdb[fdbModelKey{br, key}] = fdbModel{present: true, static: o.Kind != FDBDynamic, dev: devName}
		return nil
	})
}

func (o FDBAdd) apply(d *Domain) {
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
}

// ---- FDBDel: the entry must be there, on that device.

func (o FDBDel) check(v *view) error {
	return v.checkFDB(o.MAC, o.Dev, o.VID, o.HasVID, true, func(br string, key uint64, devName string) error {
		cur := v.fdbEntry(br, key)
		if !cur.present || cur.dev != devName {
			return fmt.Errorf("fdb entry %s vlan %d on %s not found", keyMAC(key), keyVID(key), devName)
		}
		v.fdb[fdbModelKey{br, key}] = fdbModel{}
		return nil
	})
}

func (o FDBDel) apply(d *Domain) {
	d.eachFDBTargetLocked(o.Dev, o.MAC, o.VID, o.HasVID, func(b *Bridge, key uint64, pv *PortVLAN) {
		if dst, _, ok := b.fdb.m.lookupLocked(key); ok && dst == pv {
			b.fdb.deleteLocked(key)
		}
	})
}

// ---- LinkSet: port flags, STP state, per-port learning limit.

func (o LinkSet) check(v *view) error {
	if _, _, err := v.memberPort(o.Dev); err != nil {
		return err
	}
	if o.Set&o.Clear != 0 {
		return errors.New("a flag is both set and cleared")
	}
	if o.State != nil && *o.State > StateBlocking {
		return fmt.Errorf("invalid port state %d (0-4)", *o.State)
	}
	return nil
}

func (o LinkSet) apply(d *Domain) {
	p := d.byName[o.Dev]
	p.bridge.Load().setPortLocked(p, o.Set, o.Clear, o.State, o.MaxLearned)
}

// ---- MDBAdd, MDBDel: static group membership of a port of the bridge.

func (o MDBAdd) check(v *view) error { return v.checkMDB(o.Bridge, o.Port, o.Group, o.VID, true) }

func (o MDBAdd) apply(d *Domain) {
	d.bridges[o.Bridge].addMDBLocked(d.byName[o.Port], o.Group, o.VID)
}

func (o MDBDel) check(v *view) error { return v.checkMDB(o.Bridge, o.Port, o.Group, o.VID, false) }

func (o MDBDel) apply(d *Domain) {
	d.bridges[o.Bridge].delMDBLocked(d.byName[o.Port], o.Group, o.VID)
}

// checkMDB checks an mdb add (add) or del against the view.
func (v *view) checkMDB(br, port string, g wire.MAC, vid uint16, add bool) error {
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
	cur := v.mdbEntry(br, port, k.key)
	if add && cur {
		return fmt.Errorf("mdb entry %s vid %d on %s already exists", g, vid, port)
	}
	if !add && !cur {
		return fmt.Errorf("mdb entry %s vid %d on %s not found", g, vid, port)
	}
	v.mdb[k] = add
	return nil
}
