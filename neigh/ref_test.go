package neigh

// The slow reference model of the neighbour table: a plain map of entries,
// timers as plain fields scanned on every tick, the gc list as a sequence
// number per entry, packets as plain copies. It is written from the kernel's
// neighbour.c/arp.c logic directly, without the fast table's index, heap,
// gc-list links, forced-gc shortcut, packed words or touched stack, so the
// randomized differential test can check all of those against it.

import (
	"sort"

	"github.com/netfwd/netfwd/wire"
)

type refNeigh struct {
	ifindex       uint32
	ip            wire.Addr4
	ifMAC         wire.MAC
	state         State
	mac           wire.MAC
	confirmed     int64
	updated, used int64
	probes        int
	hasTimer      bool
	timerAt       int64
	queue         []refQueued
	queueBytes    int
	onGC          bool
	gcOrder       uint64
	touched       bool
	sent          int64  // last traffic (datapath: the coarse clock; writer: its clock); minTime never
	pendOrder     uint64 // when the queue last became non-empty (global budget order)
}

type refQueued struct {
	pkt  []byte // the IPv4 packet
	mark uint8
}

type refCounters struct {
	lookups, hits, misses, staleTouches        uint64
	allocs, destroys, resolveFailed            uint64
	queued, queueDrops, queuePurged            uint64
	periodicGCRuns, forcedGCRuns               uint64
	gcEvictions, forcedGCEvictions, tableFulls uint64
	refusedInvalid, txBcast, txUcast           uint64
	rxReq, rxRep, txRep, notLocal, dad         uint64
	learned, updates, unsolicited              uint64
	notLearned, budgetDrops, repliesLimited    uint64
	drops                                      [numARPDrops]uint64
}

type refTable struct {
	p                                      Params
	base, retrans, delay, stale, lock      int64
	rng                                    *Table // only for its random reachable times (same seed)
	reachable, lastRand, lastFlush, nextGC int64
	m                                      map[uint64]*refNeigh
	gcSeq, pendSeq                         uint64
	coarse                                 int64 // the last Tick's clock
	replyWindow                            int64 // the (one) worker's budget of replies to senders not learned
	repliesLeft                            int
	c                                      refCounters
}

type refOut struct {
	requests    []ARPRequest
	transmit    []Frame
	unreachable []Frame
	dropped     []Frame
	events      []Event
}

func newRefTable(p Params, seed uint64, now int64) *refTable {
	// The model draws its random reachable times from a table of its own
	// seeded alike (only its rng is used).
	rt, err := NewTable(Config{Params: p, Seed: seed}, now)
	if err != nil {
		panic(err)
	}
	r := &refTable{p: p, base: int64(p.BaseReachableTime), retrans: int64(p.RetransTime),
		delay: int64(p.DelayFirstProbeTime), stale: int64(p.GCStaleTime), lock: int64(p.Locktime),
		rng: rt, m: map[uint64]*refNeigh{}}
	r.reachable = rt.reachableTime
	r.lastFlush = now
	r.coarse = now
	r.lastRand = now + r.reachable*20
	r.nextGC = now + r.reachable
	return r
}

func (r *refTable) nextReachable() int64 {
	return r.rng.randReachableTimeLocked()
}

func refKey(ifindex uint32, ip wire.Addr4) uint64 { return uint64(ifindex)<<32 | uint64(ip) }

func (r *refTable) gcCount() int {
	c := 0
	for _, n := range r.m {
		if n.onGC {
			c++
		}
	}
	return c
}

// set changes state and address and records the owner's events.
func (r *refTable) set(n *refNeigh, s State, mac wire.MAC, out *refOut) {
	if n.state == s && n.mac == mac {
		return
	}
	old, oldMAC := n.state, n.mac
	n.state, n.mac = s, mac
	ev := Event{IfIndex: n.ifindex, IP: n.ip, LLAddr: mac, State: s}
	switch {
	case !old.Valid() && s.Valid():
		ev.Kind = EventResolved
	case old.Valid() && s.Valid() && oldMAC != mac:
		ev.Kind = EventLLAddrChanged
	case s == NUDFailed && old != NUDFailed:
		ev.Kind = EventFailed
	default:
		return
	}
	out.events = append(out.events, ev)
}

