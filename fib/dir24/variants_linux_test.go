// Alternative layouts measured against the chosen DIR-24-8 (32-bit entries,
// first level on huge pages); docs/fib-compiled.md has the numbers:
//
//	go test -run '^$' -bench 'CompiledVariants' -benchtime 2s ./fib/
//
// Each is converted from a built Table (lookup only, no updates), so they
// answer for the same routes and are checked against it on every probe:
//   - dir24-8-4k: the same arrays, first level on 4 KiB pages (no THP);
//   - dir24-8-16: 16-bit entries (32 MiB first level), values through a
//     small table of distinct values (one more, L1-resident, load);
//   - dir16-8-8: a 2^16 first level (256 KiB, fits L2), 256-entry groups for
//     /17-/24 and again for /25-/32: two or three dependent loads.

package dir24

import (
	"fmt"
	"syscall"
	"testing"
	"unsafe"

	"github.com/netfwd/netfwd/wire"
)

// layout is a lookup-only layout.
type layout interface {
	lookup(addr wire.Addr4) uint32
	lookupBatch(dst []wire.Addr4, out []uint32)
	bytes() int
}

// mmap returns n zeroed T in a fresh anonymous mapping, with or without
// transparent huge pages, so every variant gets the same kind of memory.
func mmap[T any](n int, huge bool) ([]T, func(), error) {
	var zero T
	size := n * int(unsafe.Sizeof(zero))
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, nil, err
	}
	advice := syscall.MADV_NOHUGEPAGE
	if huge {
		advice = syscall.MADV_HUGEPAGE
	}
	if err := syscall.Madvise(mem, advice); err != nil {
		_ = syscall.Munmap(mem)
		return nil, nil, err
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&mem[0])), n), func() { _ = syscall.Munmap(mem) }, nil
}

// dir248x4k is the chosen layout with the first level copied into a
// fresh mapping without huge pages.
type dir248x4k struct {
	c     *Table
	t24   *[tbl24Len]uint32
	close func()
}

func newCplDir248x4k(c *Table) (*dir248x4k, error) {
	t24, done, err := mmap[uint32](tbl24Len, false)
	if err != nil {
		return nil, err
	}
	v := &dir248x4k{c: c, t24: (*[tbl24Len]uint32)(t24), close: done}
	copy(v.t24[:], c.tbl24[:])
	return v, nil
}

func (v *dir248x4k) lookup(a wire.Addr4) uint32 {
	e := v.t24[a>>8]
	if e >= plainBit {
		return e & valueMask
	}
	return v.c.lookupSlow(a)
}

func (v *dir248x4k) lookupBatch(dst []wire.Addr4, out []uint32) {
	out = out[:len(dst)]
	for i, a := range dst {
		out[i] = v.t24[a>>8]
	}
	for i, e := range out {
		if e >= plainBit {
			out[i] = e & valueMask
		} else {
			out[i] = v.c.lookupSlow(dst[i])
		}
	}
}

func (v *dir248x4k) bytes() int { return tbl24Len * 4 }

// dir24816: 16-bit entries; bit 15 marks a group, otherwise the entry is
// an index into vals.
type dir24816 struct {
	t24   *[tbl24Len]uint16
	t8    []uint16
	vals  *[1 << 15]uint32
	close func()
}

func newCplDir24816(c *Table) (*dir24816, error) {
	t24, done, err := mmap[uint16](tbl24Len, true)
	if err != nil {
		return nil, err
	}
	v := &dir24816{t24: (*[tbl24Len]uint16)(t24), vals: new([1 << 15]uint32), close: done}
	slot := map[uint32]uint16{}
	slotOf := func(val uint32) (uint16, error) {
		s, ok := slot[val]
		if !ok {
			if len(slot) == 1<<15 {
				return 0, fmt.Errorf("more than 2^15 distinct values")
			}
			s = uint16(len(slot))
			slot[val] = s
			v.vals[s] = val
		}
		return s, nil
	}
	for i := uint32(0); i < tbl24Len; i++ {
		if !isGroup(c.tbl24[i]) {
			s, err := slotOf(c.valueAt(wire.Addr4(i) << 8))
			if err != nil {
				return nil, err
			}
			v.t24[i] = s
			continue
		}
		g := len(v.t8) / 256
		if g >= 1<<15 {
			return nil, fmt.Errorf("more than 2^15 groups")
		}
		for j := uint32(0); j < 256; j++ {
			s, err := slotOf(c.valueAt(wire.Addr4(i<<8 | j)))
			if err != nil {
				return nil, err
			}
			v.t8 = append(v.t8, s)
		}
		v.t24[i] = 0x8000 | uint16(g)
	}
	return v, nil
}

