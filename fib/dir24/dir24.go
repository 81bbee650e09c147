package dir24

// The table, its entry encoding and the lock-free lookups.
//
// Layout: tbl24 has one 32-bit entry per /24 (2^24 entries, 64 MiB). A plain
// entry (bit 31 set) holds the answer for its whole /24: the value (nexthop
// index) in the low 24 bits and the length (1..24) of the prefix that
// produced it in bits 24-29. An extended entry (bit 31 clear, nonzero) is the
// index of a 256-entry group in the second-level table, one entry per
// address of that /24, for /24s that contain longer prefixes (plain entries
// of length 1..32). Entry 0, in either level, is "default": no prefix longer
// than /0 covers the address, so the /0's value answers, which lives in one
// versioned word (def) instead of millions of entries: a default-route change
// is one store. The zeroed array with def 0 is the empty table.
//
// A lookup is one load for plain entries; default and extended entries take
// an out-of-line path with one or two more loads from lines already cached.
// The prefix length in every entry is what makes updates incremental (the
// DPDK rte_lpm scheme, see update.go).
//
// Flow: the writer calls Set/Delete (update.go) or Build for a bulk load
// (build.go); datapath readers call Lookup/LookupAddr/LookupBatch.
//
// Locking: readers take no lock. tbl24 is allocated once and never moves; its
// entries, the groups and def are read with atomic loads and written with
// atomic stores, so each load sees a whole entry. The second-level table is
// replaced (copied, then one atomic pointer store) when it grows; a reader
// loads that pointer after the first-level entry, so it always finds the
// group the entry names. Freed groups are reused at once: a reader validates
// the group's tag (owner /24 and generation) before and after reading the
// group entry, and starts over if the group changed hands under it (the
// grace period is that check; see lookupSlow). Writers serialise on mu.

import (
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/netfwd/netfwd/wire"
)

// MaxValue is the largest value an entry holds.
const MaxValue = 1<<24 - 1

// Entry encoding.
const (
	valueMask  = 1<<24 - 1 // value, or group index in an extended entry
	depthShift = 24        // prefix length (1..32) of a plain entry
	depthMask  = 0x3f
	plainBit   = 1 << 31 // plain entry; below it: 0 = default, else a group index
	tbl24Len   = 1 << 24
	groupLen   = 256
)

// Group tags: low 32 bits tagLive|owner /24 while the group is reachable
// from tbl24[owner], 0 while free; high 32 bits a generation counter bumped on
// every allocation and every free.
const tagLive = 1 << 31

// plainEntry builds a plain entry for a prefix of length bits >= 1.
func plainEntry(v uint32, bits int) uint32 { return plainBit | uint32(bits)<<depthShift | v }

// depth is the prefix length an entry stands for (0 for default).
func depth(e uint32) int { return int(e>>depthShift) & depthMask }

// Table is the DIR-24-8 lookup structure. Create it with New or
// Build; the zero value is not usable.
type Table struct {
	// groups is the current second-level table (see level2).
	groups atomic.Pointer[level2]
	// def is generation<<32 | the /0's value (0: no /0). Readers use the
	// generation to tell that it did not change while they looked.
	def atomic.Uint64

	mu sync.Mutex
	// free holds group indices released by collapses, reused LIFO. Guarded by mu.
	free []uint32
	// used is the number of group slots ever handed out, index 0 included
	// (never used: entry 0 means default). Indices below it are live or
	// free; above it never reached by any reader. Guarded by mu.
	used uint32

	_ [0]uint64 // tbl24 8-byte aligned: the writer stores entry pairs (store2)
	// tbl24 is part of the object (one load less per lookup than a
	// pointer to it) and last, so the garbage collector's scan of the
	// object ends before it. Entries: atomic loads by readers, atomic
	// stores by the writer (under mu).
	tbl24 [tbl24Len]uint32
}

// level2 is the second-level table: group g owns entries
// [g*256, g*256+256) and tags[g]. Entries are plain or default, never
// extended. The writer stores entries and tags atomically; a grown copy is
// published with one atomic store, after which the old copy is never written
// again.
type level2 struct {
	entries []uint32
	tags    []uint64
}

// New returns an empty structure (every lookup answers 0).
func New() *Table { return newTable(initialGroups) }

// initialGroups is the initial second-level capacity: the full Internet
// table needs ~450 groups.
const initialGroups = 64

func newTable(groupCap int) *Table {
	c := new(Table)
	adviseHugePages(c.tbl24[:])
	c.groups.Store(newLevel2(max(groupCap, 2)))
	c.used = 1
	return c
}

func newLevel2(n int) *level2 {
	return &level2{entries: make([]uint32, n*groupLen), tags: make([]uint64, n)}
}

// Lookup returns the value of the longest prefix containing addr, 0 if
// none. Lock-free, no allocation.
//
// Inlinable (cost exactly at the budget of 80: keep this shape and the named
// result; TestLookupInlines checks).
func (c *Table) Lookup(addr wire.Addr4) (v uint32) {
	v = atomic.LoadUint32(&c.tbl24[addr>>8])
	if v >= plainBit {
		return v & valueMask
	}
	return c.lookupSlow(addr)
}

