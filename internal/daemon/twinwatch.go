package daemon

// Twins that disappear (--host-path): an admin's `ip link del nf-eth0`, a
// script that cleans up TAP devices. hostpath.Manager.Sync re-creates a
// twin whose device is gone (same name, MAC, MTU and addresses), but the
// reconcile loop (hostpath.go) calls Sync only when the wanted twins
// change; this file makes it call Sync when a twin went away:
//   - at once on the link monitor's RTM_DELLINK of a twin's current
//     device (twinLinkEvent; our own re-creations delete devices the twin
//     no longer holds, so they do not count);
//   - as a backstop (a missed netlink message, a reader that failed), when
//     hostpath.Manager.Vanished finds one, every twinCheckPeriod;
//   - on every requestSync (SIGHUP's reload, a ctl MTU change).
// Each is logged at WARN with the reason.
//
// Locking: force is an atomic (the link monitor's goroutine sets it);
// lastCheck belongs to the reconcile loop's goroutine.

import (
	"sync/atomic"
	"time"
)

// twinCheckPeriod is how often the reconcile loop asks the Manager for
// vanished twins.
const twinCheckPeriod = time.Second

type twinWatch struct {
	force     atomic.Bool // Sync on the next pass whatever the specs
	lastCheck time.Time   // reconcile loop only
}

// twinLinkEvent is called with every link monitor event: the deletion of
// a twin's device forces a Sync now.
func (hp *hostPath) twinLinkEvent(ev linkEvent) {
	if hp == nil || !ev.deleted {
		return
	}
	port := hp.twinPort(ev.name)
	if port == "" {
		return
	}
	t := hp.m.Twin(port)
	if t == nil || t.Ifindex() != ev.index {
		return // a device we closed ourselves
	}
	hp.d.log.Warn("host path: twin deleted behind netfwd's back; re-creating it", "twin", ev.name, "port", port, "index", ev.index)
	hp.forceSync()
}

// forceSync asks the reconcile loop for a Sync now, specs changed or not.
func (hp *hostPath) forceSync() {
	hp.watch.force.Store(true)
	hp.requestSync()
}

// resyncDue reports whether this reconcile pass must Sync although the
// specs did not change: forced, or a twin vanished (checked every
// twinCheckPeriod).
func (hp *hostPath) resyncDue() bool {
	if hp.watch.force.Swap(false) {
		return true
	}
	if now := time.Now(); now.Sub(hp.watch.lastCheck) >= twinCheckPeriod {
		hp.watch.lastCheck = now
		gone := hp.m.Vanished()
		for _, v := range gone {
			hp.d.log.Warn("host path: twin gone; re-creating it", "twin", v.Name, "port", v.Port, "reason", v.Reason)
		}
		return len(gone) > 0
	}
	return false
}
