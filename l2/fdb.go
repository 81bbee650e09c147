package l2

// The forwarding database: {MAC, VID} -> destination port-VLAN.
//
// Flow: ingress learns the source (learn), then looks the destination up
// (lookup). Both are lock-free for known entries: a refresh is one atomic
// store of the coarse batch time, and only when it changed. New and moved
// entries take the writer lock with TryLock: if another worker (or the
// control plane, e.g. a resize) holds it, the frame is forwarded without
// learning and LearnSkipped is counted, so a learning storm never stalls
// forwarding. An entry's destination is its PortVLAN (FwdDst = {pv.port,
// pv}), so a hit needs no VLAN lookup. The entries live in the table
// (fdbTable); users of the FDB see copies (fdbView, FDBEntry).
//
// Entry kinds follow Linux: local/permanent (frames for it go to the host),
// static (never aged, may still move unless sticky), dynamic (aged), and
// learned (dynamic entries made by the datapath; only these count against
// fdb_max_learned, Linux 6.7 semantics, except that 0 or no setting means
// DefaultFDBMaxLearned, not unlimited). A learned flood at the limit is
// refused, not evicted.
//
// Locking: FDB.mu is the writer lock (lock order: Domain.mu before FDB.mu).

import (
	"sort"
	"sync"
	"sync/atomic"

	"github.com/netfwd/netfwd/wire"
)

// DefaultFDBMaxLearned is the bridge-wide learned-entry limit when
// fdb_max_learned is not configured or is 0 (Linux: no limit). A MAC flood
// into one port of an unconfigured bridge then holds at most ~11 MiB of
// FDB (about 170 bytes an entry) instead of hundreds; raise it with
// `fdb_max_learned N` (docs/l2.md).
const DefaultFDBMaxLearned = 65536

// hardMaxLearned bounds learned entries whatever fdb_max_learned says.
const hardMaxLearned = 1 << 22

// effectiveMaxLearned is the bridge-wide limit that applies for a
// configured fdb_max_learned.
func effectiveMaxLearned(configured uint32) int64 {
	if configured == 0 {
		return DefaultFDBMaxLearned
	}
	return min(int64(configured), hardMaxLearned)
}

// MaxLearned is the bridge-wide learned-entry limit in force.
func (f *FDB) MaxLearned() int { return int(effectiveMaxLearned(f.maxLearned.Load())) }

// FDB is one bridge's forwarding database.
type FDB struct {
	mu   sync.Mutex // writer lock
	m    fdbTable
	user map[uint64]bool // keys added by configuration; guarded by mu

	maxLearned atomic.Uint32 // bridge-wide learned limit as configured, 0 = DefaultFDBMaxLearned
	nLearned   atomic.Int64  // learned entries (changed under mu)

	learned, moved, aged, limitHit atomic.Uint64
}

func (f *FDB) init() {
	f.m.init()
	f.user = map[uint64]bool{}
}

// Len returns the number of entries.
func (f *FDB) Len() int { return int(f.m.count.Load()) }

// Learned returns the number of learned entries.
func (f *FDB) Learned() int { return int(f.nLearned.Load()) }

// lookup returns the destination and flags of key. Lock-free.
func (f *FDB) lookup(key uint64) (dst *PortVLAN, flags uint64, ok bool) {
	dst, flags, _, ok = f.m.get(key)
	return dst, flags, ok
}

// learnResult tells the caller what learn did (for counters).
type learnResult uint8

const (
	learnRefreshed learnResult = iota
	learnNew
	learnMoved
	learnIgnored // local entry, sticky entry, or limit reached
	learnBusy    // writer lock busy: skipped
)

// learn records that key was seen on pv at now (ingress source learning).
func (f *FDB) learn(key uint64, pv *PortVLAN, now int64) learnResult {
	if dst, flags, s, ok := f.m.get(key); ok {
		if flags&fdbLocal != 0 {
			return learnIgnored // own address as source: Linux warns and keeps the entry
		}
		if s.updated.Load() != now {
			s.updated.Store(now)
		}
		if dst == pv || flags&fdbSticky != 0 {
			return learnRefreshed
		}
		return f.moveSlow(key, pv, now)
	}
	return f.learnNewSlow(key, pv, now)
}

func (f *FDB) moveSlow(key uint64, pv *PortVLAN, now int64) learnResult {
	if !f.mu.TryLock() {
		return learnBusy
	}
	defer f.mu.Unlock()
	old, flags, ok := f.m.lookupLocked(key)
	if !ok || flags&(fdbLocal|fdbSticky) != 0 {
		return learnIgnored // deleted or reconfigured meanwhile
	}
	if old == pv {
		return learnRefreshed
	}
	if flags&fdbLearned != 0 {
		np := pv.port
		if lim := np.maxLearned.Load(); lim != 0 && np.nLearned.Load() >= int64(lim) {
			f.limitHit.Add(1)
			return learnIgnored
		}
		np.nLearned.Add(1)
		if old != nil {
			old.port.nLearned.Add(-1)
		}
	}
	f.m.setDstLocked(key, pv, now)
	f.moved.Add(1)
	return learnMoved
}

