package l2

// Internals exported to l2's external tests (as net/netip's export_test.go
// does): the fdb benchmark (fdb_bench_test.go, suite fdb of netfwd-bench)
// drives one FDB outside any bridge through the datapath's own learn and
// lookup functions, which are no part of l2's API.

import "github.com/netfwd/netfwd/wire"

// FDBLearner is an FDB with one port-VLAN to learn on.
type FDBLearner = fdbLearner

// NewFDBLearner returns an empty FDB with the bridge-wide learned-entry
// limit maxLearned (0: DefaultFDBMaxLearned).
func NewFDBLearner(maxLearned uint32) *FDBLearner { return newFDBLearner(maxLearned) }

// fdbLearner is an FDB with one port-VLAN to learn on.
type fdbLearner struct {
	fdb *FDB
	pv  *PortVLAN
	now int64
}

func newFDBLearner(maxLearned uint32) *fdbLearner {
	l := &fdbLearner{fdb: &FDB{}, now: 1 << 20}
	l.fdb.init()
	l.fdb.maxLearned.Store(maxLearned)
	p := newPort(0, "bench0", wire.MAC{})
	l.pv = &p.raw
	return l
}

func (l *fdbLearner) Len() int { return l.fdb.Len() }

func (l *fdbLearner) Learn(m wire.MAC, vid uint16) {
	l.fdb.learn(fdbKey(m, vid), l.pv, l.now)
}

func (l *fdbLearner) Lookup(m wire.MAC, vid uint16) bool {
	pv, _, ok := l.fdb.lookup(fdbKey(m, vid))
	if !ok {
		return false
	}
	d := FwdDst{PV: pv}
	d.Port = d.PV.port
	return d.Port != nil
}

func (l *fdbLearner) Forget(m wire.MAC, vid uint16) {
	l.fdb.mu.Lock()
	l.fdb.deleteLocked(fdbKey(m, vid))
	l.fdb.mu.Unlock()
}

// Probes: the benchmark reports the average to show that the table's
// algorithmic cost stays flat as it grows (the time may not, once the table
// no longer fits the caches and the TLB).
func (l *fdbLearner) Probes(m wire.MAC, vid uint16) int {
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
