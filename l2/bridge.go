package l2

// The bridge: options, members, VLAN membership and the live side of every
// configuration operation. The checked, all-or-nothing entry point is
// config.go (Prepare/Commit); the *Locked methods here apply one validated
// operation and expect Domain.mu held.
//
// Linux behaviour reproduced: a new bridge is a member of its default pvid
// VLAN (1, pvid, untagged) and has a local FDB entry for its address in VID 0
// and in every VLAN it is a member of; a new port starts forwarding with the
// default flags, gets the default pvid VLAN and local entries for its own
// address; removing a VLAN from a port flushes the port's non-static entries
// in it; releasing a port flushes all of its entries.

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/netfwd/netfwd/internal/hashindex"
	"github.com/netfwd/netfwd/wire"
)

// defaultAgeingTime is Linux's ageing_time default (300 s).
const defaultAgeingTime = 300 * time.Second

// DefaultFloodDeferThreshold is the default of a bridge's flood_defer: floods
// to more members than this are deferred.
const DefaultFloodDeferThreshold = 32

// bridgeCfg is the immutable snapshot of options the datapath reads.
type bridgeCfg struct {
	vlanFiltering  bool
	ageing         int64 // ns; 0 disables learning (Linux: "some users want to always flood")
	maxLearned     uint32
	defaultPVID    uint16
	deferThreshold int // members; <0: never defer
	mcastPrefilter bool
}

// BridgeAttrs are the options of `link add NAME type bridge ...` and
// `link set NAME type bridge ...`. Nil fields are left unchanged (or take
// the default at creation).
type BridgeAttrs struct {
	VLANFiltering *bool          // vlan_filtering 0|1 (default 0)
	AgeingTime    *time.Duration // ageing_time (iproute2 gives centiseconds) (default 300 s)
	FDBMaxLearned *uint32        // fdb_max_learned (default 0: unlimited, within a hard cap)
	DefaultPVID   *uint16        // vlan_default_pvid (default 1; 0: none)
	MAC           *wire.MAC      // address (only at creation; default random, locally administered)
	// FloodDeferThreshold: floods to more members than this go to the
	// worker's bounded deferral queue (default 32; negative: never).
	FloodDeferThreshold *int
	// McastPrefilter enables the early multicast filter (default on; off
	// only to measure its benefit).
	McastPrefilter *bool
}

// Bridge is a VLAN-aware bridge.
type Bridge struct {
	Name string
	MAC  wire.MAC
	d    *Domain
	cfg  atomic.Pointer[bridgeCfg]

	vlans vidTable[vlan] // VID 1..4094
	vlan0 vlan           // the single flood domain without vlan_filtering
	fdb   FDB

	members []*Port // guarded by Domain.mu

	anySuppress atomic.Bool // some member has neigh_suppress
	nmu         sync.Mutex  // neighbour table writer lock
	neigh       hashindex.Index[neighEntry]

	mdb        map[uint64]*mdbGroup // key fdbKey(group, vid); guarded by Domain.mu
	hostGroups map[uint64]bool      // groups the host joined; guarded by Domain.mu
}

// FDB returns the bridge's forwarding database.
func (b *Bridge) FDB() *FDB { return &b.fdb }

// VLANFiltering reports the vlan_filtering option.
func (b *Bridge) VLANFiltering() bool { return b.cfg.Load().vlanFiltering }

// AgeingTime reports ageing_time.
func (b *Bridge) AgeingTime() time.Duration { return time.Duration(b.cfg.Load().ageing) }

// Members returns the member ports in join order.
func (b *Bridge) Members() []*Port {
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	return append([]*Port(nil), b.members...)
}

// HostPVID is the bridge's own pvid: the VLAN of untagged frames the host
// sends through the bridge device (0 if none).
func (b *Bridge) HostPVID() uint16 {
	pvid := uint16(0)
	b.vlans.each(func(vid uint16, v *vlan) {
		if v.self.Load()&pvPVID != 0 {
			pvid = vid
		}
	})
	return pvid
}

// HostMember reports whether the bridge itself is a member of vid and
// whether its membership is egress-untagged.
func (b *Bridge) HostMember(vid uint16) (member, untagged bool) {
	if !b.cfg.Load().vlanFiltering {
		return true, true
	}
	v := b.vlans.get(vid)
	if v == nil {
		return false, false
	}
	s := v.self.Load()
	return s&pvMember != 0, s&pvUntagged != 0
}