func (v *dir24816) lookup(a wire.Addr4) uint32 {
	s := v.t24[a>>8]
	if s >= 0x8000 {
		s = v.t8[uint(s&0x7fff)<<8|uint(a&0xff)]
	}
	return v.vals[s&0x7fff]
}

func (v *dir24816) lookupBatch(dst []wire.Addr4, out []uint32) {
	out = out[:len(dst)]
	for i, a := range dst {
		out[i] = uint32(v.t24[a>>8])
	}
	for i, s := range out {
		if s >= 0x8000 {
			s = uint32(v.t8[uint(s&0x7fff)<<8|uint(dst[i]&0xff)])
		}
		out[i] = v.vals[s&0x7fff]
	}
}

func (v *dir24816) bytes() int { return tbl24Len*2 + len(v.t8)*2 + len(v.vals)*4 }

// dir1688: 32-bit entries, bit 31 marks a group; levels 16, 8, 8.
type dir1688 struct {
	t16    *[1 << 16]uint32
	l2, l3 []uint32
	close  func()
}

func newCplDir1688(c *Table) (*dir1688, error) {
	// Count the groups first so level 2 can live in one advised mapping.
	nl2 := 0
	for hi := uint32(0); hi < 1<<16; hi++ {
		if _, ok := uniform(c, hi); !ok {
			nl2++
		}
	}
	l2, done, err := mmap[uint32](nl2*256, true)
	if err != nil {
		return nil, err
	}
	v := &dir1688{t16: new([1 << 16]uint32), l2: l2[:0], close: done}
	for hi := uint32(0); hi < 1<<16; hi++ {
		if val, ok := uniform(c, hi); ok {
			v.t16[hi] = val
			continue
		}
		g2 := uint32(len(v.l2) / 256)
		for mid := uint32(0); mid < 256; mid++ {
			if !isGroup(c.tbl24[hi<<8|mid]) {
				v.l2 = append(v.l2, c.valueAt(wire.Addr4(hi<<16|mid<<8)))
				continue
			}
			g3 := uint32(len(v.l3) / 256)
			for lo := uint32(0); lo < 256; lo++ {
				v.l3 = append(v.l3, c.valueAt(wire.Addr4(hi<<16|mid<<8|lo)))
			}
			v.l2 = append(v.l2, varGroup|g3)
		}
		v.t16[hi] = varGroup | g2
	}
	return v, nil
}

// uniform: a /16 (index hi) whose 256 /24 entries have no group and
// answer the same; with that answer.
func uniform(c *Table, hi uint32) (uint32, bool) {
	first := c.valueAt(wire.Addr4(hi << 16))
	for mid := uint32(0); mid < 256; mid++ {
		if isGroup(c.tbl24[hi<<8|mid]) || c.valueAt(wire.Addr4(hi<<16|mid<<8)) != first {
			return 0, false
		}
	}
	return first, true
}

// varGroup marks a group index in the variants' own entries (which hold
// plain values otherwise).
const varGroup = 1 << 31

func (v *dir1688) lookup(a wire.Addr4) uint32 {
	e := v.t16[a>>16]
	if e >= varGroup {
		e = v.l2[uint(e&valueMask)<<8|uint(a>>8&0xff)]
		if e >= varGroup {
			e = v.l3[uint(e&valueMask)<<8|uint(a&0xff)]
		}
	}
	return e
}

