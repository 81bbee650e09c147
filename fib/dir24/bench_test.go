// Benchmarks of the compiled FIB on the full Internet table (901,899 IPv4
// prefixes), with bart's raw lookups on the same routes and probes as the
// baseline of the same run:
//
//	go test -run '^$' -bench 'Table' -benchtime 2s ./fib/
//
// Probes: "hot" is one address over and over (bart's own benchmark style);
// "random" walks 2M shuffled addresses (half inside random table prefixes,
// half uniformly random), so every lookup is cache-cold; "random-dep" is the
// same walk where each address depends on the previous answer, which
// serialises the lookups and shows latency instead of throughput.

package dir24

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gaissmai/bart"
	"github.com/netfwd/netfwd/wire"
)

// batchSize is a VPP frame; DPDK bursts are 32.
const batchSize = 256

type benchEnv struct {
	routes []testRoute
	c      *Table
	fast   *bart.Fast[uint32]
	table  *bart.Table[uint32]
	probes []wire.Addr4 // len a power of two
	addrs  []netip.Addr // the same probes for bart
	hot    wire.Addr4
}

var (
	benchOnce sync.Once
	benchE    *benchEnv
)

func benchSetup(b *testing.B) *benchEnv {
	b.Helper()
	routes := fullTable(b)
	benchOnce.Do(func() {
		e := &benchEnv{routes: routes, fast: new(bart.Fast[uint32]), table: new(bart.Table[uint32])}
		var err error
		if e.c, err = Build(seq(routes)); err != nil {
			panic(err)
		}
		for _, r := range routes {
			e.fast.Insert(r.p, r.v)
			e.table.Insert(r.p, r.v)
		}
		e.probes = probeAddrs(routes, 1<<21, 2)
		e.addrs = make([]netip.Addr, len(e.probes))
		for i, a := range e.probes {
			e.addrs[i] = addrOf(a)
		}
		// The hot address: inside a /24 of the table, as a busy flow's
		// destination would be.
		for _, r := range routes[len(routes)/2:] {
			if r.p.Bits() == 24 {
				e.hot = u32(r.p.Addr()) | 77
				break
			}
		}
		benchE = e
	})
	return benchE
}

func BenchmarkLookup(b *testing.B) {
	e := benchSetup(b)
	mask := len(e.probes) - 1
	hotAddr := addrOf(e.hot)
	for _, probe := range []string{"hot", "random", "random-dep"} {
		b.Run("probe="+probe+"/impl=compiled", func(b *testing.B) {
			var x uint32
			switch probe {
			case "hot":
				for b.Loop() {
					x += e.c.Lookup(e.hot)
				}
			case "random":
				for i := 0; b.Loop(); i++ {
					x += e.c.Lookup(e.probes[i&mask])
				}
			case "random-dep":
				for i := 0; b.Loop(); i++ {
					x = e.c.Lookup(e.probes[i&mask] ^ wire.Addr4(x&1))
				}
			}
			report(b, x)
		})
		if probe == "random-dep" {
			b.Run("probe="+probe+"/impl=bart-fast-raw", func(b *testing.B) {
				var x uint32
				for i := 0; b.Loop(); i++ {
					x, _ = e.fast.Lookup(addrOf(e.probes[i&mask] ^ wire.Addr4(x&1)))
				}
				report(b, x)
			})
			continue
		}
		for _, bs := range []int{batchSize, 32} {
			name := "compiled-batch"
			if bs != batchSize {
				name = fmt.Sprintf("compiled-batch%d", bs)
			}
			b.Run("probe="+probe+"/impl="+name, func(b *testing.B) {
				src := e.probes
				if probe == "hot" {
					src = make([]wire.Addr4, bs)
					for i := range src {
						src[i] = e.hot
					}
				}
				out := make([]uint32, bs)
				var x uint32
				off := 0
				for n := 0; n < b.N; n += bs {
					if off+bs > len(src) {
						off = 0
					}
					e.c.LookupBatch(src[off:off+bs], out)
					x += out[0]
					off += bs
				}
				report(b, x)
			})
		}
		b.Run("probe="+probe+"/impl=bart-fast-raw", func(b *testing.B) {
			var x uint32
			for i := 0; b.Loop(); i++ {
				a := hotAddr
				if probe == "random" {
					a = e.addrs[i&mask]
				}
				v, _ := e.fast.Lookup(a)
				x += v
			}
			report(b, x)
		})
		b.Run("probe="+probe+"/impl=bart-table-raw", func(b *testing.B) {
			var x uint32
			for i := 0; b.Loop(); i++ {
				a := hotAddr
				if probe == "random" {
					a = e.addrs[i&mask]
				}
				v, _ := e.table.Lookup(a)
				x += v
			}
			report(b, x)
		})
	}
}