func (r *refTable) arm(n *refNeigh, when int64) {
	if n.used < n.confirmed {
		n.used = n.confirmed
	}
	n.hasTimer, n.timerAt = true, when
}

func (r *refTable) remove(n *refNeigh, reason RemoveReason, out *refOut) {
	delete(r.m, refKey(n.ifindex, n.ip))
	r.c.queuePurged += uint64(len(n.queue))
	for _, q := range n.queue {
		out.dropped = append(out.dropped, Frame{IfIndex: n.ifindex, IP: n.ip, Mark: q.mark})
	}
	r.c.destroys++
	out.events = append(out.events, Event{Kind: EventRemoved, IfIndex: n.ifindex, IP: n.ip, LLAddr: n.mac, Reason: reason})
}

func (r *refTable) create(ifindex uint32, ip wire.Addr4, ifMAC wire.MAC, exempt bool, now int64, out *refOut) *refNeigh {
	if !exempt {
		entries := r.gcCount()
		if entries >= r.p.GCThresh3 || (entries >= r.p.GCThresh2 && now > r.lastFlush+5e9) {
			if r.forcedGC(now, out) == 0 && entries >= r.p.GCThresh3 {
				r.c.tableFulls++
				return nil
			}
		}
	}
	n := &refNeigh{ifindex: ifindex, ip: ip, ifMAC: ifMAC, updated: now, used: now, confirmed: now - 2*r.base, sent: minTime}
	if !exempt {
		r.gcSeq++
		n.onGC, n.gcOrder = true, r.gcSeq
	}
	r.m[refKey(ifindex, ip)] = n
	r.c.allocs++
	return n
}

func (r *refTable) gcList() []*refNeigh {
	var l []*refNeigh
	for _, n := range r.m {
		if n.onGC {
			l = append(l, n)
		}
	}
	sort.Slice(l, func(i, j int) bool { return l[i].gcOrder < l[j].gcOrder })
	return l
}

// forcedGC: FAILED and NOARP entries go, INCOMPLETE ones unanswered for
// retrans_time, and those not updated for 5 s that carried no traffic within
// gc_stale_time; the ones that never carried traffic first.
func (r *refTable) forcedGC(now int64, out *refOut) int {
	r.c.forcedGCRuns++
	maxClean := r.gcCount() + 1 - r.p.GCThresh2
	removable := func(n *refNeigh) bool {
		switch {
		case n.state == NUDFailed || n.state == NUDNoARP || n.updated > now:
			return true
		case n.state == NUDIncomplete:
			return n.updated < now-r.retrans
		case n.updated >= now-5e9:
			return false
		}
		return !n.state.Valid() || n.sent < now-r.stale
	}
	shrunk := 0
	for pass := 0; pass < 2 && shrunk < maxClean; pass++ {
		for _, n := range r.gcList() {
			if removable(n) && (pass == 1 || n.sent == minTime) {
				r.remove(n, RemovedForcedGC, out)
				r.c.forcedGCEvictions++
				shrunk++
				if shrunk >= maxClean {
					break
				}
			}
		}
	}
	r.lastFlush = now
	return shrunk
}

func (r *refTable) fixGCList(n *refNeigh) {
	perm := n.state == NUDPermanent
	if perm && n.onGC {
		n.onGC = false
	} else if !perm && !n.onGC {
		r.gcSeq++
		n.onGC, n.gcOrder = true, r.gcSeq
	}
}

func (r *refTable) drain(now int64) {
	for _, n := range r.m {
		if n.touched {
			n.touched = false
			if n.state == NUDStale {
				r.staleToDelay(n, now, &refOut{})
			}
		}
	}
}

func (r *refTable) staleToDelay(n *refNeigh, now int64, out *refOut) {
	n.used = now
	n.hasTimer = false
	r.set(n, NUDDelay, n.mac, out)
	n.updated = now
	r.arm(n, now+r.delay)
}