func (v *dir1688) lookupBatch(dst []wire.Addr4, out []uint32) {
	out = out[:len(dst)]
	for i, a := range dst {
		out[i] = v.t16[a>>16]
	}
	for i, e := range out {
		if e >= varGroup {
			out[i] = v.l2[uint(e&valueMask)<<8|uint(dst[i]>>8&0xff)]
		}
	}
	for i, e := range out {
		if e >= varGroup {
			out[i] = v.l3[uint(e&valueMask)<<8|uint(dst[i]&0xff)]
		}
	}
}

func (v *dir1688) bytes() int { return len(v.t16)*4 + len(v.l2)*4 + len(v.l3)*4 }

// tableVariant adapts the real structure.
type tableVariant struct{ c *Table }

func (v tableVariant) lookup(a wire.Addr4) uint32                 { return v.c.Lookup(a) }
func (v tableVariant) lookupBatch(dst []wire.Addr4, out []uint32) { v.c.LookupBatch(dst, out) }
func (v tableVariant) bytes() int                                 { return v.c.Stats().Bytes() }

func layoutVariants(tb testing.TB, c *Table) ([]string, []layout, func()) {
	tb.Helper()
	x4k, err := newCplDir248x4k(c)
	if err != nil {
		tb.Fatal(err)
	}
	x16, err := newCplDir24816(c)
	if err != nil {
		tb.Fatal(err)
	}
	x1688, err := newCplDir1688(c)
	if err != nil {
		tb.Fatal(err)
	}
	return []string{"dir24-8-32", "dir24-8-4k", "dir24-8-16", "dir16-8-8"},
		[]layout{tableVariant{c}, x4k, x16, x1688},
		func() { x4k.close(); x16.close(); x1688.close() }
}

// TestVariants: the measured alternatives answer like the real one
// on the full table (else their numbers would mean nothing).
func TestVariants(t *testing.T) {
	if testing.Short() {
		t.Skip("full table: slow in -short")
	}
	routes := fullTable(t)
	c, err := Build(seq(routes))
	if err != nil {
		t.Fatal(err)
	}
	names, vs, done := layoutVariants(t, c)
	defer done()
	probes := probeAddrs(routes, 1<<18, 4)
	for _, r := range routes {
		if r.p.Bits() > 24 {
			probes = append(probes, edgeAddrs(r.p)...)
		}
	}
	out := make([]uint32, len(probes))
	for k, v := range vs {
		v.lookupBatch(probes, out)
		for i, a := range probes {
			want := c.Lookup(a)
			if got := v.lookup(a); got != want || out[i] != want {
				t.Fatalf("%s: %v: lookup %d, batch %d, want %d", names[k], addrOf(a), got, out[i], want)
			}
		}
		t.Logf("%s: %.1f MiB", names[k], float64(v.bytes())/(1<<20))
	}
}

func BenchmarkVariants(b *testing.B) {
	e := benchSetup(b)
	names, vs, done := layoutVariants(b, e.c)
	defer done()
	// "routed": only addresses inside table prefixes, as real traffic is.
	probeSets := map[string][]wire.Addr4{"random": e.probes, "routed": routedProbes(e.routes, len(e.probes), 3)}
	mask := len(e.probes) - 1
	for _, probe := range []string{"random", "routed"} {
		probes := probeSets[probe]
		for k, v := range vs {
			b.Run("probe="+probe+"/impl="+names[k], func(b *testing.B) {
				var x uint32
				for i := 0; b.Loop(); i++ {
					x += v.lookup(probes[i&mask])
				}
				report(b, x)
			})
			b.Run("probe="+probe+"/impl="+names[k]+"-batch", func(b *testing.B) {
				out := make([]uint32, batchSize)
				var x uint32
				off := 0
				for n := 0; n < b.N; n += batchSize {
					if off+batchSize > len(probes) {
						off = 0
					}
					v.lookupBatch(probes[off:off+batchSize], out)
					x += out[0]
					off += batchSize
				}
				report(b, x)
			})
			b.Run("probe="+probe+"-dep/impl="+names[k], func(b *testing.B) {
				var x uint32
				for i := 0; b.Loop(); i++ {
					x = v.lookup(probes[i&mask] ^ wire.Addr4(x&1))
				}
				report(b, x)
			})
		}
	}
}
