package l2

// Host output (Linux br_dev_xmit): a frame the router sends through the
// bridge device into one of its VLANs. The destination decides like
// forwarding does, with the host as the source: known unicast goes to its
// port if that port is forwarding and in the VLAN, local addresses are not
// sent anywhere, unknown unicast/broadcast/multicast are flooded to the
// members with the matching flag (groups with mdb entries to their ports).
// The frame is untagged; egress tagging comes from each destination
// port-VLAN. Nothing is learned. Same buffer rule as Receive.

import (
	"fmt"

	"github.com/netfwd/netfwd/wire"
)

// Output sends an untagged frame from the host into VLAN vid (ignored on a
// bridge without vlan_filtering), made of input frame origin (-1: none, see
// Tx.Send). It returns the number of copies queued.
func (b *Bridge) Output(tx *Tx, vid uint16, frame []byte, origin int32) int {
	if len(frame) < wire.EthernetHeaderLen {
		return 0
	}
	cfg := b.cfg.Load()
	var v *vlan
	if cfg.vlanFiltering {
		if vid == 0 || vid > wire.MaxVID {
			return 0
		}
		v = b.vlans.get(vid)
	} else {
		v, vid = &b.vlan0, 0
	}
	if v == nil {
		return 0
	}
	ig := ingress{v: v, origin: origin, fv: frameView{data: frame, raw: !cfg.vlanFiltering, tci: vid}}
	eth := wire.Ethernet(frame)
	if !eth.DstIsMulticast() {
		dpv, flags, ok := b.fdb.lookup(fdbKeyAt(frame, vid))
		if !ok {
			ig.scope = floodScope{need: FlagFlood}
			return tx.floodMembers(&ig)
		}
		if flags&fdbLocal != 0 || dpv == nil {
			return 0
		}
		c := dpv.port.ctl.Load()
		if !ctlForwarding(c) || dpv.flags.Load()&pvMember == 0 || dpv.port.bridge.Load() != b {
			return 0
		}
		tx.emit(dpv, &ig.fv, ig.origin)
		return 1
	}
	if eth.DstIsBroadcast() {
		ig.scope = floodScope{need: FlagBcastFlood}
		return tx.floodMembers(&ig)
	}
	if mc := v.mc.Load(); mc != nil {
		if g := mc.group(frame); g != nil {
			n := 0
			for _, pv := range g.members {
				n += tx.floodOne(pv, &ig)
			}
			return n
		}
	}
	ig.scope = floodScope{need: FlagMcastFlood}
	return tx.floodMembers(&ig)
}

// SendTagged queues frame, which carries an 802.1Q tag, for d with d's
// tagging: untagged port-VLANs get it without the tag, tagged ones with
// the tag's VID rewritten to d's VID (PCP kept), raw destinations as is
// (origin as in Send).
func (tx *Tx) SendTagged(d FwdDst, frame []byte, origin int32) {
	pf, ok := parseFrame(frame)
	if !ok || !pf.tagged {
		tx.Send(d, frame, origin)
		return
	}
	if d.PV == nil {
		tx.enqueue(d.Port, frame, origin)
		return
	}
	tci := pf.tci&^wire.VIDMask | d.PV.VID
	fv := frameView{data: frame, tagged: true, tci: tci, asIsOK: tci == pf.tci}
	tx.emit(d.PV, &fv, origin)
}

// AddLocalAddress makes mac a local address of the bridge in vid (0 on a
// bridge without vlan_filtering): unicast frames to it are delivered to the
// host, as `bridge fdb add MAC dev BR self [vlan V]`. l3 calls it for a
// VLAN interface whose MAC differs from the bridge's.
func (b *Bridge) AddLocalAddress(mac wire.MAC, vid uint16) error {
	if !mac.IsValidUnicast() {
		return fmt.Errorf("invalid unicast address %s", mac)
	}
	if vid > wire.MaxVID {
		return errVID(vid)
	}
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	b.fdb.mu.Lock()
	defer b.fdb.mu.Unlock()
	b.fdb.putLocked(fdbKey(mac, vid), nil, fdbLocal|fdbStatic, true, b.d.clock.Now())
	return nil
}

// DelLocalAddress removes a local address of the bridge device.
func (b *Bridge) DelLocalAddress(mac wire.MAC, vid uint16) {
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	b.fdb.mu.Lock()
	defer b.fdb.mu.Unlock()
	if dst, _, ok := b.fdb.m.lookupLocked(fdbKey(mac, vid)); ok && dst == nil {
		b.fdb.deleteLocked(fdbKey(mac, vid))
	}
}
