package l2

// The bridge's VLAN memberships as `bridge vlan show` lists them: one
// consistent snapshot (taken under Domain.mu) of its ports, in creation
// order, then the bridge itself. Rendering (iproute2 text, -j JSON, -c
// ranges) is internal/show's; the FDB's listing is FDB.Entries.

// VLANMembership is one device's VLANs.
type VLANMembership struct {
	Dev   string // a port, or the bridge itself
	VLANs []VLANFlags
}

// VLANFlags is one VLAN of a device.
type VLANFlags struct {
	VID      uint16
	PVID     bool // untagged frames in are classified into it
	Untagged bool // frames leave without a tag
}

// VLANMemberships lists the VLANs of the bridge's ports and of the bridge
// itself; devices without VLANs are left out.
func (b *Bridge) VLANMemberships() []VLANMembership {
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	var out []VLANMembership
	add := func(name string, each func(fn func(vid uint16, flags uint32))) {
		m := VLANMembership{Dev: name}
		each(func(vid uint16, f uint32) {
			m.VLANs = append(m.VLANs, VLANFlags{VID: vid, PVID: f&pvPVID != 0, Untagged: f&pvUntagged != 0})
		})
		if len(m.VLANs) > 0 {
			out = append(out, m)
		}
	}
	members := append([]*Port(nil), b.members...)
	sortPortsByID(members)
	for _, p := range members {
		add(p.Name, func(fn func(uint16, uint32)) {
			p.vlans.each(func(vid uint16, pv *PortVLAN) {
				if f := pv.flags.Load(); f&pvMember != 0 {
					fn(vid, f)
				}
			})
		})
	}
	add(b.Name, func(fn func(uint16, uint32)) {
		b.vlans.each(func(vid uint16, v *vlan) {
			if f := v.self.Load(); f&pvMember != 0 {
				fn(vid, f)
			}
		})
	})
	return out
}

func sortPortsByID(ps []*Port) {
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && ps[j].ID < ps[j-1].ID; j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}
