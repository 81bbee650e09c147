package bench

// Suite `fdb`: FDB lookup and learning cost as the table grows
// from 1K to 1M entries. Impls: `hash256`, the fixed 256-bucket chained
// hash Linux's bridge used before rhashtable, and `fdb`,
// the bridge's salted, resizable, lock-free-read table (l2's FDB), driven
// through the same datapath entry points the bridge uses (internal/fdbbench).
//
// lookup: destination lookups of known stations; the probes cycle through
// 4096 stations drawn at random from all entries (the active set; a
// uniformly random probe over 1M entries measures DRAM, not the table,
// and is reported in extra as lookup_uniform_ns).
// learn: one new station learned (slow path: lock, insert) while the
// oldest is forgotten, so the table stays at its size.

import (
	"fmt"
	"math/rand/v2"

	"github.com/netfwd/netfwd/internal/fdbbench"
	"github.com/netfwd/netfwd/wire"
)

func init() {
	Register(Suite{Name: "fdb", Doc: "FDB lookup/learn at 1K-1M entries: hash256 vs salted resizable table", Run: runFDB})
}

// FDBEntries are the table sizes of the suite.
var FDBEntries = []int{1000, 2000, 3000, 30000, 1000000}

// hash256 is the baseline: 256 buckets, chains, no resizing.
type hash256 struct {
	buckets [256]*h256node
	salt    uint32
}

// h256node mirrors the size of the kernel's entry of that time
// (net_bridge_fdb_entry: chain pointers, destination, address, VLAN, flags,
// timestamps, one 64-byte line before the write-heavy second line), so a
// chain walk touches what the kernel's touched: a line per entry.
type h256node struct {
	next *h256node
	key  uint64
	port int
	_    [40]byte
}

func (h *hash256) bucket(key uint64) *(*h256node) {
	x := uint32(key>>16) ^ uint32(key>>48)<<16 ^ uint32(key&0xffff)
	x ^= h.salt
	x *= 0x9e3779b1
	return &h.buckets[x>>24]
}

func (h *hash256) lookup(key uint64) *h256node {
	for n := *h.bucket(key); n != nil; n = n.next {
		if n.key == key {
			return n
		}
	}
	return nil
}

func (h *hash256) insert(key uint64, port int) {
	if n := h.lookup(key); n != nil {
		n.port = port
		return
	}
	b := h.bucket(key)
	*b = &h256node{key: key, port: port, next: *b}
}

func (h *hash256) delete(key uint64) {
	for p := h.bucket(key); *p != nil; p = &(*p).next {
		if (*p).key == key {
			*p = (*p).next
			return
		}
	}
}

func stationMAC(rng *rand.Rand) wire.MAC {
	x := rng.Uint64()
	return wire.MAC{byte(x)&0xfe | 0x02, byte(x >> 8), byte(x >> 16), byte(x >> 24), byte(x >> 32), byte(x >> 40)}
}

func key(m wire.MAC, vid uint16) uint64 {
	return uint64(m[0])<<56 | uint64(m[1])<<48 | uint64(m[2])<<40 | uint64(m[3])<<32 | uint64(m[4])<<24 | uint64(m[5])<<16 | uint64(vid)
}

// FDBBench is one table filled with n stations, with probe sets.
type FDBBench struct {
	Hash256 bool
	h       *hash256
	fdb     fdbbench.Table
	macs    []wire.MAC // in insertion order (ring: oldest first)
	oldest  int
	active  []wire.MAC // lookup probes
	uniform []wire.MAC
	rng     *rand.Rand
	sink    int
}

// NewFDBBench fills a table with n random stations.
func NewFDBBench(n int, hash256Impl bool) *FDBBench {
	rng := rand.New(rand.NewPCG(uint64(n), 3))
	f := &FDBBench{Hash256: hash256Impl, rng: rng}
	if hash256Impl {
		f.h = &hash256{salt: rng.Uint32()}
	} else {
		// The bridge's learned limit is the table's size, as
		// `link add br0 type bridge fdb_max_learned N` would set it: the
		// default limit (l2.DefaultFDBMaxLearned) would refuse the larger
		// tables' stations.
		f.fdb = fdbbench.New(uint32(n))
	}
	seen := map[wire.MAC]bool{}
	for len(f.macs) < n {
		m := stationMAC(rng)
		if seen[m] {
			continue
		}
		seen[m] = true
		f.macs = append(f.macs, m)
		if f.h != nil {
			// Fill without the presence check (keys are unique): a checked
			// fill of 1M entries into 256 chains takes minutes.
			b := f.h.bucket(key(m, 1))
			*b = &h256node{key: key(m, 1), port: 1, next: *b}
			continue
		}
		f.add(m)
	}
	for i := 0; i < 4096; i++ {
		f.active = append(f.active, f.macs[rng.IntN(n)])
	}
	for i := 0; i < 1<<16; i++ {
		f.uniform = append(f.uniform, f.macs[rng.IntN(n)])
	}
	return f
}

