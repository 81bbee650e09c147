package l2

// FDBLearner drives one FDB outside a bridge through the datapath's own
// learn and lookup functions, for the `fdb` benchmark suite (which compares
// the table with a fixed 256-bucket hash) and for tests.

import "github.com/netfwd/netfwd/wire"

// FDBLearner is an FDB with one port-VLAN to learn on.
type FDBLearner struct {
	fdb *FDB
	pv  *PortVLAN
	now int64
}

// NewFDBLearner returns an empty FDB; maxLearned 0 means unlimited.
func NewFDBLearner(_ DomainOptions, maxLearned uint32) *FDBLearner {
	l := &FDBLearner{fdb: &FDB{}, now: 1 << 20}
	l.fdb.init()
	l.fdb.maxLearned.Store(maxLearned)
	p := newPort(0, "bench0", wire.MAC{})
	l.pv = &p.raw
	return l
}

// FDB returns the table.
func (l *FDBLearner) FDB() *FDB { return l.fdb }

// Learn is ingress learning of source m in vid (refresh, or a new entry).
func (l *FDBLearner) Learn(m wire.MAC, vid uint16) {
	l.fdb.learn(fdbKey(m, vid), l.pv, l.now)
}

// Lookup is a destination lookup, returning the forwarding destination.
func (l *FDBLearner) Lookup(m wire.MAC, vid uint16) bool {
	pv, _, ok := l.fdb.lookup(fdbKey(m, vid))
	if !ok {
		return false
	}
	d := FwdDst{PV: pv}
	d.Port = d.PV.port
	return d.Port != nil
}

// Forget deletes m in vid (as ageing does).
func (l *FDBLearner) Forget(m wire.MAC, vid uint16) {
	l.fdb.mu.Lock()
	l.fdb.deleteLocked(fdbKey(m, vid))
	l.fdb.mu.Unlock()
}

// Probes returns how many buckets a lookup of m in vid reads (1: its home
// bucket). The benchmark reports the average to show that the table's
// algorithmic cost stays flat as it grows (the time may not, once the
// table no longer fits the caches and the TLB).
func (l *FDBLearner) Probes(m wire.MAC, vid uint16) int {
	t := l.fdb.m.cur.Load()
	k := fdbKey(m, vid)
	i := t.home(k)
	for n := 1; n <= len(t.buckets); n++ {
		b := &t.buckets[i]
		for j := range b.slots {
			switch bk := b.slots[j].key.Load(); {
			case bk == slotEmpty, bk != slotTombstone && slotKey(bk) == k:
				return n
			}
		}
		i = (i + 1) & t.mask
	}
	return len(t.buckets)
}