func (r *refTable) header(n *refNeigh) []byte {
	h := make([]byte, 14)
	copy(h[0:6], n.mac[:])
	copy(h[6:12], n.ifMAC[:])
	h[12], h[13] = 0x08, 0x00
	return h
}

func (r *refTable) output(ifindex uint32, ip wire.Addr4) ([]byte, bool) {
	r.c.lookups++
	n := r.m[refKey(ifindex, ip)]
	if n == nil || !n.state.Valid() {
		r.c.misses++
		return nil, false
	}
	r.c.hits++
	n.sent = r.coarse
	if n.state == NUDStale && !n.touched {
		n.touched = true
		r.c.staleTouches++
	}
	return r.header(n), true
}

func (r *refTable) probe(n *refNeigh, out *refOut) {
	req := ARPRequest{IfIndex: n.ifindex, Target: n.ip, SrcMAC: n.ifMAC, DstMAC: wire.BroadcastMAC}
	if len(n.queue) > 0 {
		req.SrcHint = packetSource(n.queue[len(n.queue)-1].pkt)
	}
	if n.probes < r.p.UcastProbes {
		req.DstMAC, req.Unicast = n.mac, true
		r.c.txUcast++
	} else {
		r.c.txBcast++
	}
	out.requests = append(out.requests, req)
	n.probes++
}

func (r *refTable) enqueue(n *refNeigh, pkt []byte, mark uint8, out *refOut) {
	need := 14 + len(pkt) + 64
	for len(n.queue) > 0 && n.queueBytes+need > r.p.UnresQlenBytes {
		r.popQueued(n, out)
		r.c.queueDrops++
	}
	if limit := r.p.UnresQlenBytesTotal; limit > 0 {
		for {
			total := 0
			var victim *refNeigh
			for _, m := range r.m {
				total += m.queueBytes
				if len(m.queue) > 0 && (victim == nil || m.pendOrder < victim.pendOrder) {
					victim = m
				}
			}
			if total+need <= limit {
				break
			}
			if victim == nil { // the packet alone is over the budget
				out.dropped = append(out.dropped, Frame{IfIndex: n.ifindex, IP: n.ip, Mark: mark})
				r.c.budgetDrops++
				return
			}
			r.popQueued(victim, out)
			r.c.budgetDrops++
			if len(victim.queue) > 0 {
				r.pendSeq++
				victim.pendOrder = r.pendSeq
			}
		}
	}
	if len(n.queue) == 0 {
		r.pendSeq++
		n.pendOrder = r.pendSeq
	}
	n.queue = append(n.queue, refQueued{append([]byte(nil), pkt...), mark})
	n.queueBytes += need
	r.c.queued++
}

// popQueued drops n's oldest queued packet.
func (r *refTable) popQueued(n *refNeigh, out *refOut) {
	n.queueBytes -= 14 + len(n.queue[0].pkt) + 64
	out.dropped = append(out.dropped, Frame{IfIndex: n.ifindex, IP: n.ip, Mark: n.queue[0].mark})
	n.queue = n.queue[1:]
}

func (r *refTable) resolve(ifindex uint32, ip wire.Addr4, ifMAC wire.MAC, pkt []byte, mark uint8, now int64, out *refOut) (Verdict, []byte) {
	r.drain(now)
	if ifindex == 0 || ip>>24 == 0 || ip>>28 == 0xe || ip == 0xffffffff {
		r.c.refusedInvalid++
		return Refused, nil
	}
	n := r.m[refKey(ifindex, ip)]
	if n == nil {
		if n = r.create(ifindex, ip, ifMAC, false, now, out); n == nil {
			return Refused, nil
		}
	}
	n.used = now
	switch n.state {
	case NUDReachable, NUDPermanent, NUDNoARP, NUDDelay, NUDProbe:
		n.sent = now
		return Send, r.header(n)
	case NUDStale:
		r.staleToDelay(n, now, out)
		n.sent = now
		return Send, r.header(n)
	case NUDIncomplete:
		r.enqueue(n, pkt, mark, out)
		return Queued, nil
	}
	// NONE or FAILED: start resolving.
	n.probes = r.p.UcastProbes
	r.set(n, NUDIncomplete, n.mac, out)
	n.updated = now
	r.arm(n, now+max(r.retrans, 1e7))
	r.enqueue(n, pkt, mark, out)
	r.probe(n, out)
	return Queued, nil
}