// LookupFDB returns the destination for mac in vid, as the datapath would
// forward a frame to it (vid is ignored without vlan_filtering). local is
// true when mac is the bridge's (or a port's) own address: such frames go to
// the host, and d is not meaningful. ok is false when the address is unknown
// (the caller floods, e.g. with FloodVLAN).
func (b *Bridge) LookupFDB(mac wire.MAC, vid uint16) (d FwdDst, local, ok bool) {
	if !b.cfg.Load().vlanFiltering {
		vid = 0
	}
	pv, flags, ok := b.fdb.lookup(fdbKey(mac, vid))
	if !ok {
		return FwdDst{}, false, false
	}
	if flags&fdbLocal != 0 || pv == nil {
		return FwdDst{}, true, true
	}
	return FwdDst{Port: pv.port, PV: pv}, false, true
}

// newBridgeLocked creates a bridge; guarded by Domain.mu.
func (d *Domain) newBridgeLocked(name string, a BridgeAttrs) *Bridge {
	b := &Bridge{Name: name, d: d, mdb: map[uint64]*mdbGroup{}, hostGroups: map[uint64]bool{}}
	cfg := &bridgeCfg{ageing: int64(defaultAgeingTime), defaultPVID: 1,
		deferThreshold: DefaultFloodDeferThreshold, mcastPrefilter: true}
	applyAttrs(cfg, a)
	b.cfg.Store(cfg)
	b.MAC = randomMAC()
	if a.MAC != nil {
		b.MAC = *a.MAC
	}
	b.fdb.init()
	b.fdb.maxLearned.Store(cfg.maxLearned)
	b.neigh.Init()
	b.vlan0 = vlan{br: b}
	b.vlan0.self.Store(pvMember | pvUntagged | pvRaw)
	now := d.clock.Now()
	b.fdb.mu.Lock()
	b.fdb.putLocked(fdbKey(b.MAC, 0), nil, fdbLocal|fdbStatic, false, now)
	b.fdb.mu.Unlock()
	if cfg.defaultPVID != 0 {
		b.selfVLANAddLocked(cfg.defaultPVID, true, true)
	}
	d.bridges[name] = b
	d.gen++
	return b
}

func applyAttrs(c *bridgeCfg, a BridgeAttrs) {
	if a.VLANFiltering != nil {
		c.vlanFiltering = *a.VLANFiltering
	}
	if a.AgeingTime != nil {
		c.ageing = int64(*a.AgeingTime)
	}
	if a.FDBMaxLearned != nil {
		c.maxLearned = *a.FDBMaxLearned
	}
	if a.DefaultPVID != nil {
		c.defaultPVID = *a.DefaultPVID
	}
	if a.FloodDeferThreshold != nil {
		c.deferThreshold = *a.FloodDeferThreshold
	}
	if a.McastPrefilter != nil {
		c.mcastPrefilter = *a.McastPrefilter
	}
}

// setAttrsLocked changes options of a live bridge. Changing
// vlan_default_pvid moves the default VLAN of ports (and the bridge) that
// still have it untouched, as Linux does (br_vlan_set_default_pvid).
func (b *Bridge) setAttrsLocked(a BridgeAttrs) {
	old := b.cfg.Load()
	c := *old
	applyAttrs(&c, a)
	b.cfg.Store(&c)
	b.fdb.maxLearned.Store(c.maxLearned)
	if c.defaultPVID != old.defaultPVID {
		b.moveDefaultPVIDLocked(old.defaultPVID, c.defaultPVID)
	}
	b.d.gen++
}

// moveDefaultPVIDLocked: entities whose pvid is the old default and whose
// VLAN is pvid+untagged move to the new default (Linux semantics).
func (b *Bridge) moveDefaultPVIDLocked(oldVID, newVID uint16) {
	isDefault := func(f uint32) bool { return f&(pvMember|pvPVID|pvUntagged) == pvMember|pvPVID|pvUntagged }
	if oldVID != 0 {
		if v := b.vlans.get(oldVID); v != nil && isDefault(v.self.Load()) {
			b.selfVLANDelLocked(oldVID)
			if newVID != 0 {
				b.selfVLANAddLocked(newVID, true, true)
			}
		}
	} else if newVID != 0 && b.HostPVID() == 0 {
		b.selfVLANAddLocked(newVID, true, true)
	}
	for _, p := range b.members {
		if oldVID != 0 {
			if pv := p.VLAN(oldVID); pv != nil && isDefault(pv.flags.Load()) {
				b.portVLANDelLocked(p, oldVID)
				if newVID != 0 {
					b.portVLANAddLocked(p, newVID, true, true)
				}
			}
		} else if newVID != 0 && p.pvid.Load() == nil {
			b.portVLANAddLocked(p, newVID, true, true)
		}
	}
}