var sinkValue uint32

func report(b *testing.B, x uint32) {
	sinkValue += x
	if ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N); ns > 0 {
		b.ReportMetric(1e3/ns, "Mlps")
	}
}

// BenchmarkUpdate times single route changes on the full table, each
// one on its own, and reports median and p99 per kind of change: add a
// prefix the table lacks, delete it again, replace the value of a present
// prefix. Parents for deletes come from bart outside the timed section (the
// FIB writer gets them from its trie).
func BenchmarkUpdate(b *testing.B) {
	e := benchSetup(b)
	for _, bits := range []int{32, 24, 16, 8, 0} {
		b.Run(fmt.Sprintf("len=%d", bits), func(b *testing.B) {
			absent, present := updateTargets(e, bits)
			var add, del, repl []time.Duration
			for i := 0; b.Loop(); i++ {
				if len(absent) > 0 {
					p := absent[i%len(absent)]
					pp, pv, ok := e.fast.LookupPrefixLPM(p)
					t0 := time.Now()
					_ = e.c.Set(p, 4001)
					t1 := time.Now()
					_ = e.c.Delete(p, pp, pv, ok)
					t2 := time.Now()
					add, del = append(add, t1.Sub(t0)), append(del, t2.Sub(t1))
				}
				if len(present) > 0 {
					r := present[i%len(present)]
					t0 := time.Now()
					_ = e.c.Set(r.p, r.v+1)
					t1 := time.Now()
					_ = e.c.Set(r.p, r.v) // restore
					repl = append(repl, t1.Sub(t0))
				}
			}
			reportLatency(b, "add", add)
			reportLatency(b, "del", del)
			reportLatency(b, "replace", repl)
		})
	}
}

// updateTargets picks prefixes of one length: absent from the table (to
// add and delete) and present (to change).
func updateTargets(e *benchEnv, bits int) ([]netip.Prefix, []testRoute) {
	rng := rand.New(rand.NewPCG(uint64(bits), 5))
	var absent []netip.Prefix
	for tries := 0; len(absent) < 4096 && tries < 1<<16; tries++ {
		p := netip.PrefixFrom(addrOf(wire.Addr4(rng.Uint32())), bits).Masked()
		if _, ok := e.fast.Get(p); !ok && !slices.Contains(absent, p) {
			absent = append(absent, p)
		}
	}
	var present []testRoute
	for _, r := range e.routes {
		if r.p.Bits() == bits {
			present = append(present, r)
		}
	}
	rng.Shuffle(len(present), func(i, j int) { present[i], present[j] = present[j], present[i] })
	return absent, present[:min(len(present), 4096)]
}

func reportLatency(b *testing.B, kind string, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds()), kind+"-p50-ns")
	b.ReportMetric(float64(d[len(d)*99/100].Nanoseconds()), kind+"-p99-ns")
}

// BenchmarkBuild: bulk build of the full table from a slice, with
// bart's inserts of the same routes for scale; reports the memory held.
func BenchmarkBuild(b *testing.B) {
	routes := fullTable(b)
	b.Run("impl=compiled", func(b *testing.B) {
		var c *Table
		for b.Loop() {
			var err error
			if c, err = Build(seq(routes)); err != nil {
				b.Fatal(err)
			}
		}
		s := c.Stats()
		b.ReportMetric(float64(s.Bytes())/(1<<20), "MiB")
		b.ReportMetric(float64(s.Groups), "groups")
	})
	b.Run("impl=bart-fast", func(b *testing.B) {
		for b.Loop() {
			f := new(bart.Fast[uint32])
			for _, r := range routes {
				f.Insert(r.p, r.v)
			}
		}
	})
}

// BenchmarkMemory measures the heap a built table holds (Go's own
// accounting, after GC), compiled and bart, as MiB and bytes per route.
func BenchmarkMemory(b *testing.B) {
	routes := fullTable(b)
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	for _, impl := range []string{"compiled", "bart-fast", "bart-table"} {
		b.Run("impl="+impl, func(b *testing.B) {
			var held uint64
			for b.Loop() {
				before := heap()
				var keep any
				switch impl {
				case "compiled":
					c, err := Build(seq(routes))
					if err != nil {
						b.Fatal(err)
					}
					keep = c
				case "bart-fast":
					f := new(bart.Fast[uint32])
					for _, r := range routes {
						f.Insert(r.p, r.v)
					}
					keep = f
				case "bart-table":
					t := new(bart.Table[uint32])
					for _, r := range routes {
						t.Insert(r.p, r.v)
					}
					keep = t
				}
				held = heap() - before
				runtime.KeepAlive(keep)
			}
			b.ReportMetric(float64(held)/(1<<20), "MiB")
			b.ReportMetric(float64(held)/float64(len(routes)), "B/route")
		})
	}
}
