package l2

// Host output (Linux br_dev_xmit): a frame the router sends through the
// bridge device into one of its VLANs. The destination decides like
// forwarding does, with the host as the source: known unicast goes to its
// port if that port is forwarding and in the VLAN, local addresses are not
// sent anywhere, unknown unicast/broadcast/multicast are flooded to the
// members with the matching flag (groups with mdb entries to their ports).
// The frame is untagged; egress tagging comes from each destination
// port-VLAN. Nothing is learned. Same buffer rule as Receive.

// Output sends an untagged frame from the host into VLAN vid (ignored on a
// bridge without vlan_filtering). It returns the number of copies queued.
func (b *Bridge) Output(tx *Tx, vid uint16, frame []byte) int {
	if len(frame) < ethHeaderLen {
		return 0
	}
	cfg := b.cfg.Load()
	var v *vlan
	if cfg.vlanFiltering {
		if vid == 0 || vid > maxVID {
			return 0
		}
		v = b.vlans.get(vid)
	} else {
		v, vid = &b.vlan0, 0
	}
	if v == nil {
		return 0
	}
	fv := frameView{data: frame, raw: !cfg.vlanFiltering, tci: vid}
	if frame[0]&1 == 0 {
		e := b.fdb.lookup(fdbKeyAt(frame, vid))
		if e == nil {
			return tx.floodMembers(v, nil, 0, FlagFlood, false, &fv)
		}
		dpv := e.dst.Load()
		if e.flags.Load()&fdbLocal != 0 || dpv == nil {
			return 0
		}
		c := dpv.port.ctl.Load()
		if !ctlForwarding(c) || dpv.flags.Load()&pvMember == 0 || dpv.port.bridge.Load() != b {
			return 0
		}
		tx.emit(dpv, &fv)
		return 1
	}
	if frame[0]&frame[1]&frame[2]&frame[3]&frame[4]&frame[5] == 0xff {
		return tx.floodMembers(v, nil, 0, FlagBcastFlood, false, &fv)
	}
	if mc := v.mc.Load(); mc != nil {
		if g := mc.group(frame); g != nil {
			n := 0
			for _, pv := range g.members {
				n += tx.floodOne(pv, nil, 0, 0, false, &fv)
			}
			return n
		}
	}
	return tx.floodMembers(v, nil, 0, FlagMcastFlood, false, &fv)
}
