package hostpath

// Vanished: the twins whose TAP device is gone although the Manager still
// holds it — deleted behind its back (`ip link del nf-eth0`), replaced by
// another interface of that name, or broken (its reader failed). Sync
// re-creates such a twin (syncTwinLocked), but a caller that syncs only
// when its specs change never calls it: this check tells it to.
//
// Locking: takes mu (one RTM_GETLINK per twin on the Manager's socket).

import (
	"errors"
	"slices"
	"strings"
)

// VanishedTwin is a twin whose device is gone, and why.
type VanishedTwin struct {
	Port, Name, Reason string
}

// Vanished lists the twins a Sync would re-create because their device is
// gone. A twin that has no device because its creation failed is not
// listed (Sync reported that failure).
func (m *Manager) Vanished() []VanishedTwin {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	var out []VanishedTwin
	for port, t := range m.twins {
		d := t.dev.Load()
		if d == nil {
			continue
		}
		// The kernel's view first: a deleted twin's reader fails too
		// (EBADFD), but "deleted" is the reason worth logging.
		reason := ""
		li, err := m.nl.linkByName(d.name)
		switch {
		case errors.Is(err, errNoLink):
			reason = "deleted"
		case err == nil && li.index != d.index:
			reason = "replaced by another interface of that name"
		case d.broken.Load():
			reason = "its reader failed"
		}
		if reason != "" {
			out = append(out, VanishedTwin{Port: port, Name: d.name, Reason: reason})
		}
	}
	slices.SortFunc(out, func(a, b VanishedTwin) int { return strings.Compare(a.Port, b.Port) })
	return out
}
