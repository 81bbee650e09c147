package neigh

// Static entries and flushes: `neigh add|replace|change|del A lladdr M dev D
// [nud permanent|reachable|stale|noarp]` at the API level (the config reader
// maps lines to these calls), and the link events that flush an interface.
//
// Semantics are the kernel's neigh_add/neigh_delete with iproute2's flags:
// add = create, fail if it exists; replace = create or override; change =
// override an existing entry; del = set FAILED (reporting queued packets)
// and remove. Permanent entries are exempt from gc and gc_thresh3; the
// other states are subject to them like learned entries.
//
// Locking: Table.mu.

import (
	"errors"
	"fmt"

	"github.com/netfwd/netfwd/wire"
)

// Admin errors, worded like the kernel's.
var (
	ErrExists   = errors.New("file exists")
	ErrNotFound = errors.New("no such file or directory")
)

// Spec is one `neigh add|replace|change` command.
type Spec struct {
	IfIndex   uint32
	IP        wire.Addr4
	LLAddr    wire.MAC
	HasLLAddr bool     // `lladdr` given
	State     State    // NUDPermanent (iproute2's default), NUDReachable, NUDStale or NUDNoARP
	IfMAC     wire.MAC // the interface's MAC, for the adjacency
}

func (s *Spec) check() error {
	if s.IfIndex == 0 {
		return errors.New("device not specified")
	}
	if !resolvable(s.IP) {
		return fmt.Errorf("invalid neighbour address %s", s.IP)
	}
	switch s.State {
	case NUDPermanent, NUDReachable, NUDStale, NUDNoARP:
	default:
		return fmt.Errorf("nud state %s not supported", s.State)
	}
	return nil
}

// Add is `neigh add`: it fails if the entry exists.
func (t *Table) Add(s Spec, now int64, out *Actions) error {
	return t.modify(s, true, true, now, out)
}

// Replace is `neigh replace`: create or override.
func (t *Table) Replace(s Spec, now int64, out *Actions) error {
	return t.modify(s, true, false, now, out)
}

// Change is `neigh change`: override an existing entry.
func (t *Table) Change(s Spec, now int64, out *Actions) error {
	return t.modify(s, false, false, now, out)
}

func (t *Table) modify(s Spec, create, excl bool, now int64, out *Actions) error {
	if err := s.check(); err != nil {
		return err
	}
	t.lockAt(now)
	defer t.mu.Unlock()
	n := t.index.Get(entryKey(s.IfIndex, s.IP))
	switch {
	case n != nil && excl:
		return ErrExists
	case n == nil && !create:
		return ErrNotFound
	case n == nil:
		// A valid state needs an address; refuse before creating anything
		// (the kernel would leave an empty entry behind).
		if !s.HasLLAddr {
			return ErrNoLLAddr
		}
		if n = t.createLocked(s.IfIndex, s.IP, s.IfMAC, s.State == NUDPermanent, now, out); n == nil {
			return ErrTableFull
		}
	}
	var ll *wire.MAC
	if s.HasLLAddr {
		ll = &s.LLAddr
	}
	return t.updateLocked(n, ll, s.State, updateAdmin|updateOverride, now, out)
}

// Delete is `neigh del`.
func (t *Table) Delete(ifindex uint32, ip wire.Addr4, now int64, out *Actions) error {
	t.lockAt(now)
	defer t.mu.Unlock()
	n := t.index.Get(entryKey(ifindex, ip))
	if n == nil {
		return ErrNotFound
	}
	t.updateLocked(n, nil, NUDFailed, updateAdmin|updateOverride, now, out)
	t.removeLocked(n, RemovedAdmin, out)
	t.c.adminDel++
	return nil
}

// FlushDev removes the interface's entries, keeping permanent ones when
// keepPermanent is set, and returns how many it removed. Queued packets are
// dropped. Linux flushes everything on `link set down` (neigh_ifdown) and
// keeps permanent entries on carrier loss (neigh_carrier_down).
func (t *Table) FlushDev(ifindex uint32, keepPermanent bool, now int64, out *Actions) int {
	t.lockAt(now)
	defer t.mu.Unlock()
	var victims []*entry
	for n := range t.index.All() {
		if n.IfIndex() == ifindex && !(keepPermanent && n.state() == NUDPermanent) {
			victims = append(victims, n)
		}
	}
	for _, n := range victims {
		t.removeLocked(n, RemovedFlush, out)
		t.c.flushed++
	}
	return len(victims)
}

// ChangeAddr is neigh_changeaddr: the interface's MAC changed, so every
// entry on it (whose adjacency carries the old MAC) goes.
func (t *Table) ChangeAddr(ifindex uint32, now int64, out *Actions) int {
	return t.FlushDev(ifindex, false, now, out)
}
