package neigh

// entry timers and the periodic gc, driven by Tick from one housekeeping
// goroutine (no timer or goroutine per entry).
//
// Flow: entries in INCOMPLETE, REACHABLE, DELAY and PROBE have a deadline in
// a min-heap. Tick(now) pops every entry whose deadline has passed and runs
// neigh_timer_handler's logic once for it with Tick's clock, as a late
// kernel timer would run, then the periodic gc when it is due (every
// base_reachable_time/2, and only with at least gc_thresh1 entries). Call
// Tick at least every few tens of milliseconds (NextDeadline says when the
// next timer is due); a timer never fires sooner than 10 ms after it was set.
//
// Locking: Table.mu for everything here.

import (
	"container/heap"
	"time"

	"github.com/netfwd/netfwd/wire"
)

// timerHeap orders entries by (timerAt, timerSeq).
type timerHeap []*entry

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].timerAt != h[j].timerAt {
		return h[i].timerAt < h[j].timerAt
	}
	return h[i].timerSeq < h[j].timerSeq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx = i
	h[j].heapIdx = j
}
func (h *timerHeap) Push(x any) {
	n := x.(*entry)
	n.heapIdx = len(*h)
	*h = append(*h, n)
}
func (h *timerHeap) Pop() any {
	old := *h
	n := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	n.heapIdx = -1
	return n
}

// addTimerLocked is neigh_add_timer: arm n's timer at when.
func (t *Table) addTimerLocked(n *entry, when int64) {
	if n.used < n.confirmed {
		n.used = n.confirmed
	}
	t.timerSeq++
	n.timerAt, n.timerSeq = when, t.timerSeq
	if n.heapIdx >= 0 {
		heap.Fix(&t.timers, n.heapIdx)
		return
	}
	heap.Push(&t.timers, n)
}

// delTimerLocked is neigh_del_timer.
func (t *Table) delTimerLocked(n *entry) {
	if n.heapIdx >= 0 {
		heap.Remove(&t.timers, n.heapIdx)
	}
}

// NextDeadline is the time of the next timer or periodic gc: the
// housekeeping goroutine may sleep until then (but wakes up for new work
// too: a Resolve arms a timer 1 s ahead).
func (t *Table) NextDeadline() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.nextGC
	if len(t.timers) > 0 && t.timers[0].timerAt < d {
		d = t.timers[0].timerAt
	}
	return d
}

// Tick runs the expired timers and the periodic gc at now (monotonic ns)
// and appends what to do to out.
func (t *Table) Tick(now int64, out *Actions) {
	t.lockAt(now)
	defer t.mu.Unlock()
	if now > t.coarseNow.Load() {
		t.coarseNow.Store(now)
	}
	// Re-armed timers are at least 10 ms ahead, so this loop runs each
	// expired entry once.
	for len(t.timers) > 0 && t.timers[0].timerAt <= now {
		n := heap.Pop(&t.timers).(*entry)
		t.timerLocked(n, now, out)
	}
	if now >= t.nextGC {
		t.periodicGCLocked(now, out)
	}
}

func (t *Table) maxProbesLocked(s State) int {
	if s == NUDProbe {
		return t.p.UcastProbes + t.p.McastReprobes
	}
	return t.p.UcastProbes + t.p.McastProbes
}

// timerLocked is neigh_timer_handler for an entry whose timer expired.
func (t *Table) timerLocked(n *entry, now int64, out *Actions) {
	s := n.state()
	if s&nudInTimer == 0 {
		return
	}
	next := now + int64(time.Second)
	retrans := max(t.p.retrans, timerMin)
	switch {
	case s&NUDReachable != 0:
		switch {
		case now <= n.confirmed+t.reachableTime:
			next = n.confirmed + t.reachableTime // still alive
		case now <= n.used+t.p.delay:
			t.setStateLocked(n, NUDDelay, out)
			n.updated = now
			next = now + t.p.delay
		default:
			t.setStateLocked(n, NUDStale, out)
			n.updated = now
		}
	case s&NUDDelay != 0:
		if now <= n.confirmed+t.p.delay {
			t.setStateLocked(n, NUDReachable, out)
			n.updated = now
			next = n.confirmed + t.reachableTime
		} else {
			t.setStateLocked(n, NUDProbe, out)
			n.updated = now
			n.probes = 0
			next = now + retrans
		}
	default: // INCOMPLETE, PROBE
		next = now + retrans
	}
	s = n.state()
	if s&(NUDIncomplete|NUDProbe) != 0 && n.probes >= t.maxProbesLocked(s) {
		t.setStateLocked(n, NUDFailed, out)
		t.invalidateLocked(n, now, out)
		return
	}
	if s&nudInTimer != 0 {
		if next < now+timerMin {
			next = now + timerMin
		}
		t.addTimerLocked(n, next)
	}
	if s&(NUDIncomplete|NUDProbe) != 0 {
		t.probeLocked(n, out)
	}
}

// probeLocked is neigh_probe + arp_solicit: ask for an ARP request, unicast
// to the known address for the first ucast_solicit probes in PROBE,
// broadcast otherwise.
func (t *Table) probeLocked(n *entry, out *Actions) {
	r := ARPRequest{IfIndex: n.IfIndex(), Target: n.IP(), SrcMAC: n.ifMAC, DstMAC: wire.BroadcastMAC,
		SrcHint: packetSource(n.queue.newest())}
	if n.probes < t.p.UcastProbes {
		r.DstMAC, r.Unicast = n.mac(), true
		t.c.arpTxRequestsUcast++
	} else {
		t.c.arpTxRequestsBcast++
	}
	out.request(r)
	n.probes++
}

// invalidateLocked is neigh_invalidate: the entry just went FAILED; its
// queued packets are reported unreachable.
func (t *Table) invalidateLocked(n *entry, now int64, out *Actions) {
	t.c.resolveFailed++
	n.updated = now
	for p, ok := t.queuePopLocked(n); ok; p, ok = t.queuePopLocked(n) {
		if out == nil {
			t.c.discarded++
			continue
		}
		out.Unreachable = append(out.Unreachable, Frame{IfIndex: n.IfIndex(), IP: n.IP(), Data: p.packet(), Mark: p.mark})
	}
}

// periodicGCLocked is neigh_periodic_work.
func (t *Table) periodicGCLocked(now int64, out *Actions) {
	t.c.periodicGCRuns++
	if now > t.lastRand+randInterval {
		t.lastRand = now
		t.reachableTime = t.randReachableTimeLocked()
	}
	t.nextGC = now + t.p.base/2
	if t.entries < t.p.GCThresh1 {
		return
	}
	for n := t.lists[gcList].head; n != nil; {
		next := n.links[gcList].next
		s := n.state()
		if s&(NUDPermanent|nudInTimer) == 0 {
			if n.used < n.confirmed && n.confirmed <= now {
				n.used = n.confirmed
			}
			if s == NUDFailed || now < n.used || now >= n.used+t.p.stale {
				t.removeLocked(n, RemovedGC, out)
				t.c.gcEvictions++
			}
		}
		n = next
	}
}
