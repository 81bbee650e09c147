package l2

// The forwarding database: {MAC, VID} -> destination port-VLAN.
//
// Flow: ingress learns the source (learn), then looks the destination up
// (lookup). Both are lock-free for known entries: a refresh is one atomic
// store of the coarse batch time, and only when it changed. New and moved
// entries take the writer lock with TryLock: if another worker (or the
// control plane, e.g. a resize) holds it, the frame is forwarded without
// learning and LearnSkipped is counted, so a learning storm never stalls
// forwarding. Entries point at their PortVLAN (FwdDst = {pv.port, pv}), so
// a hit needs no VLAN lookup; a move is one atomic store of that pointer.
//
// Entry kinds follow Linux: local/permanent (frames for it go to the host),
// static (never aged, may still move unless sticky), dynamic (aged), and
// learned (dynamic entries made by the datapath; only these count against
// fdb_max_learned, Linux 6.7 semantics). A learned flood at the limit is
// refused, not evicted.
//
// Locking: FDB.mu is the writer lock (lock order: Domain.mu before FDB.mu).

import (
	"sort"
	"sync"
	"sync/atomic"
)

// Entry flags.
const (
	fdbLocal   uint32 = 1 << iota // deliver to host (bridge/port own address, `local`/`permanent`)
	fdbStatic                     // not aged (`static`, and all local entries)
	fdbSticky                     // never moved by learning
	fdbUser                       // added by configuration
	fdbLearned                    // learned by the datapath: counts against the limits
)

// hardMaxLearned bounds learned entries even when fdb_max_learned is 0
// (unlimited in Linux): memory must stay bounded under a MAC flood.
const hardMaxLearned = 1 << 22

type fdbEntry struct {
	key     uint64
	dst     atomic.Pointer[PortVLAN] // nil: the bridge device itself
	flags   atomic.Uint32
	updated atomic.Int64 // coarse clock of the last refresh
}

func (e *fdbEntry) hashKey() uint64 { return e.key }

// FDB is one bridge's forwarding database.
type FDB struct {
	mu sync.Mutex // writer lock
	m  fdbTable

	maxLearned atomic.Uint32 // bridge-wide learned limit, 0 = unlimited
	nLearned   atomic.Int64  // learned entries (changed under mu)

	learned, moved, aged, limitHit atomic.Uint64
}

func (f *FDB) init() { f.m.init() }

// Len returns the number of entries.
func (f *FDB) Len() int { return int(f.m.count.Load()) }

// Learned returns the number of learned entries.
func (f *FDB) Learned() int { return int(f.nLearned.Load()) }

// lookup returns the entry for key, or nil. Lock-free.
func (f *FDB) lookup(key uint64) *fdbEntry { return f.m.get(key) }

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
	if e := f.m.get(key); e != nil {
		fl := e.flags.Load()
		if fl&fdbLocal != 0 {
			return learnIgnored // own address as source: Linux warns and keeps the entry
		}
		if e.updated.Load() != now {
			e.updated.Store(now)
		}
		if e.dst.Load() == pv || fl&fdbSticky != 0 {
			return learnRefreshed
		}
		return f.moveSlow(e, pv, now)
	}
	return f.learnNewSlow(key, pv, now)
}