func (f *FDBBench) add(m wire.MAC) {
	if f.h != nil {
		f.h.insert(key(m, 1), 1) // learning: look up, then insert if new
		return
	}
	f.fdb.Learn(m, 1)
}

func (f *FDBBench) del(m wire.MAC) {
	if f.h != nil {
		f.h.delete(key(m, 1))
		return
	}
	f.fdb.Forget(m, 1)
}

func (f *FDBBench) lookup(m wire.MAC) bool {
	if f.h != nil {
		return f.h.lookup(key(m, 1)) != nil
	}
	return f.fdb.Lookup(m, 1)
}

// Lookup does n lookups from the probe set (active stations, or uniform
// over all entries).
func (f *FDBBench) Lookup(n int, uniform bool) {
	set := f.active
	if uniform {
		set = f.uniform
	}
	hit := 0
	for i := 0; i < n; i++ {
		if f.lookup(set[i&(len(set)-1)]) {
			hit++
		}
	}
	f.sink += hit
	if hit != n {
		panic(fmt.Sprintf("fdb bench: %d of %d lookups missed", n-hit, n))
	}
}

// avgProbes is the mean number of buckets read by the active-set lookups.
func (f *FDBBench) avgProbes() float64 {
	n := 0
	for _, m := range f.active {
		n += f.fdb.Probes(m, 1)
	}
	return float64(n) / float64(len(f.active))
}

// Learn learns n new stations, forgetting the oldest each time.
func (f *FDBBench) Learn(n int) {
	for i := 0; i < n; i++ {
		m := stationMAC(f.rng)
		f.del(f.macs[f.oldest])
		f.add(m)
		f.macs[f.oldest] = m
		f.oldest++
		if f.oldest == len(f.macs) {
			f.oldest = 0
		}
	}
}

func runFDB(opts Options) ([]Record, error) {
	opts.Normalize()
	type cell struct {
		n    int
		impl string
		op   string
		f    *FDBBench
	}
	var cells []cell
	var bodies []func(int)
	for _, n := range FDBEntries {
		if opts.Quick && n > 30000 {
			n = 100000 // --quick: building 1M entries takes seconds
		}
		for _, impl := range []string{"hash256", "fdb"} {
			// Separate tables: learning replaces stations the lookups probe.
			fl, fn := NewFDBBench(n, impl == "hash256"), NewFDBBench(n, impl == "hash256")
			cells = append(cells, cell{n, impl, "lookup", fl}, cell{n, impl, "learn", fn})
			bodies = append(bodies, func(k int) { fl.Lookup(k, false) }, fn.Learn)
		}
		opts.Log("fdb: built tables of %d entries", n)
	}
	res := interleaved(opts, bodies)
	var recs []Record
	base := map[[2]any]float64{}
	for i, c := range cells {
		r := res[i]
		rec := Record{Suite: "fdb", Impl: c.impl, Params: map[string]any{"entries": c.n, "op": c.op},
			NsOp: r.NsOp, Mops: r.Mops(), AllocsOp: r.AllocsOp, Extra: map[string]any{}}
		if c.op == "lookup" {
			u := Measure(opts.Duration()/5, func(k int) { c.f.Lookup(k, true) })
			rec.Extra["lookup_uniform_ns"] = round2(u.NsOp)
		}
		if c.impl == "hash256" {
			base[[2]any{c.n, c.op}] = r.NsOp
		} else if b := base[[2]any{c.n, c.op}]; b > 0 {
			rec.Extra["speedup_vs_hash256"] = round2(b / r.NsOp)
		}
		if c.f.fdb != nil {
			rec.Extra["table_entries"] = c.f.fdb.Len()
			if c.op == "lookup" {
				rec.Extra["avg_buckets_probed"] = round2(c.f.avgProbes())
			}
		}
		recs = append(recs, rec)
	}
	return recs, nil
}
