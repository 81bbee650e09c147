package l2

// Flooding (Linux br_flood) over the VLAN member sets of vlan.go.
//
// Flow: the VLAN's member set (array above 8 members, else the list) ->
// for each member port-VLAN: skip the ingress port, ports not forwarding,
// ports without the flag for this kind of flood (flood / mcast_flood /
// bcast_flood), isolated-to-isolated, and neigh_suppress ports when the
// bridge answered an ARP request -> emit with the member's tagging. No VLAN
// is looked up per egress port: the member IS the port-VLAN.
//
// Large floods (more members than the bridge's flood_defer threshold) are
// not done inline: they go to the worker's bounded deferral queue and run
// when the Tx is flushed, after the batch's small work (small fan-outs
// inline, large ones bounded). A full queue drops the flood and
// counts it. Deferred floods reference the input buffer, which is valid
// until the flush completes, so nothing is copied to defer.

// deferredFlood is a flood waiting for the end of the batch.
type deferredFlood struct {
	b          *Bridge
	in         *Port
	inCtl      uint32
	v          *vlan
	need       PortFlag
	suppressed bool
	fv         frameView
	origin     int32
}

// flood returns the number of copies queued, whether the flood was
// deferred, and whether it was dropped because the deferral queue is full.
func (b *Bridge) flood(tx *Tx, in *Port, inCtl uint32, v *vlan, fv *frameView, need PortFlag,
	suppressed bool, cfg *bridgeCfg) (n int, deferred, full bool) {
	if cfg.deferThreshold >= 0 && int(v.count.Load()) > cfg.deferThreshold {
		if len(tx.deferred) >= tx.opts.DeferLen {
			return 0, false, true
		}
		tx.deferred = append(tx.deferred, deferredFlood{b: b, in: in, inCtl: inCtl, v: v,
			need: need, suppressed: suppressed, fv: frameView{data: fv.data, raw: fv.raw,
				tagged: fv.tagged, tci: fv.tci, asIsOK: fv.asIsOK}, origin: tx.origin})
		tx.delta.floodDeferred++
		return 0, true, false
	}
	tx.delta.floodInline++
	return tx.floodMembers(v, in, inCtl, need, suppressed, fv), false, false
}

// floodMembers emits to every eligible member of v: from the array when
// there is one, else from the list.
func (tx *Tx) floodMembers(v *vlan, in *Port, inCtl uint32, need PortFlag, suppressed bool, fv *frameView) int {
	n := 0
	if arr := v.array.Load(); arr != nil {
		for _, pv := range *arr {
			n += tx.floodOne(pv, in, inCtl, need, suppressed, fv)
		}
		return n
	}
	for m := v.head.Load(); m != nil; m = m.next.Load() {
		n += tx.floodOne(m.pv, in, inCtl, need, suppressed, fv)
	}
	return n
}

// floodOne emits to one member if it is eligible (need 0: no flag
// required, for mdb group members); it returns 1 if it did.
func (tx *Tx) floodOne(pv *PortVLAN, in *Port, inCtl uint32, need PortFlag, suppressed bool, fv *frameView) int {
	p := pv.port
	if p == in {
		return 0
	}
	c := p.ctl.Load()
	if !ctlForwarding(c) || (need != 0 && c&uint32(need) == 0) || (inCtl&c)&uint32(FlagIsolated) != 0 ||
		(suppressed && c&uint32(FlagNeighSuppress) != 0) {
		return 0
	}
	tx.emit(pv, fv)
	return 1
}

// runDeferred performs the deferred floods of this batch (from Flush).
func (tx *Tx) runDeferred() {
	for i := range tx.deferred {
		d := &tx.deferred[i]
		tx.origin = d.origin
		n := tx.floodMembers(d.v, d.in, d.inCtl, d.need, d.suppressed, &d.fv)
		if n == 0 {
			tx.delta.drops[DropNoFloodTarget]++
		}
		*d = deferredFlood{}
	}
	tx.deferred = tx.deferred[:0]
}