func (r *refTable) invalidate(n *refNeigh, now int64, out *refOut) {
	r.c.resolveFailed++
	n.updated = now
	for _, q := range n.queue {
		out.unreachable = append(out.unreachable, Frame{IfIndex: n.ifindex, IP: n.ip, Data: q.pkt, Mark: q.mark})
	}
	n.queue, n.queueBytes = nil, 0
}

// update is neigh_update.
func (r *refTable) update(n *refNeigh, lladdr *wire.MAC, s State, override, admin bool, now int64, out *refOut) error {
	old := n.state
	if !admin && (old == NUDNoARP || old == NUDPermanent) {
		return errNeighNotAdmin
	}
	if !s.Valid() {
		n.hasTimer = false
		r.set(n, s, n.mac, out)
		if (old == NUDIncomplete || old == NUDProbe) && s == NUDFailed {
			r.invalidate(n, now, out)
		}
		r.fixGCList(n)
		return nil
	}
	mac := n.mac
	changed := false
	if lladdr != nil {
		mac = *lladdr
		changed = !old.Valid() || mac != n.mac
	} else if !old.Valid() {
		return ErrNoLLAddr
	}
	if s == NUDReachable || s == NUDPermanent || s == NUDNoARP {
		n.confirmed = now
	}
	if old.Valid() {
		if changed && !override {
			return nil
		}
		if !changed && s == NUDStale && !admin {
			s = old
		}
	}
	if s != old || changed {
		n.updated = now
	}
	if s != old {
		n.hasTimer = false
		if s == NUDProbe {
			n.probes = 0
		}
		switch s {
		case NUDReachable:
			r.arm(n, now+r.reachable)
		case NUDIncomplete, NUDDelay, NUDProbe:
			r.arm(n, now)
		}
	}
	r.set(n, s, mac, out)
	if changed && !(s == NUDReachable || s == NUDPermanent || s == NUDNoARP) {
		n.confirmed = now - 2*r.base
	}
	if s != old {
		if !old.Valid() && len(n.queue) > 0 {
			if n.state == NUDStale {
				r.staleToDelay(n, now, out)
			}
			n.sent = now
			for _, q := range n.queue {
				out.transmit = append(out.transmit, Frame{IfIndex: n.ifindex, IP: n.ip, Data: append(r.header(n), q.pkt...), Mark: q.mark})
			}
			n.queue, n.queueBytes = nil, 0
		}
		r.fixGCList(n)
	}
	return nil
}

func (r *refTable) timer(n *refNeigh, now int64, out *refOut) {
	n.hasTimer = false
	next := now + 1e9
	retrans := max(r.retrans, 1e7)
	switch n.state {
	case NUDReachable:
		if now <= n.confirmed+r.reachable {
			next = n.confirmed + r.reachable
		} else if now <= n.used+r.delay {
			r.set(n, NUDDelay, n.mac, out)
			n.updated = now
			next = now + r.delay
		} else {
			r.set(n, NUDStale, n.mac, out)
			n.updated = now
		}
	case NUDDelay:
		if now <= n.confirmed+r.delay {
			r.set(n, NUDReachable, n.mac, out)
			n.updated = now
			next = n.confirmed + r.reachable
		} else {
			r.set(n, NUDProbe, n.mac, out)
			n.updated = now
			n.probes = 0
			next = now + retrans
		}
	case NUDIncomplete, NUDProbe:
		next = now + retrans
	default:
		return
	}
	maxProbes := r.p.UcastProbes + r.p.McastProbes
	if n.state == NUDProbe {
		maxProbes = r.p.UcastProbes + r.p.McastReprobes
	}
	if (n.state == NUDIncomplete || n.state == NUDProbe) && n.probes >= maxProbes {
		r.set(n, NUDFailed, n.mac, out)
		r.invalidate(n, now, out)
		return
	}
	switch n.state {
	case NUDIncomplete, NUDReachable, NUDDelay, NUDProbe:
		if next < now+1e7 {
			next = now + 1e7
		}
		r.arm(n, next)
	}
	if n.state == NUDIncomplete || n.state == NUDProbe {
		r.probe(n, out)
	}
}

