package l2

// Ingress: the per-frame path of a bridge (Linux br_handle_frame_finish).
//
// Flow: count rx -> parse Ethernet/802.1Q -> reject invalid source -> STP
// state -> classify the VLAN (tag, or the cached pvid for untagged and
// priority-tagged frames) -> learn the source -> learning state stops here ->
// destination:
//   unicast:   FDB hit -> local entry: host; else forward to {port, pv}
//              FDB miss -> flood to members with `flood`
//   broadcast: neighbour suppression (ARP) -> host + flood to `bcast_flood`
//   multicast: link-local 01:80:c2:00:00:0X dropped (except STP's 00) ->
//              early filter (unwanted groups dropped before any fan-out) ->
//              wanted group: its mdb ports (+ host if it joined)
//              unknown group: flood to `mcast_flood` members
// Every frame that reaches no port and not the host is counted as a drop
// with its reason. Lock-free: atomics and immutable snapshots only.

import "github.com/netfwd/netfwd/wire"

// Verdict is the outcome for one input frame.
type Verdict struct {
	Drop DropReason // non-zero: the frame went nowhere (counted)
	// Host: deliver to the host (l3) in VLAN VID; Untagged says whether
	// Linux would hand it to the bridge device itself (true) or to a VLAN
	// device VID on top of it (false).
	Host      bool
	Untagged  bool
	VID       uint16
	L3        int // offset of the L3 header in the frame
	EtherType uint16
	Copies    int  // frames queued for ports (now)
	Deferred  bool // a large flood was queued; its copies are made at Flush
}

// ReceiveBatch processes frames received on in; frames for the host are
// appended to tx.Host. Frames must stay valid until tx.Flush.
func (b *Bridge) ReceiveBatch(tx *Tx, in *Port, frames [][]byte) {
	var v Verdict
	for i, f := range frames {
		b.receive(tx, in, f, int32(i), &v)
		if v.Host {
			tx.Host = append(tx.Host, HostFrame{Bridge: b, Port: in, VID: v.VID,
				Untagged: v.Untagged, Frame: f, L3: v.L3, EtherType: v.EtherType, Index: i})
		}
	}
}

// Receive processes one frame received on in, outside any batch: the
// frames made of it have origin -1. The frame must stay valid until
// tx.Flush; if the verdict says Host, the caller hands it to l3.
func (b *Bridge) Receive(tx *Tx, in *Port, frame []byte) Verdict {
	var v Verdict
	b.receive(tx, in, frame, -1, &v)
	return v
}

