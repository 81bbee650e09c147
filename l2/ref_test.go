package l2

// The reference bridge: the slow, obviously correct model the fast bridge
// is tested against. It iterates all ports, keeps each port's VLANs in a
// map, its FDB in a plain map, and recomputes everything per frame from
// those maps; it shares no code with the datapath except the frame builders
// and the public constants.

import (
	"encoding/binary"
	"sort"

	"github.com/netfwd/netfwd/wire"
)

type refVLAN struct{ pvid, untagged bool }

type refPort struct {
	name       string
	mac        wire.MAC
	member     bool
	state      PortState
	flags      PortFlag
	vlans      map[uint16]refVLAN
	pvid       uint16
	maxLearned int
	nLearned   int
}

type refEntry struct {
	port                                 *refPort // nil: bridge
	local, static, sticky, user, learned bool
	updated                              int64
}

type refDeferred struct {
	in         *refPort
	vid        uint16
	need       PortFlag
	suppressed bool
	frame      []byte
	tci        uint16
	inTagged   bool
	inTCI      uint16
}

type refBridge struct {
	mac            wire.MAC
	filtering      bool
	ageing         int64
	maxLearned     int
	nLearned       int
	deferThreshold int
	deferLen       int
	prefilter      bool
	ports          []*refPort
	fdb            map[uint64]*refEntry
	self           map[uint16]refVLAN // bridge's own VLANs
	mdb            map[uint64][]*refPort
	hostGroups     map[uint64]bool
	neigh          map[uint64]struct {
		mac wire.MAC
		own bool
	}

	now      func() int64 // the domain clock (configured entries' timestamps)
	out      map[string][][]byte
	deferred []refDeferred
	drops    map[DropReason]int
}

func newRefBridge(m wire.MAC, filtering bool) *refBridge {
	r := &refBridge{mac: m, filtering: filtering, ageing: int64(defaultAgeingTime),
		deferThreshold: DefaultFloodDeferThreshold, deferLen: 256, prefilter: true,
		fdb: map[uint64]*refEntry{}, self: map[uint16]refVLAN{1: {pvid: true, untagged: true}},
		mdb: map[uint64][]*refPort{}, hostGroups: map[uint64]bool{}, out: map[string][][]byte{},
		drops: map[DropReason]int{}}
	r.neigh = map[uint64]struct {
		mac wire.MAC
		own bool
	}{}
	r.fdb[fdbKey(m, 0)] = &refEntry{local: true, static: true}
	r.fdb[fdbKey(m, 1)] = &refEntry{local: true, static: true}
	return r
}

func (r *refBridge) port(name string) *refPort {
	for _, p := range r.ports {
		if p.name == name {
			return p
		}
	}
	return nil
}

func (r *refBridge) addPort(name string, m wire.MAC) {
	p := &refPort{name: name, mac: m, member: true, state: StateForwarding, flags: defaultPortFlags,
		vlans: map[uint16]refVLAN{1: {pvid: true, untagged: true}}, pvid: 1}
	r.ports = append(r.ports, p)
	if !m.IsZero() {
		r.fdb[fdbKey(m, 0)] = &refEntry{port: p, local: true, static: true}
		r.fdb[fdbKey(m, 1)] = &refEntry{port: p, local: true, static: true}
	}
}

func (r *refBridge) vlanAdd(p *refPort, vid uint16, pvid, untagged bool) {
	_, had := p.vlans[vid]
	p.vlans[vid] = refVLAN{pvid: pvid, untagged: untagged}
	if pvid {
		if old, ok := p.vlans[p.pvid]; ok && p.pvid != vid {
			old.pvid = false
			p.vlans[p.pvid] = old
		}
		p.pvid = vid
	} else if p.pvid == vid {
		p.pvid = 0
	}
	if !had && !p.mac.IsZero() {
		r.delEntry(fdbKey(p.mac, vid))
		r.fdb[fdbKey(p.mac, vid)] = &refEntry{port: p, local: true, static: true}
	}
}

func (r *refBridge) vlanDel(p *refPort, vid uint16) {
	delete(p.vlans, vid)
	if p.pvid == vid {
		p.pvid = 0
	}
	for k, e := range r.fdb {
		if e.port == p && keyVID(k) == vid && (!e.static || (e.local && keyMAC(k) == p.mac)) {
			r.delEntry(k)
		}
	}
}

func (r *refBridge) delEntry(k uint64) {
	e := r.fdb[k]
	if e == nil {
		return
	}
	if e.learned {
		r.nLearned--
		e.port.nLearned--
	}
	delete(r.fdb, k)
}