func (r *refTable) tick(now int64, out *refOut) {
	r.drain(now)
	r.coarse = max(r.coarse, now)
	var due []*refNeigh
	for _, n := range r.m {
		if n.hasTimer && n.timerAt <= now {
			due = append(due, n)
		}
	}
	for _, n := range due {
		r.timer(n, now, out)
	}
	if now >= r.nextGC {
		r.c.periodicGCRuns++
		if now > r.lastRand+300e9 {
			r.lastRand = now
			r.reachable = r.nextReachable()
		}
		r.nextGC = now + r.base/2
		if len(r.m) >= r.p.GCThresh1 {
			for _, n := range r.m {
				if n.state == NUDPermanent || n.state&nudInTimer != 0 {
					continue
				}
				if n.used < n.confirmed && n.confirmed <= now {
					n.used = n.confirmed
				}
				if n.state == NUDFailed || now < n.used || now >= n.used+r.stale {
					r.remove(n, RemovedGC, out)
					r.c.gcEvictions++
				}
			}
		}
	}
}

type refAddrs map[wire.Addr4]bool

func (a refAddrs) IsLocalAddr(_ uint32, ip wire.Addr4) bool { return a[ip] }

func (r *refTable) inputARP(ifindex uint32, ifMAC wire.MAC, local refAddrs, frame []byte, now int64, out *refOut) ([]byte, ARPDrop) {
	drop := func(d ARPDrop) ([]byte, ARPDrop) { r.c.drops[d]++; return nil, d }
	if len(frame) < 42 {
		return drop(ARPTruncated)
	}
	if frame[12] != 0x08 || frame[13] != 0x06 {
		return drop(ARPNotARP)
	}
	a := frame[14:42]
	hrd, pro, op := int(a[0])<<8|int(a[1]), int(a[2])<<8|int(a[3]), int(a[6])<<8|int(a[7])
	switch {
	case hrd != 1 && hrd != 6:
		return drop(ARPBadHardware)
	case pro != 0x0800:
		return drop(ARPBadProtocol)
	case a[4] != 6 || a[5] != 4:
		return drop(ARPBadAddrLen)
	case op != 1 && op != 2:
		return drop(ARPBadOpcode)
	}
	if op == 1 {
		r.c.rxReq++
	} else {
		r.c.rxRep++
	}
	var dst, sha, tha wire.MAC
	copy(dst[:], frame[0:6])
	copy(sha[:], a[8:14])
	copy(tha[:], a[18:24])
	sip := wire.Addr4(uint32(a[14])<<24 | uint32(a[15])<<16 | uint32(a[16])<<8 | uint32(a[17]))
	tip := wire.Addr4(uint32(a[24])<<24 | uint32(a[25])<<16 | uint32(a[26])<<8 | uint32(a[27]))
	toUs := dst == ifMAC
	if !toUs && dst[0]&1 == 0 {
		return drop(ARPOtherHost)
	}
	if tip>>28 == 0xe || tip>>24 == 127 {
		return drop(ARPBadTarget)
	}
	if sha[0]&1 == 1 || sha == (wire.MAC{}) {
		return drop(ARPBadSenderMAC)
	}
	reply := func(spa wire.Addr4, tha wire.MAC, tpa wire.Addr4) []byte {
		b := make([]byte, 42)
		copy(b[0:6], tha[:])
		copy(b[6:12], ifMAC[:])
		b[12], b[13] = 0x08, 0x06
		copy(b[14:], []byte{0, 1, 8, 0, 6, 4, 0, 2})
		copy(b[22:28], ifMAC[:])
		b[28], b[29], b[30], b[31] = byte(spa>>24), byte(spa>>16), byte(spa>>8), byte(spa)
		copy(b[32:38], tha[:])
		b[38], b[39], b[40], b[41] = byte(tpa>>24), byte(tpa>>16), byte(tpa>>8), byte(tpa)
		r.c.txRep++
		return b
	}
	if sip == 0 {
		if op == 1 && local[tip] {
			r.c.dad++
			return reply(tip, sha, 0), ARPOK
		}
		return nil, ARPOK
	}
	if sip>>24 == 0 || sip>>24 == 127 || sip>>28 == 0xe || sip == 0xffffffff {
		return drop(ARPMartianSender)
	}
	if local[sip] {
		return drop(ARPSenderIsLocal)
	}
	r.drain(now)
	if op == 1 && local[tip] {
		n := r.m[refKey(ifindex, sip)]
		switch {
		case n != nil:
		case r.gcCount() >= r.p.GCThresh2: // under pressure: answer, learn nothing
			r.c.notLearned++
		default:
			if n = r.create(ifindex, sip, ifMAC, false, now, out); n != nil {
				r.c.learned++
			}
		}
		if n != nil {
			r.update(n, &sha, NUDStale, true, false, now, out)
		} else {
			if w := now / int64(100e6); w != r.replyWindow {
				r.replyWindow, r.repliesLeft = w, 100
			}
			if r.repliesLeft == 0 {
				r.c.repliesLimited++
				return nil, ARPOK
			}
			r.repliesLeft--
		}
		return reply(tip, sha, sip), ARPOK
	}
	if op == 1 {
		r.c.notLocal++
	}
	n := r.m[refKey(ifindex, sip)]
	if n == nil {
		r.c.unsolicited++
		return nil, ARPOK
	}
	garp := sip == tip && (op == 1 || tha == sha)
	override := now > n.updated+r.lock || garp
	s := NUDStale
	if op == 2 && toUs {
		s = NUDReachable
	}
	if r.update(n, &sha, s, override, false, now, out) == nil {
		r.c.updates++
	}
	return nil, ARPOK
}

