package fib

// VRFs (`ip link add NAME type vrf table N`, `ip link set DEV master NAME`):
// a VRF is a name bound to a routing table. The addresses of a device
// enslaved to a VRF derive their local, broadcast and connected routes in
// the VRF's table instead of local and main, and the packets it receives
// carry the table as their flow's L3mdev, which the l3mdev rule (priority
// 1000, added with the first VRF as Linux's vrf driver does) looks up.
// Overlapping prefixes in two VRFs are simply routes in two tables.
//
// Deliberate differences from Linux: enslaving a device does not cycle it
// (Linux's down/up flushes the static routes through it; netfwd keeps
// them), and the VRF device itself gets no routes (Linux gives it none in
// IPv4 either, but reserves 127.0.0.1 handling netfwd has no use for).
//
// Locking: inside a Txn (writer); readers use the published maps.

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// VRF is one VRF device.
type VRF struct {
	Name  string
	Table uint32
}

// ErrVRFExists and friends are the kernel's answers, worded as ip prints them.
var (
	ErrVRFExists   = errors.New("File exists")
	ErrNoSuchVRF   = errors.New("Cannot find device")
	ErrVRFTableUse = errors.New("table is already used by another VRF")
)

// devTable returns the table of dev's VRF (0: dev is in no VRF).
func (tx *Txn) devTable(dev string) uint32 { return tx.next.vrfTable(dev) }

func (s *state) vrfTable(dev string) uint32 {
	if v, ok := s.devVRF[dev]; ok {
		return s.vrfs[v]
	}
	return 0
}

// AddVRF creates VRF name bound to table. The first VRF adds the l3mdev
// rule (1000: from all lookup [l3mdev-table]) unless one exists.
func (tx *Txn) AddVRF(name string, table uint32) error {
	if name == "" {
		return errors.New("VRF needs a name")
	}
	if table == 0 || table == TableLocal {
		return fmt.Errorf("invalid VRF table %d", table)
	}
	if _, ok := tx.next.vrfs[name]; ok {
		return ErrVRFExists
	}
	for _, t := range tx.next.vrfs {
		if t == table {
			return ErrVRFTableUse // Linux refuses a second VRF on one table too
		}
	}
	vrfs := maps.Clone(tx.next.vrfs)
	if vrfs == nil {
		vrfs = map[string]uint32{}
	}
	vrfs[name] = table
	tx.next.vrfs = vrfs
	if !slices.ContainsFunc(tx.next.rules.list, func(r Rule) bool { return r.L3mdev }) {
		l3 := RuleSpec{Rule: Rule{Priority: RuleL3mdevPriority, L3mdev: true, SuppressPrefixLen: -1, Proto: ProtoKernel},
			PrioritySet: true, ActionSet: true}
		if err := tx.AddRule(l3); err != nil {
			return err
		}
	}
	return nil
}

// DelVRF removes a VRF: its devices leave it first (their derived routes
// go back to local and main). Routes in its table stay, as Linux keeps the
// table. The last VRF takes the l3mdev rule the first one added.
func (tx *Txn) DelVRF(name string) error {
	if _, ok := tx.next.vrfs[name]; !ok {
		return fmt.Errorf("%w %q", ErrNoSuchVRF, name)
	}
	for dev, v := range tx.next.devVRF {
		if v == name {
			if err := tx.SetMaster(dev, ""); err != nil {
				return err
			}
		}
	}
	vrfs := maps.Clone(tx.next.vrfs)
	delete(vrfs, name)
	tx.next.vrfs = vrfs
	if len(vrfs) == 0 {
		// A deliberate difference: Linux keeps the l3mdev rule it added
		// with the first VRF; netfwd removes it with the last, so the
		// lookup gets the merged fast path back (no custom rules) and a
		// reload that removes every VRF ends where a fresh start does.
		// A user's own l3mdev rule (not proto kernel) stays.
		rules := slices.DeleteFunc(slices.Clone(tx.next.rules.list), func(r Rule) bool {
			return r.L3mdev && r.Proto == ProtoKernel
		})
		if len(rules) != len(tx.next.rules.list) {
			tx.setRules(rules)
		}
	}
	return nil
}

// SetMaster enslaves dev to VRF vrf ("": nomaster), moving the routes its
// addresses derive into the VRF's table (or back).
func (tx *Txn) SetMaster(dev, vrf string) error {
	if vrf != "" {
		if _, ok := tx.next.vrfs[vrf]; !ok {
			return fmt.Errorf("%w %q", ErrNoSuchVRF, vrf)
		}
	}
	if tx.next.devVRF[dev] == vrf {
		return nil
	}
	was := tx.devTable(dev)
	m := maps.Clone(tx.next.devVRF)
	if m == nil {
		m = map[string]string{}
	}
	if vrf == "" {
		delete(m, dev)
	} else {
		m[dev] = vrf
	}
	tx.next.devVRF = m
	addrs := tx.devAddrs(dev)
	up := tx.f.nhs.DevUp(dev)
	return tx.syncDerivedTables(dev, addrs, up, was, tx.devTable(dev))
}

// VRFs returns the VRFs of the published state, sorted by name.
func (f *FIB) VRFs() []VRF {
	s := f.cur.Load()
	out := make([]VRF, 0, len(s.vrfs))
	for n, t := range s.vrfs {
		out = append(out, VRF{n, t})
	}
	slices.SortFunc(out, func(a, b VRF) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out
}

// VRFTable returns the table of VRF name.
func (f *FIB) VRFTable(name string) (uint32, bool) {
	t, ok := f.cur.Load().vrfs[name]
	return t, ok
}

// DevVRF returns the VRF dev is enslaved to ("" if none) and its table.
func (f *FIB) DevVRF(dev string) (string, uint32) {
	s := f.cur.Load()
	v := s.devVRF[dev]
	return v, s.vrfs[v]
}

// VRFTable returns the table of VRF name in the transaction's state.
func (tx *Txn) VRFTable(name string) (uint32, bool) {
	t, ok := tx.next.vrfs[name]
	return t, ok
}

// IsVRF reports whether name is a VRF in the transaction's state.
func (tx *Txn) IsVRF(name string) bool {
	_, ok := tx.next.vrfs[name]
	return ok
}

// DevVRF returns the VRF dev is enslaved to in the transaction's state
// ("" if none) and its table.
func (tx *Txn) DevVRF(dev string) (string, uint32) {
	v := tx.next.devVRF[dev]
	return v, tx.next.vrfs[v]
}

// DevVRFs returns every enslaved device's VRF in the transaction's state
// (a copy).
func (tx *Txn) DevVRFs() map[string]string { return maps.Clone(tx.next.devVRF) }

// DevVRFs returns every enslaved device's VRF of the published state.
func (f *FIB) DevVRFs() map[string]string { return maps.Clone(f.cur.Load().devVRF) }