func (r *refBridge) memberOf(p *refPort, vid uint16) bool {
	if !r.filtering {
		return true
	}
	_, ok := p.vlans[vid]
	return ok
}

func (r *refBridge) selfMember(vid uint16) (bool, bool) {
	if !r.filtering {
		return true, true // untagged-ness comes from the frame's tag, see hostRes
	}
	s, ok := r.self[vid]
	return ok, s.untagged
}

func (r *refBridge) drop(reason DropReason) Verdict {
	r.drops[reason]++
	return Verdict{Drop: reason}
}

// receive mirrors Bridge.Receive.
func (r *refBridge) receive(in *refPort, f []byte, now int64) Verdict {
	if in == nil || !in.member {
		return r.drop(DropNotBridged)
	}
	if len(f) < 14 {
		return r.drop(DropMalformed)
	}
	isTagged := binary.BigEndian.Uint16(f[12:14]) == 0x8100
	if isTagged && len(f) < 18 {
		return r.drop(DropMalformed)
	}
	var dst, src wire.MAC
	copy(dst[:], f[0:6])
	copy(src[:], f[6:12])
	if !src.IsValidUnicast() {
		return r.drop(DropInvalidSource)
	}
	if in.state != StateForwarding && in.state != StateLearning {
		return r.drop(DropPortState)
	}
	var inTCI uint16
	l3, etype := 14, binary.BigEndian.Uint16(f[12:14])
	if isTagged {
		inTCI = binary.BigEndian.Uint16(f[14:16])
		l3, etype = 18, binary.BigEndian.Uint16(f[16:18])
	}
	vid := uint16(0)
	tci := uint16(0)
	if r.filtering {
		if isTagged && inTCI&0xfff != 0 {
			vid = inTCI & 0xfff
			if _, ok := in.vlans[vid]; !ok {
				return r.drop(DropVLANIngress)
			}
			tci = inTCI
		} else {
			if in.pvid == 0 {
				return r.drop(DropVLANIngress)
			}
			vid = in.pvid
			tci = vid | inTCI&0xf000
		}
	}
	// Learning.
	if in.flags&FlagLearning != 0 && r.ageing != 0 {
		k := fdbKey(src, vid)
		if e := r.fdb[k]; e != nil {
			if !e.local {
				e.updated = now
				if e.port != in && !e.sticky {
					ok := true
					if e.learned {
						if in.maxLearned != 0 && in.nLearned >= in.maxLearned {
							ok = false
						} else {
							in.nLearned++
							e.port.nLearned--
						}
					}
					if ok {
						e.port = in
					}
				}
			}
		} else {
			lim := r.maxLearned
			if lim == 0 {
				lim = DefaultFDBMaxLearned
			}
			if r.nLearned < lim && r.nLearned < hardMaxLearned &&
				(in.maxLearned == 0 || in.nLearned < in.maxLearned) {
				r.fdb[k] = &refEntry{port: in, learned: true, updated: now}
				r.nLearned++
				in.nLearned++
			}
		}
	}
	if in.state == StateLearning {
		return r.drop(DropLearningState)
	}
	res := Verdict{VID: vid, L3: l3, EtherType: etype}
	if !r.filtering && isTagged {
		res.VID = inTCI & 0xfff
	}
	emit := func(p *refPort, frame []byte) {
		var o []byte
		switch {
		case !r.filtering:
			o = append([]byte(nil), frame...)
		case p.vlans[vid].untagged:
			if isTagged {
				o = append(append([]byte(nil), frame[:12]...), frame[16:]...)
			} else {
				o = append([]byte(nil), frame...)
			}
		default:
			o = append([]byte(nil), frame[:12]...)
			o = binary.BigEndian.AppendUint16(o, 0x8100)
			o = binary.BigEndian.AppendUint16(o, tci)
			if isTagged {
				o = append(o, frame[16:]...)
			} else {
				o = append(o, frame[12:]...)
			}
		}
		r.out[p.name] = append(r.out[p.name], o)
	}
	host := func(res Verdict) Verdict {
		m, u := r.selfMember(vid)
		if !m {
			return r.drop(DropHostNotMember)
		}
		res.Host, res.Untagged = true, u && (r.filtering || res.VID == 0)
		return res
	}
	if !dst.IsMulticast() {
		if e := r.fdb[fdbKey(dst, vid)]; e != nil {
			if e.local || e.port == nil {
				return host(res)
			}
			p := e.port
			if p == in {
				return r.drop(DropSamePort)
			}
			if p.state != StateForwarding || !r.memberOf(p, vid) || !p.member ||
				(in.flags&p.flags&FlagIsolated != 0) {
				return r.drop(DropEgressFiltered)
			}
			emit(p, f)
			res.Copies = 1
			return res
		}
		return r.flood(in, f, vid, FlagFlood, false, res, false, emit)
	}
	if dst.IsBroadcast() {
		suppressed := false
		anySup := false
		for _, p := range r.ports {
			anySup = anySup || p.flags&FlagNeighSuppress != 0
		}
		if etype == wire.EtherTypeARP && anySup && in.flags&FlagNeighSuppress == 0 {
			suppressed = r.suppress(in, vid, f[l3:])
		}
		m, _ := r.selfMember(vid)
		return r.flood(in, f, vid, FlagBcastFlood, suppressed, res, m, emit)
	}
	if dst[0] == 1 && dst[1] == 0x80 && dst[2] == 0xc2 && dst[3] == 0 && dst[4] == 0 && dst[5] >= 1 && dst[5] <= 15 {
		return r.drop(DropLinkLocal)
	}
	passAll := false
	for _, p := range r.ports {
		if r.memberOf(p, vid) && p.state == StateForwarding && p.flags&FlagMcastFlood != 0 {
			passAll = true
		}
	}
	gk := fdbKey(dst, vid)
	gports, known := r.mdb[gk]
	known = known || r.hostGroups[gk]
	if r.prefilter && !passAll && !known && !r.bloomHit(dst, vid) {
		// The early filter is a 256-bit hash: a group colliding with a
		// wanted one passes it and is dropped later (no flood target).
		return r.drop(DropMcastFiltered)
	}
	if known {
		for _, p := range gports {
			if p != in && p.member && r.memberOf(p, vid) && p.state == StateForwarding && in.flags&p.flags&FlagIsolated == 0 {
				emit(p, f)
				res.Copies++
			}
		}
		if r.hostGroups[gk] {
			if m, u := r.selfMember(vid); m {
				res.Host, res.Untagged = true, u && (r.filtering || res.VID == 0)
				return res
			}
		}
		if res.Copies == 0 {
			return r.drop(DropNoFloodTarget)
		}
		return res
	}
	return r.flood(in, f, vid, FlagMcastFlood, false, res, false, emit)
}

