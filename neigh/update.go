package neigh

// The generic update (the kernel's __neigh_update): how ARP input and admin
// commands change an entry's state and link-layer address.
//
// Rules, in the kernel's order:
//   - without the admin flag, NOARP and PERMANENT entries do not change;
//   - a new invalid state (FAILED, NONE, INCOMPLETE) stops the timer; going
//     FAILED from INCOMPLETE or PROBE reports the queued packets;
//   - a connected new state (REACHABLE...) confirms the entry now;
//   - a valid entry keeps its address against a different one unless the
//     override flag is set (ARP input sets it after locktime, for
//     gratuitous ARP, and for requests addressed to us);
//   - a STALE update that brings the same address leaves the state alone
//     (unless admin);
//   - a state change re-arms the timer (REACHABLE: reachable_time ahead,
//     other timer states: now);
//   - an entry that becomes valid sends its queued packets.
//
// Locking: Table.mu.

import (
	"errors"

	"github.com/netfwd/netfwd/wire"
)

const (
	updateOverride = 1 << iota
	updateAdmin
)

// Update errors.
var (
	errNeighNotAdmin = errors.New("operation not permitted")
	// ErrNoLLAddr: a valid state needs an address and the entry has none.
	ErrNoLLAddr = errors.New("no link layer address given")
)

// updateLocked is __neigh_update. lladdr nil means "no address supplied".
func (t *Table) updateLocked(n *entry, lladdr *wire.MAC, newState State, flags int, now int64, out *Actions) error {
	old := n.state()
	if flags&updateAdmin == 0 && old&(NUDNoARP|NUDPermanent) != 0 {
		return errNeighNotAdmin
	}
	if newState&nudValid == 0 {
		t.delTimerLocked(n)
		t.setStateLocked(n, newState, out)
		if old&(NUDIncomplete|NUDProbe) != 0 && newState&NUDFailed != 0 {
			t.invalidateLocked(n, now, out)
		}
		t.gcListAfterLocked(n, old)
		return nil
	}

	cur := n.mac()
	ll := cur
	llChanged := false
	switch {
	case lladdr != nil:
		// An address supplied to an entry that had none counts as new even
		// when the bytes match (the kernel compares pointers then).
		ll = *lladdr
		llChanged = old&nudValid == 0 || ll != cur
	case old&nudValid == 0:
		return ErrNoLLAddr
	}

	if newState&nudConnected != 0 {
		n.confirmed = now
	}
	if old&nudValid != 0 {
		if llChanged && flags&updateOverride == 0 {
			return nil
		}
		if !llChanged && newState == NUDStale && flags&updateAdmin == 0 {
			newState = old
		}
	}
	if newState != old || llChanged {
		n.updated = now
	}
	if newState != old {
		t.delTimerLocked(n)
		if newState&NUDProbe != 0 {
			n.probes = 0
		}
		if newState&nudInTimer != 0 {
			d := int64(0)
			if newState&NUDReachable != 0 {
				d = t.reachableTime
			}
			t.addTimerLocked(n, now+d)
		}
	}
	t.storeLocked(n, newState, ll, out)
	if llChanged && newState&nudConnected == 0 {
		n.confirmed = now - 2*t.p.base
	}
	if newState != old {
		if old&nudValid == 0 {
			t.sendQueueLocked(n, now, out)
		}
		t.gcListAfterLocked(n, old)
	}
	return nil
}

// gcListAfterLocked follows neigh_update's gc-list bookkeeping when an entry
// enters or leaves PERMANENT.
func (t *Table) gcListAfterLocked(n *entry, old State) {
	if (old^n.state())&NUDPermanent != 0 {
		t.updateGCListLocked(n)
	}
}

// sendQueueLocked is neigh_update_process_arp_queue: the entry just became
// valid, so its queued packets go out with the new header. Sending through
// an entry that is not connected (STALE) is a use, which starts DELAY, as
// the kernel's neigh_resolve_output does for the first of them.
func (t *Table) sendQueueLocked(n *entry, now int64, out *Actions) {
	if n.queue.n == 0 {
		return
	}
	if n.state() == NUDStale {
		t.staleToDelayLocked(n, now, out)
	}
	w := n.word.Load()
	n.sent.Store(now)
	for p, ok := t.queuePopLocked(n); ok; p, ok = t.queuePopLocked(n) {
		if out == nil {
			t.c.discarded++
			continue
		}
		writeHeader(p.buf, w, n.hdrTail)
		out.Transmit = append(out.Transmit, Frame{IfIndex: n.IfIndex(), IP: n.IP(), Data: p.buf, Mark: p.mark})
	}
}