// vlanLocked returns the VLAN object for vid, creating it.
func (b *Bridge) vlanLocked(vid uint16) *vlan {
	if v := b.vlans.get(vid); v != nil {
		return v
	}
	v := &vlan{vid: vid, br: b}
	b.vlans.set(vid, v)
	return v
}

// addPortLocked makes p a member (releasing it from another bridge first).
func (b *Bridge) addPortLocked(p *Port) {
	if cur := p.bridge.Load(); cur == b {
		return
	} else if cur != nil {
		cur.releasePortLocked(p)
	}
	p.ctl.Store(makeCtl(StateForwarding, defaultPortFlags))
	p.maxLearned.Store(0)
	p.raw.vlan.Store(&b.vlan0)
	b.members = append(b.members, p)
	p.bridge.Store(b)
	b.vlan0.addMemberLocked(&p.raw)
	if !p.MAC.IsZero() {
		b.fdb.mu.Lock()
		b.fdb.putLocked(fdbKey(p.MAC, 0), &p.raw, fdbLocal|fdbStatic, false, b.d.clock.Now())
		b.fdb.mu.Unlock()
	}
	if pvid := b.cfg.Load().defaultPVID; pvid != 0 {
		b.portVLANAddLocked(p, pvid, true, true)
	}
	b.rebuildMcLocked(&b.vlan0)
	b.recalcSuppressLocked()
	b.d.gen++
}

// releasePortLocked removes p from the bridge (`link set P nomaster`).
func (b *Bridge) releasePortLocked(p *Port) {
	p.vlans.each(func(vid uint16, pv *PortVLAN) {
		if pv.Member() {
			b.portVLANDelLocked(p, vid)
		}
	})
	b.vlan0.delMemberLocked(&p.raw)
	b.fdb.mu.Lock()
	b.fdb.flushLocked(func(e fdbView) bool { return e.dst != nil && e.dst.port == p })
	b.fdb.mu.Unlock()
	for i, m := range b.members {
		if m == p {
			b.members = append(b.members[:i:i], b.members[i+1:]...)
			break
		}
	}
	for k, g := range b.mdb {
		if g.delPort(p) && len(g.ports) == 0 {
			delete(b.mdb, k)
		}
	}
	p.bridge.Store(nil)
	p.pvid.Store(nil)
	p.ctl.Store(makeCtl(StateForwarding, defaultPortFlags))
	b.rebuildMcLocked(&b.vlan0)
	b.recalcSuppressLocked()
	b.d.gen++
}

// portVLANAddLocked adds (or updates) p's membership in vid. As in Linux,
// the flags of an existing membership are replaced: without pvid the VID
// stops being the pvid, without untagged it becomes tagged.
func (b *Bridge) portVLANAddLocked(p *Port, vid uint16, pvid, untagged bool) {
	v := b.vlanLocked(vid)
	pv := p.portVLANLocked(vid, v)
	f := pvMember
	if untagged {
		f |= pvUntagged
	}
	if pvid {
		f |= pvPVID
	}
	was := pv.flags.Load()
	pv.flags.Store(f)
	if pvid {
		if old := p.pvid.Load(); old != nil && old != pv {
			old.flags.Store(old.flags.Load() &^ pvPVID)
		}
		p.pvid.Store(pv)
	} else if p.pvid.Load() == pv {
		p.pvid.Store(nil)
	}
	if was&pvMember == 0 {
		v.addMemberLocked(pv)
		if !p.MAC.IsZero() {
			b.fdb.mu.Lock()
			b.fdb.putLocked(fdbKey(p.MAC, vid), pv, fdbLocal|fdbStatic, false, b.d.clock.Now())
			b.fdb.mu.Unlock()
		}
		b.rebuildMcLocked(v)
	}
	b.d.gen++
}

// portVLANDelLocked removes p from vid, flushing p's non-static entries in
// it and the local entry of p's address.
func (b *Bridge) portVLANDelLocked(p *Port, vid uint16) {
	pv := p.vlans.get(vid)
	if pv == nil || !pv.Member() {
		return
	}
	pv.flags.Store(0)
	if p.pvid.Load() == pv {
		p.pvid.Store(nil)
	}
	v := pv.vlan.Load()
	v.delMemberLocked(pv)
	b.fdb.mu.Lock()
	b.fdb.flushLocked(func(e fdbView) bool {
		if e.dst != pv {
			return false
		}
		return e.flags&fdbStatic == 0 || (e.flags&fdbLocal != 0 && keyMAC(e.key) == p.MAC)
	})
	b.fdb.mu.Unlock()
	b.rebuildMcLocked(v)
	b.d.gen++
}