func (r *refBridge) bloomHit(g wire.MAC, vid uint16) bool {
	bit := mcBit(g[:])
	for k, ps := range r.mdb {
		if keyVID(k) == vid && len(ps) > 0 && mcBit(macBytes(keyMAC(k))) == bit {
			return true
		}
	}
	for k := range r.hostGroups {
		if keyVID(k) == vid && mcBit(macBytes(keyMAC(k))) == bit {
			return true
		}
	}
	return false
}

func macBytes(m wire.MAC) []byte { return m[:] }

func (r *refBridge) members(vid uint16) []*refPort {
	var m []*refPort
	for _, p := range r.ports {
		if p.member && r.memberOf(p, vid) {
			m = append(m, p)
		}
	}
	return m
}

func (r *refBridge) floodTo(in *refPort, vid uint16, need PortFlag, suppressed bool, f []byte, emit func(*refPort, []byte)) int {
	n := 0
	for _, p := range r.members(vid) {
		if p == in || p.state != StateForwarding || p.flags&need == 0 ||
			(in.flags&p.flags&FlagIsolated != 0) || (suppressed && p.flags&FlagNeighSuppress != 0) {
			continue
		}
		emit(p, f)
		n++
	}
	return n
}

func (r *refBridge) flood(in *refPort, f []byte, vid uint16, need PortFlag, suppressed bool, res Verdict, host bool, emit func(*refPort, []byte)) Verdict {
	full := false
	if r.deferThreshold >= 0 && len(r.members(vid)) > r.deferThreshold {
		if len(r.deferred) >= r.deferLen {
			full = true
		} else {
			r.deferred = append(r.deferred, refDeferred{in: in, vid: vid, need: need, suppressed: suppressed, frame: f})
			res.Deferred = true
		}
	} else {
		res.Copies = r.floodTo(in, vid, need, suppressed, f, emit)
	}
	if host {
		_, u := r.selfMember(vid)
		res.Host, res.Untagged = true, u && (r.filtering || res.VID == 0)
		if full {
			r.drops[DropFloodQueueFull]++
		}
		return res
	}
	if full {
		return r.drop(DropFloodQueueFull)
	}
	if res.Copies == 0 && !res.Deferred {
		return r.drop(DropNoFloodTarget)
	}
	return res
}

