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

// ingress is the frame being flooded or forwarded, as the steps after
// classification need it: the port it came in on (nil for frames the host
// sends) and that port's control word at arrival (state and flags), its
// VLAN, the frame with its tag (the copies are made from it), and which
// members a flood of it reaches.
type ingress struct {
	in     *Port
	ctl    uint32
	origin int32 // the frame's index in the caller's batch (-1: none), for Tx origins
	v      *vlan
	fv     frameView
	scope  floodScope
}

// floodScope says which members a flood reaches, and whether the host
// takes a copy too.
type floodScope struct {
	need       PortFlag // the member flag this kind of flood requires (0: none, mdb members)
	suppressed bool     // skip neigh_suppress members: the bridge answered the ARP request
	host       bool     // deliver to the host as well (broadcast in a VLAN it is member of)
}

// deferredFlood is a flood waiting for the end of the batch.
type deferredFlood struct {
	b  *Bridge
	ig ingress // ig.origin: the input frame the copies are made of
}

// flood returns the number of copies queued, whether the flood was
// deferred, and whether it was dropped because the deferral queue is full.
func (b *Bridge) flood(tx *Tx, ig *ingress, cfg *bridgeCfg) (n int, deferred, full bool) {
	if cfg.deferThreshold >= 0 && int(ig.v.count.Load()) > cfg.deferThreshold {
		if len(tx.deferred) >= tx.opts.DeferLen {
			return 0, false, true
		}
		d := deferredFlood{b: b, ig: *ig}
		d.ig.fv.untag, d.ig.fv.tag = nil, nil // copies are made when it runs
		tx.deferred = append(tx.deferred, d)
		tx.delta.floodDeferred++
		return 0, true, false
	}
	tx.delta.floodInline++
	return tx.floodMembers(ig), false, false
}

// floodMembers emits to every eligible member of the frame's VLAN: from the
// array when there is one, else from the list.
func (tx *Tx) floodMembers(ig *ingress) int {
	n := 0
	if arr := ig.v.array.Load(); arr != nil {
		for _, pv := range *arr {
			n += tx.floodOne(pv, ig)
		}
		return n
	}
	for m := ig.v.head.Load(); m != nil; m = m.next.Load() {
		n += tx.floodOne(m.pv, ig)
	}
	return n
}

// floodOne emits to one member if it is eligible (ig.scope); it returns 1
// if it did.
func (tx *Tx) floodOne(pv *PortVLAN, ig *ingress) int {
	p := pv.port
	if p == ig.in {
		return 0
	}
	c := p.ctl.Load()
	sc := &ig.scope
	if !ctlForwarding(c) || (sc.need != 0 && c&uint32(sc.need) == 0) || (ig.ctl&c)&uint32(FlagIsolated) != 0 ||
		(sc.suppressed && c&uint32(FlagNeighSuppress) != 0) {
		return 0
	}
	tx.emit(pv, &ig.fv, ig.origin)
	return 1
}

// runDeferred performs the deferred floods of this batch (from Flush).
func (tx *Tx) runDeferred() {
	for i := range tx.deferred {
		d := &tx.deferred[i]
		if tx.floodMembers(&d.ig) == 0 {
			tx.delta.drops[DropNoFloodTarget]++
		}
		*d = deferredFlood{}
	}
	tx.deferred = tx.deferred[:0]
}
