package l2

// The early multicast filter and static mdb entries.
//
// Per VLAN an immutable mcFilter, rebuilt under Domain.mu whenever
// something it summarises changes (membership, port flags or state, mdb
// entries, groups the host joined) and published with one atomic store:
//   - passAll: some forwarding member has mcast_flood, so unknown groups
//     are flooded and nothing can be dropped early;
//   - bits: a 256-bit hash of the wanted groups (mdb groups of the VLAN and
//     groups the host joined), like macvlan's mc_filter;
//   - groups: the exact set, with the member port-VLANs of each group.
// Ingress checks bits before anything else, so a frame for a group nobody
// wants costs one load and one bit test, with no flood iteration and no
// deferral. Broadcast never consults the filter.
//
// Semantics (Linux with static mdb entries and snooping): a frame to a group
// with an mdb entry goes to that group's ports (and to the host if the host
// joined it); a frame to any other group is flooded to mcast_flood members.
// The host receives only groups it joined (Linux delivers all unknown
// multicast to the bridge device and lets the IP stack discard it; the
// result for l3 is the same, without the work).

import (
	"fmt"
	"sort"

	"github.com/netfwd/netfwd/wire"
)

type mcFilter struct {
	passAll bool
	bits    [4]uint64
	groups  map[wire.MAC]*mcGroup
}

type mcGroup struct {
	members []*PortVLAN
	host    bool
}

// mdbGroup is one configured group: the ports that want it.
type mdbGroup struct {
	group wire.MAC
	vid   uint16
	ports []*Port
}

func (g *mdbGroup) delPort(p *Port) bool {
	for i, q := range g.ports {
		if q == p {
			g.ports = append(g.ports[:i:i], g.ports[i+1:]...)
			return true
		}
	}
	return false
}

func mcBit(d []byte) uint32 {
	h := (uint32(d[2])<<24 | uint32(d[3])<<16 | uint32(d[4])<<8 | uint32(d[5])) ^ uint32(d[0])<<8 ^ uint32(d[1])
	return (h * 0x9e3779b1) >> 24
}

// maybe reports whether the group at d[0:6] may be wanted.
func (f *mcFilter) maybe(d []byte) bool {
	b := mcBit(d)
	return f.bits[b>>6]&(1<<(b&63)) != 0
}

// group returns the wanted group at d[0:6], or nil.
func (f *mcFilter) group(d []byte) *mcGroup {
	if len(f.groups) == 0 {
		return nil
	}
	return f.groups[wire.MAC(d[0:6])]
}

// rebuildMcLocked recomputes v's filter. Guarded by Domain.mu.
func (b *Bridge) rebuildMcLocked(v *vlan) {
	f := &mcFilter{}
	v.members(func(pv *PortVLAN) {
		c := pv.port.ctl.Load()
		if ctlForwarding(c) && ctlHas(c, FlagMcastFlood) {
			f.passAll = true
		}
	})
	add := func(g wire.MAC) *mcGroup {
		if f.groups == nil {
			f.groups = map[wire.MAC]*mcGroup{}
		}
		mg := f.groups[g]
		if mg == nil {
			mg = &mcGroup{}
			f.groups[g] = mg
			bit := mcBit(g[:])
			f.bits[bit>>6] |= 1 << (bit & 63)
		}
		return mg
	}
	for _, g := range b.mdb {
		if g.vid != v.vid {
			continue
		}
		mg := add(g.group)
		for _, p := range g.ports {
			var pv *PortVLAN
			if v.vid == 0 {
				pv = &p.raw
			} else {
				pv = p.VLAN(v.vid)
			}
			if pv != nil {
				mg.members = append(mg.members, pv)
			}
		}
	}
	for k := range b.hostGroups {
		if keyVID(k) == v.vid {
			add(keyMAC(k)).host = true
		}
	}
	v.mc.Store(f)
}

// groupForward sends a frame for a wanted group to its member ports and, if
// the host joined the group, to the host.
func (b *Bridge) groupForward(tx *Tx, ig *ingress, g *mcGroup, res *Verdict) {
	ig.scope = floodScope{} // the group's ports, whatever their flood flags
	for _, pv := range g.members {
		res.Copies += tx.floodOne(pv, ig)
	}
	if g.host {
		if s := ig.v.self.Load(); s&pvMember != 0 {
			tx.delta.hostDelivered++
			res.Host, res.Untagged = true, hostUntagged(s, res.VID)
			return
		}
	}
	if res.Copies == 0 {
		*res = tx.drop(ig.in, DropNoFloodTarget)
	}
}

func (b *Bridge) mcVLANLocked(vid uint16) *vlan {
	if vid == 0 {
		return &b.vlan0
	}
	return b.vlanLocked(vid)
}

func checkGroup(g wire.MAC) error {
	if !g.IsMulticast() || g.IsBroadcast() {
		return fmt.Errorf("%s is not a multicast group address", g)
	}
	return nil
}

// addMDBLocked adds port p to group g in vid (`bridge mdb add dev BR port P
// grp G [vid V]`, static).
func (b *Bridge) addMDBLocked(p *Port, g wire.MAC, vid uint16) {
	k := fdbKey(g, vid)
	mg := b.mdb[k]
	if mg == nil {
		mg = &mdbGroup{group: g, vid: vid}
		b.mdb[k] = mg
	}
	for _, q := range mg.ports {
		if q == p {
			return
		}
	}
	mg.ports = append(mg.ports, p)
	b.rebuildMcLocked(b.mcVLANLocked(vid))
	b.d.gen++
}

func (b *Bridge) delMDBLocked(p *Port, g wire.MAC, vid uint16) bool {
	k := fdbKey(g, vid)
	mg := b.mdb[k]
	if mg == nil || !mg.delPort(p) {
		return false
	}
	if len(mg.ports) == 0 {
		delete(b.mdb, k)
	}
	b.rebuildMcLocked(b.mcVLANLocked(vid))
	b.d.gen++
	return true
}

// JoinGroup makes the host a listener of group g in vid (l3's joined
// groups, e.g. 224.0.0.1's 01:00:5e:00:00:01). vid 0 on a bridge without
// vlan_filtering.
func (b *Bridge) JoinGroup(vid uint16, g wire.MAC) error {
	if err := checkGroup(g); err != nil {
		return err
	}
	if vid > wire.MaxVID {
		return errVID(vid)
	}
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	b.hostGroups[fdbKey(g, vid)] = true
	b.rebuildMcLocked(b.mcVLANLocked(vid))
	return nil
}

// LeaveGroup undoes JoinGroup.
func (b *Bridge) LeaveGroup(vid uint16, g wire.MAC) {
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	delete(b.hostGroups, fdbKey(g, vid))
	if vid <= wire.MaxVID {
		b.rebuildMcLocked(b.mcVLANLocked(vid))
	}
}

// MDBEntry is one static group membership.
type MDBEntry struct {
	Port  string
	Group wire.MAC
	VID   uint16
}

// MDB lists the static group memberships sorted by VID, group, port.
func (b *Bridge) MDB() []MDBEntry {
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	var out []MDBEntry
	for _, g := range b.mdb {
		for _, p := range g.ports {
			out = append(out, MDBEntry{Port: p.Name, Group: g.group, VID: g.vid})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, c := out[i], out[j]
		if a.VID != c.VID {
			return a.VID < c.VID
		}
		if a.Group != c.Group {
			return string(a.Group[:]) < string(c.Group[:])
		}
		return a.Port < c.Port
	})
	return out
}