func (f *FDB) learnNewSlow(key uint64, pv *PortVLAN, now int64) learnResult {
	if !f.mu.TryLock() {
		return learnBusy
	}
	defer f.mu.Unlock()
	if _, _, ok := f.m.lookupLocked(key); ok {
		return learnRefreshed // another worker won the race
	}
	n := f.nLearned.Load()
	if n >= effectiveMaxLearned(f.maxLearned.Load()) {
		f.limitHit.Add(1)
		return learnIgnored
	}
	p := pv.port
	if lim := p.maxLearned.Load(); lim != 0 && p.nLearned.Load() >= int64(lim) {
		f.limitHit.Add(1)
		return learnIgnored
	}
	f.m.putLocked(key|fdbLearned, pv, now)
	f.nLearned.Add(1)
	p.nLearned.Add(1)
	f.learned.Add(1)
	return learnNew
}

// putLocked installs an entry (replacing whatever is there); user marks a
// configured entry. Guarded by f.mu.
func (f *FDB) putLocked(key uint64, pv *PortVLAN, flags uint64, user bool, now int64) {
	if oldFlags, oldDst, replaced := f.m.putLocked(key|flags&fdbFlags, pv, now); replaced {
		f.forgetLocked(oldFlags, oldDst)
	}
	if user {
		f.user[key] = true
	} else {
		delete(f.user, key)
	}
}

// deleteLocked removes key; guarded by f.mu.
func (f *FDB) deleteLocked(key uint64) bool {
	flags, dst, ok := f.m.deleteLocked(key)
	if ok {
		f.forgetLocked(flags, dst)
		delete(f.user, key)
	}
	return ok
}

// forgetLocked undoes the learned accounting of an entry leaving the table.
func (f *FDB) forgetLocked(flags uint64, dst *PortVLAN) {
	if flags&fdbLearned != 0 {
		f.nLearned.Add(-1)
		if dst != nil {
			dst.port.nLearned.Add(-1)
		}
	}
}

// age deletes dynamic entries not refreshed for ageing ns; returns how many
// were removed and the time until the next entry expires (or ageing if none
// is pending). The scan is lock-free; only deletions take the lock, in
// chunks, so learning keeps going during a scan of a large table.
func (f *FDB) age(now, ageing int64) (n int, next int64) {
	next = ageing
	var victims []uint64
	f.m.each(func(e fdbView) {
		if e.flags&fdbStatic != 0 {
			return
		}
		left := e.updated + ageing - now
		if left <= 0 {
			victims = append(victims, e.key)
		} else if left < next {
			next = left
		}
	})
	for len(victims) > 0 {
		chunk := victims[:min(len(victims), 1024)]
		victims = victims[len(chunk):]
		f.mu.Lock()
		t := f.m.cur.Load()
		for _, k := range chunk {
			// Recheck: refreshed or made static since the scan?
			b, _, j := findFDBSlot(t, k)
			if b == nil || b.slots[j].key.Load()&fdbStatic != 0 || b.slots[j].updated.Load()+ageing > now {
				continue
			}
			f.deleteLocked(k)
			n++
		}
		f.mu.Unlock()
	}
	f.aged.Add(uint64(n))
	return n, next
}

// flushLocked deletes the entries for which match returns true.
func (f *FDB) flushLocked(match func(e fdbView) bool) int {
	var keys []uint64
	f.m.each(func(e fdbView) {
		if match(e) {
			keys = append(keys, e.key)
		}
	})
	for _, k := range keys {
		f.deleteLocked(k)
	}
	return len(keys)
}

// FDBEntry is a copy of one entry, for show and tests.
type FDBEntry struct {
	MAC     wire.MAC
	VID     uint16
	Port    *Port // nil: the bridge device itself
	Local   bool  // frames to it are delivered to the host
	Static  bool  // never aged
	Sticky  bool  // never moved by learning
	User    bool  // added by configuration
	Learned bool  // learned by the datapath
	Updated int64 // clock value of the last refresh
}

func (v fdbView) export(user bool) FDBEntry {
	x := FDBEntry{
		MAC: keyMAC(v.key), VID: keyVID(v.key),
		Local: v.flags&fdbLocal != 0, Static: v.flags&fdbStatic != 0, Sticky: v.flags&fdbSticky != 0,
		User: user, Learned: v.flags&fdbLearned != 0, Updated: v.updated,
	}
	if v.dst != nil {
		x.Port = v.dst.port
	}
	return x
}

// Entries returns all entries sorted by port (bridge last), VID and MAC.
func (f *FDB) Entries() []FDBEntry {
	f.mu.Lock()
	var out []FDBEntry
	f.m.each(func(e fdbView) { out = append(out, e.export(f.user[e.key])) })
	f.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		ai, bi := portOrder(a.Port), portOrder(b.Port)
		if ai != bi {
			return ai < bi
		}
		if a.VID != b.VID {
			return a.VID < b.VID
		}
		return string(a.MAC[:]) < string(b.MAC[:])
	})
	return out
}

func portOrder(p *Port) uint64 {
	if p == nil {
		return 1 << 40
	}
	return uint64(p.ID)
}
