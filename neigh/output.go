package neigh

// The forwarding path's neighbour step: one lock-free lookup per routed
// packet, then either the adjacency is copied into the frame or the packet
// goes to the slow path (Resolve).
//
// Flow: Output looks {ifindex, ip} up in the index, loads the entry's word
// once. In a valid state it writes the 14-byte header and returns true.
// Every hit records the table's coarse clock in the entry (entry.sent), so
// the forced gc spares entries that carry traffic. A STALE entry is still used (Linux sends with the old address while it
// re-verifies it): the first worker to see it sets the entry's touched flag
// (one CAS) and pushes it on the touched stack; the next writer call moves
// it to DELAY so the timers probe it.
//
// Locking: none. The touched stack is a Treiber stack pushed by any number
// of workers and emptied whole (Swap) by the writer under Table.mu.

import "github.com/netfwd/netfwd/wire"

// Output writes the Ethernet header for the next hop (ifindex, ip) into
// hdr[0:14] and returns true when the neighbour is usable. On false, nothing
// is written: call Resolve with the packet.
func (w *Worker) Output(ifindex uint32, ip wire.Addr4, hdr []byte) bool {
	key := entryKey(ifindex, ip)
	n := w.t.index.Home(key)
	if n == nil {
		if n = w.t.index.Get(key); n == nil {
			w.c[wcMisses]++
			return false
		}
	}
	v := n.word.Load()
	st := State(v)
	if st&nudValid == 0 || v&wordDead != 0 {
		w.c[wcMisses]++
		return false
	}
	writeHeader(hdr, v, n.hdrTail)
	w.c[wcHits]++
	// Mark the entry in use for the forced gc: one store per Tick at most.
	if c := w.t.coarseNow.Load(); n.sent.Load() != c {
		n.sent.Store(c)
	}
	if st == NUDStale && n.touched.Load() == 0 && n.touched.CompareAndSwap(0, 1) {
		w.c[wcStaleTouches]++
		w.t.pushTouched(n)
	}
	return true
}

// pushTouched puts n on the touched stack; n.touched is already 1, so each
// entry is on the stack at most once.
func (t *Table) pushTouched(n *entry) {
	for {
		head := t.touchedHead.Load()
		n.nextTouched.Store(head)
		if t.touchedHead.CompareAndSwap(head, n) {
			return
		}
	}
}

// drainTouchedLocked applies the datapath's uses of STALE entries:
// __neigh_event_send's STALE -> DELAY with a DELAY timer, at the writer
// call's clock.
func (t *Table) drainTouchedLocked(now int64) {
	n := t.touchedHead.Swap(nil)
	for n != nil {
		next := n.nextTouched.Load()
		n.nextTouched.Store(nil)
		n.touched.Store(0)
		if !n.dead && n.state() == NUDStale {
			t.staleToDelayLocked(n, now, nil)
		}
		n = next
	}
}

// staleToDelayLocked is the STALE branch of __neigh_event_send: a packet is
// sent with a STALE entry, which starts the delay before probing.
func (t *Table) staleToDelayLocked(n *entry, now int64, out *Actions) {
	n.used = now
	t.delTimerLocked(n)
	t.setStateLocked(n, NUDDelay, out)
	n.updated = now
	t.addTimerLocked(n, now+t.p.delay)
}
