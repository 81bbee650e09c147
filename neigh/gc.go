package neigh

// entry creation and removal, the gc list and the forced gc that keeps the
// table at or under gc_thresh3 (neigh_alloc, neigh_forced_gc,
// neigh_remove_one, neigh_update_gc_list).
//
// Flow: every non-permanent entry is on the gc list, in the order it joined
// it (creation, or leaving PERMANENT). Creating a non-permanent entry when
// gc_thresh3 entries exist, or gc_thresh2 and no forced gc for 5 s, runs the
// forced gc: remove removable entries until the list is back to
// gc_thresh2, in two passes from the list's head: first those that never
// carried traffic, then the others. Removable (forcedGCRemovable) are
// FAILED and NOARP entries, INCOMPLETE ones unanswered for retrans_time,
// and others not updated for 5 s unless they carried traffic within
// gc_stale_time. If it removes nothing
// and the table is at gc_thresh3, the creation is refused (table_fulls).
// Permanent entries are exempt from the limits, as in Linux.
//
// Linux removes only FAILED/NOARP entries and those not updated for 5 s,
// and spares those a route holds a reference to. Here the entries in use
// are spared by their traffic (entry.sent) instead, and unresolved entries
// go after 1 s instead of 5 s: a flood to unresolved hosts churns at most
// about gc_thresh3 entries a second and never pushes out established ones
// (docs/neigh.md).
//
// A flood keeps the table full of fresh entries, so the forced gc would
// scan the whole list on every refused creation. It remembers instead when
// its last complete scan found nothing (and the earliest moment an entry
// could become removable); until then, or until an entry turns FAILED or
// NOARP (or INCOMPLETE: eventSendLocked lowers the bound), it returns at once. The result is the same as
// scanning (traffic only makes entries less removable).
//
// Locking: Table.mu.

import (
	"errors"

	"github.com/netfwd/netfwd/wire"
)

// ErrTableFull is neigh_alloc's refusal ("No buffer space available").
var ErrTableFull = errors.New("no buffer space available")

// createLocked makes and indexes an entry in state NONE, or returns nil when
// the table is full. exempt entries (permanent) skip the limits.
func (t *Table) createLocked(ifindex uint32, ip wire.Addr4, ifMAC wire.MAC, exempt bool, now int64, out *Actions) *entry {
	if !exempt {
		entries := t.gcEntries
		p := t.p
		if entries >= p.GCThresh3 || (entries >= p.GCThresh2 && now > t.lastFlush+forcedGCAge) {
			if t.forcedGCLocked(now, out) == 0 && entries >= p.GCThresh3 {
				t.c.tableFulls++
				return nil
			}
		}
	}
	n := &entry{
		key:       entryKey(ifindex, ip),
		hdrTail:   headerTail(ifMAC),
		ifMAC:     ifMAC,
		updated:   now,
		used:      now,
		confirmed: now - 2*t.p.base,
		heapIdx:   -1,
	}
	n.sent.Store(minTime)
	t.entries++
	t.stateCount[0]++
	t.c.allocs++
	if !exempt {
		t.gcAddLocked(n)
	}
	if _, rebuilt := t.index.Put(n); rebuilt {
		t.c.hashRebuilds++
	}
	return n
}

// gcAddLocked appends n to the gc list.
func (t *Table) gcAddLocked(n *entry) {
	t.listPushLocked(gcList, n)
	t.gcEntries++
	t.learnPaused.Store(t.gcEntries >= t.p.GCThresh2)
	// n may become removable at updated+5s (or at once if FAILED/NOARP/INCOMPLETE).
	if _, at := t.forcedGCRemovable(n, minTime); at == minTime {
		t.forcedGCIdleUntil = minTime
	} else {
		t.forcedGCIdleUntil = min(t.forcedGCIdleUntil, at)
	}
}

// forcedGCAlwaysRemovable: states the forced gc removes whatever their age.
func forcedGCAlwaysRemovable(s State) bool {
	return s == NUDFailed || s == NUDNoARP
}

// forcedGCRemovable reports whether the forced gc may remove n at now, and
// from when on it may (removable iff now > at; minTime: always).
func (t *Table) forcedGCRemovable(n *entry, now int64) (bool, int64) {
	s := n.state()
	if forcedGCAlwaysRemovable(s) {
		return true, minTime
	}
	if n.updated > now && now != minTime { // the clock went back
		return true, minTime
	}
	at := n.updated + forcedGCAge
	switch {
	case s == NUDIncomplete: // unanswered for retrans_time
		at = n.updated + t.p.retrans
	case s.Valid():
		at = max(at, n.sent.Load()+t.p.stale)
	}
	return now > at, at
}

func (t *Table) gcUnlinkLocked(n *entry) {
	if !t.listUnlinkLocked(gcList, n) {
		return
	}
	t.gcEntries--
	t.learnPaused.Store(t.gcEntries >= t.p.GCThresh2)
}

// updateGCListLocked is neigh_update_gc_list: permanent entries leave the
// gc list, others join it at the tail.
func (t *Table) updateGCListLocked(n *entry) {
	exempt := n.state() == NUDPermanent
	switch {
	case exempt && n.links[gcList].on:
		t.gcUnlinkLocked(n)
	case !exempt && !n.links[gcList].on:
		t.gcAddLocked(n)
	}
}

// forcedGCLocked is neigh_forced_gc; it returns how many entries it removed.
func (t *Table) forcedGCLocked(now int64, out *Actions) int {
	t.c.forcedGCRuns++
	if now <= t.forcedGCIdleUntil {
		t.lastFlush = now
		return 0
	}
	maxClean := t.gcEntries + 1 - t.p.GCThresh2 // +1: the entry being created
	shrunk := 0
	minAt := int64(1<<63 - 1)
	complete := true
scan:
	for pass := 0; pass < 2; pass++ {
		for n := t.lists[gcList].head; n != nil; {
			next := n.links[gcList].next
			ok, at := t.forcedGCRemovable(n, now)
			switch {
			case !ok:
				if pass == 0 {
					minAt = min(minAt, at)
				}
			case pass == 1 || n.sent.Load() == minTime: // never used first
				t.removeLocked(n, RemovedForcedGC, out)
				t.c.forcedGCEvictions++
				shrunk++
				if shrunk >= maxClean {
					complete = false
					break scan
				}
			}
			n = next
		}
	}
	t.lastFlush = now
	if complete && shrunk == 0 {
		t.forcedGCIdleUntil = minAt
	}
	return shrunk
}

// removeLocked takes n out of the table (neigh_remove_one / neigh_flush_dev
// and the final neigh_destroy): timer, gc list, index, queue. Readers still
// holding n see NUDNone from now on.
func (t *Table) removeLocked(n *entry, reason RemoveReason, out *Actions) {
	t.delTimerLocked(n)
	t.gcUnlinkLocked(n)
	if _, rebuilt := t.index.Delete(n.key); rebuilt {
		t.c.hashRebuilds++
	}
	for p, ok := t.queuePopLocked(n); ok; p, ok = t.queuePopLocked(n) {
		t.c.queuePurged++
		if out != nil {
			out.dropped(n, p)
		}
		t.recycleLocked(p.buf)
	}
	w := n.word.Load()
	t.stateCount[stateSlot(State(w))]--
	n.word.Store(w&^0xff | wordDead)
	n.dead = true
	t.entries--
	t.c.destroys++
	out.event(Event{Kind: EventRemoved, IfIndex: n.IfIndex(), IP: n.IP(), LLAddr: wordMAC(w), Reason: reason})
}