// runDeferred is the reference's flush-time part: deferred floods re-run
// the emit with the frame's own tagging state.
func (r *refBridge) flush(now int64) map[string][][]byte {
	for _, d := range r.deferred {
		// Re-derive emission exactly like receive does (same frame, same vid).
		saved := r.out
		n := r.floodTo(d.in, d.vid, d.need, d.suppressed, d.frame, func(p *refPort, frame []byte) {
			r.emitLike(p, d.vid, frame, saved)
		})
		if n == 0 {
			r.drops[DropNoFloodTarget]++
		}
	}
	r.deferred = nil
	out := r.out
	r.out = map[string][][]byte{}
	return out
}

// emitLike is emit for deferred floods (tci recomputed from the frame as
// receive does).
func (r *refBridge) emitLike(p *refPort, vid uint16, f []byte, out map[string][][]byte) {
	isTagged := binary.BigEndian.Uint16(f[12:14]) == 0x8100
	var inTCI uint16
	if isTagged {
		inTCI = binary.BigEndian.Uint16(f[14:16])
	}
	tci := vid | inTCI&0xf000
	if isTagged && inTCI&0xfff != 0 {
		tci = inTCI
	}
	var o []byte
	switch {
	case !r.filtering:
		o = append([]byte(nil), f...)
	case p.vlans[vid].untagged:
		if isTagged {
			o = append(append([]byte(nil), f[:12]...), f[16:]...)
		} else {
			o = append([]byte(nil), f...)
		}
	default:
		o = append([]byte(nil), f[:12]...)
		o = binary.BigEndian.AppendUint16(o, 0x8100)
		o = binary.BigEndian.AppendUint16(o, tci)
		if isTagged {
			o = append(o, f[16:]...)
		} else {
			o = append(o, f[12:]...)
		}
	}
	out[p.name] = append(out[p.name], o)
}

// suppress mirrors the neighbour suppression decision; a proxy reply goes
// to r.out[in].
func (r *refBridge) suppress(in *refPort, vid uint16, a []byte) bool {
	if len(a) < 28 || binary.BigEndian.Uint16(a[0:2]) != 1 || binary.BigEndian.Uint16(a[2:4]) != 0x0800 || a[4] != 6 || a[5] != 4 {
		return false
	}
	op := binary.BigEndian.Uint16(a[6:8])
	sip := binary.BigEndian.Uint32(a[14:18])
	tip := binary.BigEndian.Uint32(a[24:28])
	if tip>>24 == 127 || tip>>28 == 0xe {
		return false
	}
	if op != 3 && op != 4 && (sip == 0 || sip == tip) {
		return true
	}
	if op != 1 {
		return false
	}
	n, ok := r.neigh[uint64(vid)<<32|uint64(tip)]
	if !ok {
		return false
	}
	if n.own {
		return true
	}
	e := r.fdb[fdbKey(n.mac, vid)]
	if e == nil || e.port == nil || e.port.flags&FlagNeighSuppress == 0 {
		return false
	}
	rep := make([]byte, 0, 46)
	rep = append(rep, a[8:14]...)
	rep = append(rep, n.mac[:]...)
	rep = binary.BigEndian.AppendUint16(rep, 0x0806)
	rep = append(rep, 0, 1, 8, 0, 6, 4, 0, 2)
	rep = append(rep, n.mac[:]...)
	rep = binary.BigEndian.AppendUint32(rep, tip)
	rep = append(rep, a[8:14]...)
	rep = binary.BigEndian.AppendUint32(rep, sip)
	if r.filtering && !in.vlans[vid].untagged {
		t := append([]byte(nil), rep[:12]...)
		t = binary.BigEndian.AppendUint16(t, 0x8100)
		t = binary.BigEndian.AppendUint16(t, vid)
		rep = append(t, rep[12:]...)
	}
	r.out[in.name] = append(r.out[in.name], rep)
	return true
}

func (r *refBridge) age(now int64) {
	for k, e := range r.fdb {
		if !e.static && e.updated+r.ageing <= now {
			r.delEntry(k)
		}
	}
}

// entries lists the FDB like FDB.Entries (port order by name index).
type refFDBLine struct {
	MAC                                  wire.MAC
	VID                                  uint16
	Port                                 string
	Local, Static, Sticky, User, Learned bool
}

func (r *refBridge) entries() []refFDBLine {
	var out []refFDBLine
	for k, e := range r.fdb {
		l := refFDBLine{MAC: keyMAC(k), VID: keyVID(k), Local: e.local, Static: e.static, Sticky: e.sticky, User: e.user, Learned: e.learned}
		if e.port != nil {
			l.Port = e.port.name
		}
		out = append(out, l)
	}
	sortFDBLines(out)
	return out
}

func sortFDBLines(out []refFDBLine) {
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Port != b.Port {
			return a.Port < b.Port
		}
		if a.VID != b.VID {
			return a.VID < b.VID
		}
		return string(a.MAC[:]) < string(b.MAC[:])
	})
}
