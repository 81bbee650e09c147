package neigh

// The slow path for destinations without a usable neighbour (the kernel's
// neigh_resolve_output -> __neigh_event_send).
//
// Flow: Resolve takes the writer lock, finds or creates the entry (subject
// to gc_thresh3 and the forced gc), then by state:
//   - usable (a racing resolution, or STALE): the caller sends now with the
//     header Resolve returns (STALE moves to DELAY);
//   - NONE or FAILED: INCOMPLETE with an immediate broadcast request (the
//     request is appended to out), retried every retrans_time;
//   - INCOMPLETE: the packet waits.
// A waiting packet is copied (the caller reuses its buffer) into a buffer
// with room for the Ethernet header; the queue keeps at most
// unres_qlen_bytes, dropping its oldest packets (unres_discards). All
// queues together keep at most UnresQlenBytesTotal: over it, the oldest
// packet of the entry at the head of the pending list is dropped
// (QueueBudgetDrops) and that entry moves to the tail, so a flood to many
// unresolved hosts cannot grow memory, and a newly needed next hop still
// gets its packet queued. Buffers of dropped packets are recycled.
//
// Locking: Table.mu.

import "github.com/netfwd/netfwd/wire"

// Verdict is what Resolve did with a packet.
type Verdict uint8

const (
	// Queued: the packet waits for resolution; it will come back in a
	// Actions' Transmit or Unreachable list.
	Queued Verdict = iota + 1
	// Send: the neighbour is usable; send the packet now with Header.
	Send
	// Refused: no entry could be created (table full or the address
	// cannot be a neighbour); drop the packet (counted).
	Refused
)

func (v Verdict) String() string {
	switch v {
	case Queued:
		return "queued"
	case Send:
		return "send"
	case Refused:
		return "refused"
	}
	return "verdict(?)"
}

// Resolution is Resolve's answer.
type Resolution struct {
	Verdict Verdict
	Header  [14]byte // for Send
}

// Resolve handles a packet for next hop (ifindex, ip) that Output could not
// send. pkt is the IPv4 packet without L2 header; ifMAC is the egress
// interface's MAC (the source of the entry's adjacency). A queued packet
// comes back in out with mark, whatever its fate (see Actions).
func (w *Worker) Resolve(ifindex uint32, ip wire.Addr4, ifMAC wire.MAC, pkt []byte, mark uint8, now int64, out *Actions) Resolution {
	t := w.t
	t.lockAt(now)
	defer t.mu.Unlock()
	if ifindex == 0 || !resolvable(ip) {
		t.c.refusedInvalid++
		return Resolution{Verdict: Refused}
	}
	n := t.index.Get(entryKey(ifindex, ip))
	if n == nil {
		if n = t.createLocked(ifindex, ip, ifMAC, false, now, out); n == nil {
			return Resolution{Verdict: Refused}
		}
	}
	return t.eventSendLocked(n, pkt, mark, now, out)
}

// resolvable: addresses that can be resolved (not 0.0.0.0/8,
// multicast or limited broadcast).
func resolvable(ip wire.Addr4) bool {
	return !ip.IsZeroNet() && !ip.IsMulticast() && !ip.IsLimitedBroadcast()
}

// eventSendLocked is __neigh_event_send with the packet.
func (t *Table) eventSendLocked(n *entry, pkt []byte, mark uint8, now int64, out *Actions) Resolution {
	n.used = now
	s := n.state()
	if s&(nudConnected|NUDDelay|NUDProbe) == 0 {
		switch {
		case s&(NUDStale|NUDIncomplete) == 0: // NONE, FAILED
			if t.p.McastProbes == 0 {
				t.setStateLocked(n, NUDFailed, out)
				n.updated = now
				return Resolution{Verdict: Refused}
			}
			n.probes = t.p.UcastProbes
			t.delTimerLocked(n)
			t.setStateLocked(n, NUDIncomplete, out)
			n.updated = now
			// The forced gc may remove it once unanswered for retrans_time.
			t.forcedGCIdleUntil = min(t.forcedGCIdleUntil, now+t.p.retrans)
			t.addTimerLocked(n, now+max(t.p.retrans, timerMin))
			t.enqueueLocked(n, pkt, mark, out)
			t.probeLocked(n, out) // immediate: the queue's tail is this packet
			return Resolution{Verdict: Queued}
		case s == NUDStale:
			t.staleToDelayLocked(n, now, out)
		}
	}
	if n.state() == NUDIncomplete {
		t.enqueueLocked(n, pkt, mark, out)
		return Resolution{Verdict: Queued}
	}
	r := Resolution{Verdict: Send}
	writeHeader(r.Header[:], n.word.Load(), n.hdrTail)
	n.sent.Store(now)
	return r
}

// enqueueLocked copies pkt onto n's queue within unres_qlen_bytes and the
// global budget, dropping the oldest packets to make room.
func (t *Table) enqueueLocked(n *entry, pkt []byte, mark uint8, out *Actions) {
	need := wire.EthernetHeaderLen + len(pkt)
	charge := need + queuedPacketHeader
	for n.queue.n > 0 && n.queue.bytes+charge > t.p.UnresQlenBytes {
		p, _ := t.queuePopLocked(n)
		t.c.queueDrops++
		if out != nil {
			out.dropped(n, p)
		}
		t.recycleLocked(p.buf)
	}
	if limit := t.p.UnresQlenBytesTotal; limit > 0 {
		for t.queuedBytes+charge > limit && t.lists[pendList].head != nil {
			v := t.lists[pendList].head
			p, _ := t.queuePopLocked(v)
			t.c.queueBudgetDrops++
			if out != nil {
				out.dropped(v, p)
			}
			t.recycleLocked(p.buf)
			if t.listUnlinkLocked(pendList, v) { // round robin: its next packet waits its turn
				t.listPushLocked(pendList, v)
			}
		}
		if t.queuedBytes+charge > limit { // larger than the whole budget
			t.c.queueBudgetDrops++
			if out != nil {
				out.dropped(n, queuedPacket{mark: mark})
			}
			return
		}
	}
	b := t.bufLocked(need)
	copy(b[wire.EthernetHeaderLen:], pkt)
	t.queuePushLocked(n, queuedPacket{buf: b, mark: mark})
	t.c.queued++
}