func (f *FDB) moveSlow(e *fdbEntry, pv *PortVLAN, now int64) learnResult {
	if !f.mu.TryLock() {
		return learnBusy
	}
	defer f.mu.Unlock()
	if f.m.get(e.key) != e {
		return learnIgnored // deleted meanwhile
	}
	old := e.dst.Load()
	if old == pv {
		return learnRefreshed
	}
	if e.flags.Load()&fdbLearned != 0 {
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
	e.dst.Store(pv)
	e.updated.Store(now)
	f.moved.Add(1)
	return learnMoved
}

func (f *FDB) learnNewSlow(key uint64, pv *PortVLAN, now int64) learnResult {
	if !f.mu.TryLock() {
		return learnBusy
	}
	defer f.mu.Unlock()
	if e := f.m.get(key); e != nil {
		return learnRefreshed // another worker won the race
	}
	n := f.nLearned.Load()
	if lim := f.maxLearned.Load(); (lim != 0 && n >= int64(lim)) || n >= hardMaxLearned {
		f.limitHit.Add(1)
		return learnIgnored
	}
	p := pv.port
	if lim := p.maxLearned.Load(); lim != 0 && p.nLearned.Load() >= int64(lim) {
		f.limitHit.Add(1)
		return learnIgnored
	}
	e := &fdbEntry{key: key}
	e.dst.Store(pv)
	e.flags.Store(fdbLearned)
	e.updated.Store(now)
	f.m.putLocked(e)
	f.nLearned.Add(1)
	p.nLearned.Add(1)
	f.learned.Add(1)
	return learnNew
}

// putLocked installs a configured entry (replacing whatever is there).
// Guarded by f.mu.
func (f *FDB) putLocked(key uint64, pv *PortVLAN, flags uint32, now int64) {
	e := &fdbEntry{key: key}
	e.dst.Store(pv)
	e.flags.Store(flags)
	e.updated.Store(now)
	if old := f.m.putLocked(e); old != nil {
		f.forgetLocked(old)
	}
}

// deleteLocked removes key; guarded by f.mu.
func (f *FDB) deleteLocked(key uint64) *fdbEntry {
	e := f.m.deleteLocked(key)
	if e != nil {
		f.forgetLocked(e)
	}
	return e
}

// forgetLocked undoes the learned accounting of an entry leaving the table.
func (f *FDB) forgetLocked(e *fdbEntry) {
	if e.flags.Load()&fdbLearned != 0 {
		f.nLearned.Add(-1)
		if pv := e.dst.Load(); pv != nil {
			pv.port.nLearned.Add(-1)
		}
	}
}

// age deletes dynamic entries not refreshed for ageing ns; returns how many
// were removed and the time until the next entry expires (or ageing if none
// is pending). The scan is lock-free; only deletions take the lock, in
// chunks, so learning keeps going during a scan of a large table.
func (f *FDB) age(now, ageing int64) (n int, next int64) {
	next = ageing
	var victims []*fdbEntry
	f.m.each(func(e *fdbEntry) {
		if e.flags.Load()&fdbStatic != 0 {
			return
		}
		left := e.updated.Load() + ageing - now
		if left <= 0 {
			victims = append(victims, e)
		} else if left < next {
			next = left
		}
	})
	for len(victims) > 0 {
		chunk := victims[:min(len(victims), 1024)]
		victims = victims[len(chunk):]
		f.mu.Lock()
		for _, e := range chunk {
			// Recheck: refreshed or replaced since the scan?
			if f.m.get(e.key) != e || e.updated.Load()+ageing > now {
				continue
			}
			f.deleteLocked(e.key)
			n++
		}
		f.mu.Unlock()
	}
	f.aged.Add(uint64(n))
	return n, next
}

// flushLocked deletes the entries for which match returns true.
func (f *FDB) flushLocked(match func(e *fdbEntry) bool) int {
	var keys []uint64
	f.m.each(func(e *fdbEntry) {
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
	MAC     MAC
	VID     uint16
	Port    *Port // nil: the bridge device itself
	Local   bool  // frames to it are delivered to the host
	Static  bool  // never aged
	Sticky  bool  // never moved by learning
	User    bool  // added by configuration
	Learned bool  // learned by the datapath
	Updated int64 // clock value of the last refresh
}

func (e *fdbEntry) export() FDBEntry {
	fl := e.flags.Load()
	x := FDBEntry{
		MAC: keyMAC(e.key), VID: keyVID(e.key),
		Local: fl&fdbLocal != 0, Static: fl&fdbStatic != 0, Sticky: fl&fdbSticky != 0,
		User: fl&fdbUser != 0, Learned: fl&fdbLearned != 0, Updated: e.updated.Load(),
	}
	if pv := e.dst.Load(); pv != nil {
		x.Port = pv.port
	}
	return x
}

// Entries returns all entries sorted by port (bridge last), VID and MAC.
func (f *FDB) Entries() []FDBEntry {
	var out []FDBEntry
	f.m.each(func(e *fdbEntry) { out = append(out, e.export()) })
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