// receive is Receive writing the verdict through res, which the hot paths
// fill in place: a Verdict copied by value through three calls per frame
// cost more than the FDB lookup. origin is the frame's index in its batch.
func (b *Bridge) receive(tx *Tx, in *Port, frame []byte, origin int32, res *Verdict) {
	*res = Verdict{}
	tx.countRx(in, len(frame))
	if in.bridge.Load() != b {
		*res = tx.drop(in, DropNotBridged)
		return
	}
	pf, ok := parseFrame(frame)
	if !ok {
		*res = tx.drop(in, DropMalformed)
		return
	}
	eth := wire.Ethernet(frame)
	if !eth.SrcIsValid() {
		*res = tx.drop(in, DropInvalidSource)
		return
	}
	ctl := in.ctl.Load()
	st := ctlState(ctl)
	if st != StateForwarding && st != StateLearning {
		*res = tx.drop(in, DropPortState)
		return
	}
	cfg := b.cfg.Load()

	ig := ingress{in: in, ctl: ctl, origin: origin, fv: frameView{data: frame, tagged: pf.tagged}}
	fv := &ig.fv
	var pv *PortVLAN
	var vid uint16
	if cfg.vlanFiltering {
		if pf.tagged && pf.tci&wire.VIDMask != 0 {
			vid = pf.tci & wire.VIDMask
			pv = in.vlans.get(vid)
			if pv == nil || pv.flags.Load()&pvMember == 0 {
				*res = tx.drop(in, DropVLANIngress)
				return
			}
			fv.tci, fv.asIsOK = pf.tci, true
		} else {
			// Untagged or priority-tagged: the cached pvid, no lookup.
			pv = in.pvid.Load()
			if pv == nil {
				*res = tx.drop(in, DropVLANIngress)
				return
			}
			vid = pv.VID
			fv.tci = vid | pf.tci&^wire.VIDMask // a priority tag keeps its PCP/DEI
		}
	} else {
		pv = &in.raw
		fv.raw = true
	}

	if ctl&uint32(FlagLearning) != 0 && cfg.ageing != 0 {
		if b.fdb.learn(fdbKeyAt(frame[6:], vid), pv, tx.Now()) == learnBusy {
			tx.delta.learnSkipped++
		}
	}
	if st == StateLearning {
		*res = tx.drop(in, DropLearningState)
		return
	}

	v := pv.vlan.Load()
	ig.v = v
	res.VID, res.L3, res.EtherType = vid, pf.l3, pf.etype
	if fv.raw && pf.tagged {
		// Without vlan_filtering the host sees the frame's own tag: Linux
		// hands it to the VLAN device of that VID on top of the bridge.
		res.VID = pf.tci & wire.VIDMask
	}
	if !eth.DstIsMulticast() {
		if dpv, flags, ok := b.fdb.lookup(fdbKeyAt(frame, vid)); ok {
			if flags&fdbLocal != 0 || dpv == nil {
				b.toHost(tx, in, v, res)
				return
			}
			b.forward(tx, &ig, dpv, res)
			return
		}
		ig.scope = floodScope{need: FlagFlood}
		b.floodVerdict(tx, &ig, cfg, res)
		return
	}
	if eth.DstIsBroadcast() { // always passes the multicast filter
		ig.scope = floodScope{need: FlagBcastFlood, host: v.self.Load()&pvMember != 0}
		if pf.etype == wire.EtherTypeARP && b.anySuppress.Load() && ctl&uint32(FlagNeighSuppress) == 0 {
			ig.scope.suppressed = b.suppressARP(tx, pv, vid, frame, pf.l3, origin)
		}
		b.floodVerdict(tx, &ig, cfg, res)
		return
	}
	// Multicast.
	if eth.DstIsLinkLocalControl() {
		*res = tx.drop(in, DropLinkLocal)
		return
	}
	mc := v.mc.Load()
	if mc == nil {
		ig.scope = floodScope{need: FlagMcastFlood}
		b.floodVerdict(tx, &ig, cfg, res)
		return
	}
	if cfg.mcastPrefilter && !mc.passAll && !mc.maybe(frame) {
		*res = tx.drop(in, DropMcastFiltered) // before any fan-out work
		return
	}
	if g := mc.group(frame); g != nil {
		b.groupForward(tx, &ig, g, res)
		return
	}
	ig.scope = floodScope{need: FlagMcastFlood}
	b.floodVerdict(tx, &ig, cfg, res)
}

// toHost delivers a frame for a local address to the host, if the bridge
// is a member of the VLAN.
func (b *Bridge) toHost(tx *Tx, in *Port, v *vlan, res *Verdict) {
	s := v.self.Load()
	if s&pvMember == 0 {
		*res = tx.drop(in, DropHostNotMember)
		return
	}
	tx.delta.hostDelivered++
	res.Host, res.Untagged = true, hostUntagged(s, res.VID)
}

// hostUntagged: whether Linux would deliver the frame to the bridge device
// itself (true) or to VLAN device vid on top of it. With vlan_filtering it
// follows the bridge's own membership flags; without, the frame's tag.
func hostUntagged(self uint32, vid uint16) bool {
	if self&pvRaw != 0 {
		return vid == 0
	}
	return self&pvUntagged != 0
}

// forward sends a known unicast frame to its FDB destination (Linux
// should_deliver: not back out the ingress port, egress port forwarding and
// member of the VLAN, isolation).
func (b *Bridge) forward(tx *Tx, ig *ingress, dpv *PortVLAN, res *Verdict) {
	p := dpv.port
	if p == ig.in {
		*res = tx.drop(ig.in, DropSamePort)
		return
	}
	c := p.ctl.Load()
	if !ctlForwarding(c) || dpv.flags.Load()&pvMember == 0 || p.bridge.Load() != b ||
		(ig.ctl&c)&uint32(FlagIsolated) != 0 {
		*res = tx.drop(ig.in, DropEgressFiltered)
		return
	}
	tx.emit(dpv, &ig.fv, ig.origin)
	res.Copies = 1
}

// floodVerdict floods and turns the outcome into a verdict (host delivery
// included).
func (b *Bridge) floodVerdict(tx *Tx, ig *ingress, cfg *bridgeCfg, res *Verdict) {
	n, deferred, full := b.flood(tx, ig, cfg)
	res.Copies, res.Deferred = n, deferred
	if ig.scope.host {
		tx.delta.hostDelivered++
		res.Host, res.Untagged = true, hostUntagged(ig.v.self.Load(), res.VID)
		if full {
			tx.delta.drops[DropFloodQueueFull]++ // the host copy still went through
		}
		return
	}
	if full {
		*res = tx.drop(ig.in, DropFloodQueueFull)
		return
	}
	if n == 0 && !deferred {
		*res = tx.drop(ig.in, DropNoFloodTarget)
	}
}