// selfVLANAddLocked makes the bridge itself a member of vid (`bridge vlan
// add dev br0 vid V self`): frames for the host in vid are delivered, and
// the bridge address becomes a local entry in vid.
func (b *Bridge) selfVLANAddLocked(vid uint16, pvid, untagged bool) {
	v := b.vlanLocked(vid)
	f := pvMember
	if untagged {
		f |= pvUntagged
	}
	if pvid {
		f |= pvPVID
		b.vlans.each(func(o uint16, ov *vlan) {
			if o != vid {
				ov.self.Store(ov.self.Load() &^ pvPVID)
			}
		})
	}
	was := v.self.Load()
	v.self.Store(f)
	if was&pvMember == 0 {
		b.fdb.mu.Lock()
		b.fdb.putLocked(fdbKey(b.MAC, vid), nil, fdbLocal|fdbStatic, false, b.d.clock.Now())
		b.fdb.mu.Unlock()
	}
	b.d.gen++
}

func (b *Bridge) selfVLANDelLocked(vid uint16) {
	v := b.vlans.get(vid)
	if v == nil || v.self.Load()&pvMember == 0 {
		return
	}
	v.self.Store(0)
	b.fdb.mu.Lock()
	if dst, _, ok := b.fdb.m.lookupLocked(fdbKey(b.MAC, vid)); ok && dst == nil {
		b.fdb.deleteLocked(fdbKey(b.MAC, vid))
	}
	b.fdb.mu.Unlock()
	b.d.gen++
}

// AddHostVLAN makes the bridge itself a member of vid (as `bridge vlan add
// dev BR vid V self`, tagged, not pvid) if it is not one already: l3 calls
// it when it creates a VLAN interface on the bridge. Idempotent.
func (b *Bridge) AddHostVLAN(vid uint16) error {
	if vid == 0 || vid > wire.MaxVID {
		return errVID(vid)
	}
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	if v := b.vlans.get(vid); v != nil && v.self.Load()&pvMember != 0 {
		return nil
	}
	b.selfVLANAddLocked(vid, false, false)
	return nil
}

// DelHostVLAN removes the bridge's own membership in vid.
func (b *Bridge) DelHostVLAN(vid uint16) {
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	b.selfVLANDelLocked(vid)
}

// setPortLocked applies `bridge link set` changes.
func (b *Bridge) setPortLocked(p *Port, set, clear PortFlag, state *PortState, maxLearned *uint32) {
	c := p.ctl.Load()
	fl := ctlFlags(c)&^clear | set
	st := ctlState(c)
	if state != nil {
		st = *state
	}
	p.ctl.Store(makeCtl(st, fl))
	if maxLearned != nil {
		p.maxLearned.Store(*maxLearned)
	}
	b.rebuildMcLocked(&b.vlan0)
	p.vlans.each(func(vid uint16, pv *PortVLAN) {
		if pv.Member() {
			b.rebuildMcLocked(pv.vlan.Load())
		}
	})
	b.recalcSuppressLocked()
	b.d.gen++
}

func (b *Bridge) recalcSuppressLocked() {
	any := false
	for _, p := range b.members {
		if ctlHas(p.ctl.Load(), FlagNeighSuppress) {
			any = true
		}
	}
	b.anySuppress.Store(any)
}

// Age deletes expired dynamic entries; it returns how many and the time
// until the next may expire.
func (b *Bridge) Age() (n int, next int64) {
	return b.fdb.age(b.d.clock.Now(), b.cfg.Load().ageing)
}

// FlushFDB deletes entries of port p (nil: all ports) in vid (0: all
// VLANs); static and local entries too if all is set. It returns how many.
func (b *Bridge) FlushFDB(p *Port, vid uint16, all bool) int {
	b.fdb.mu.Lock()
	defer b.fdb.mu.Unlock()
	return b.fdb.flushLocked(func(e fdbView) bool {
		if !all && e.flags&fdbStatic != 0 {
			return false
		}
		if vid != 0 && keyVID(e.key) != vid {
			return false
		}
		if p != nil && (e.dst == nil || e.dst.port != p) {
			return false
		}
		return all || e.dst != nil
	})
}