func (r *refTable) modify(s Spec, create, excl bool, now int64, out *refOut) error {
	if err := s.check(); err != nil {
		return err
	}
	r.drain(now)
	n := r.m[refKey(s.IfIndex, s.IP)]
	switch {
	case n != nil && excl:
		return ErrExists
	case n == nil && !create:
		return ErrNotFound
	case n == nil:
		if !s.HasLLAddr {
			return ErrNoLLAddr
		}
		if n = r.create(s.IfIndex, s.IP, s.IfMAC, s.State == NUDPermanent, now, out); n == nil {
			return ErrTableFull
		}
	}
	var ll *wire.MAC
	if s.HasLLAddr {
		ll = &s.LLAddr
	}
	return r.update(n, ll, s.State, true, true, now, out)
}

func (r *refTable) del(ifindex uint32, ip wire.Addr4, now int64, out *refOut) error {
	r.drain(now)
	n := r.m[refKey(ifindex, ip)]
	if n == nil {
		return ErrNotFound
	}
	r.update(n, nil, NUDFailed, true, true, now, out)
	r.remove(n, RemovedAdmin, out)
	return nil
}

func (r *refTable) flush(ifindex uint32, keepPerm bool, now int64, out *refOut) int {
	r.drain(now)
	c := 0
	for _, n := range r.m {
		if n.ifindex == ifindex && !(keepPerm && n.state == NUDPermanent) {
			r.remove(n, RemovedFlush, out)
			c++
		}
	}
	return c
}

func (r *refTable) dump(now int64) []Info {
	r.drain(now)
	var l []Info
	for _, n := range r.m {
		l = append(l, Info{IfIndex: n.ifindex, IP: n.ip, LLAddr: n.mac, HasLLAddr: n.state.Valid(),
			State: n.state, Probes: n.probes, Queued: len(n.queue)})
	}
	sort.Slice(l, func(i, j int) bool {
		if l[i].IfIndex != l[j].IfIndex {
			return l[i].IfIndex < l[j].IfIndex
		}
		return l[i].IP < l[j].IP
	})
	return l
}