// LookupAddr is Lookup for a netip.Addr; addresses that are not IPv4 answer 0.
func (c *Table) LookupAddr(addr netip.Addr) uint32 {
	if !addr.Is4() {
		return 0
	}
	return c.Lookup(wire.Addr4From(addr))
}

// lookupSlow answers for addr when its tbl24 entry is (or was, a moment ago)
// default or extended. It reloads the entry itself: keeping Lookup's call
// small keeps Lookup inlinable, and the line is in L1 by now.
//
// Extended: the group may be freed and handed to another /24 between the
// load of the tbl24 entry and the read of the group (a stale entry). The
// group's tag names its owner /24 and changes generation on every free and
// allocation; reading the tag before and after the entry, both equal and
// naming our /24, proves the group belonged to our /24 for the whole read, so
// the entry is a value our address had at that moment. Otherwise we start
// over. This seqlock check is the grace period: a freed group can be reused
// at once. (The 32-bit generation would have to wrap, 2^32 allocations and
// frees of one group, between a reader's two tag loads to fool it.)
//
// The table pointer is loaded after the tbl24 entry: the writer publishes a
// grown table before storing any entry that names a group in it, so the group
// is in the table we load.
//
// Default: the answer is def's value, but def and the entry are two words.
// Reading def before and after the entry (or group entry), unchanged,
// proves the default had that value at the moment the entry said "default".
//
// The loop ends as soon as the writer is not changing this /24's group or
// the default at that instant; a structure that broke its invariants (an
// extended entry naming a group tagged for another /24 for good) would spin
// here, which checkInvariants in the tests rules out.
func (c *Table) lookupSlow(addr wire.Addr4) uint32 {
	for {
		d1 := c.def.Load()
		e := atomic.LoadUint32(&c.tbl24[addr>>8])
		if e >= plainBit {
			return e & valueMask
		}
		if e != 0 {
			v, ok := c.groups.Load().read(e, addr)
			if !ok {
				continue
			}
			if v >= plainBit {
				return v & valueMask
			}
		}
		if d2 := c.def.Load(); d1 == d2 {
			return uint32(d1) & valueMask
		}
	}
}

// read returns addr's entry (plain or default) from the group that the
// extended entry e names, and whether that group belonged to addr's /24 for
// the whole read (see lookupSlow). t must have been loaded after e.
func (t *level2) read(e uint32, addr wire.Addr4) (uint32, bool) {
	g := uint(e & valueMask)
	tag := &t.tags[g]
	t1 := atomic.LoadUint64(tag)
	v := atomic.LoadUint32(&t.entries[g*groupLen+uint(addr&0xff)])
	t2 := atomic.LoadUint64(tag)
	return v, t1 == t2 && uint32(t1) == tagLive|uint32(addr>>8)
}

// LookupBatch looks up every address of dst and writes the values to
// out[:len(dst)]; out must have room for len(dst) values and must not
// overlap dst. It loads the first-level entries of the whole batch before
// resolving any of them, so the cache misses of a packet vector overlap
// instead of queueing behind each other (the VPP/DPDK vector idea); the
// second pass runs over the batch in L1 without unpredictable branches.
// Lock-free, no allocation. Each answer is what Lookup would have returned
// at some moment during the call.
func (c *Table) LookupBatch(dst []wire.Addr4, out []uint32) {
	out = out[:len(dst)]
	t24 := &c.tbl24
	// The default protocol of lookupSlow, once for the whole batch: every
	// entry is loaded between d1 and the final load of def.
	d1 := c.def.Load()
	for i, a := range dst {
		out[i] = atomic.LoadUint32(&t24[a>>8])
	}
	dval := uint32(d1) & valueMask
	t := c.groups.Load() // after every first-level load: see lookupSlow
	for i, e := range out {
		if isGroup(e) { // rare: /24s holding prefixes longer than /24
			v, ok := t.read(e, dst[i])
			switch {
			case !ok:
				v = c.lookupSlow(dst[i])
			case v == 0:
				v = dval
			default:
				v &= valueMask
			}
			out[i] = v
			continue
		}
		v := e & valueMask
		if e == 0 {
			v = dval
		}
		out[i] = v
	}
	if c.def.Load() != d1 {
		// The default changed during the batch (rare): answer again.
		for i, a := range dst {
			out[i] = c.Lookup(a)
		}
	}
}

// Stats reports the memory of a Table.
type Stats struct {
	Tbl24Bytes int // first level: fixed 64 MiB
	GroupBytes int // second level incl. tags, allocated capacity
	Groups     int // live groups (/24s holding prefixes longer than /24)
	FreeGroups int // released groups waiting for reuse
	GroupCap   int // group slots allocated
}

// Bytes is the total memory held.
func (s Stats) Bytes() int { return s.Tbl24Bytes + s.GroupBytes }

// Stats reports memory usage.
func (c *Table) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.groups.Load()
	return Stats{
		Tbl24Bytes: tbl24Len * 4,
		GroupBytes: len(t.entries)*4 + len(t.tags)*8,
		Groups:     int(c.used) - 1 - len(c.free),
		FreeGroups: len(c.free),
		GroupCap:   len(t.tags) - 1,
	}
}
