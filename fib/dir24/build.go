package dir24

// Bulk build of a table from a whole prefix set (startup, config
// load, or a rebuild), much faster than a million Set calls.
//
// Flow: bucket the prefixes by length, set the default word from the /0,
// then paint tbl24 from /1 to /24, each prefix overwriting its whole range
// (everything there is shorter, so it loses), with plain stores: the
// structure is not published yet. Prefixes longer than /24 (a few hundred in the Internet table) go
// through the incremental path last.
//
// Locking: none needed until the result is returned; the caller publishes it
// (the FIB swaps an atomic.Pointer).

import (
	"iter"
	"net/netip"
)

// Build returns a structure holding exactly the given (prefix,
// value) pairs, in any order; for a prefix given twice the last value wins.
func Build(routes iter.Seq2[netip.Prefix, uint32]) (*Table, error) {
	type route struct{ addr, ent uint32 }
	var byLen [33][]route
	for p, v := range routes {
		addr, bits, err := prefixBits(p)
		if err != nil {
			return nil, err
		}
		if v > MaxValue {
			return nil, ErrValue
		}
		byLen[bits] = append(byLen[bits], route{addr, plainEntry(v, bits)})
	}
	c := New()
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := byLen[0]; len(d) > 0 {
		c.setDefaultLocked(d[len(d)-1].ent & valueMask)
	}
	t24 := &c.tbl24
	for bits := 1; bits <= 24; bits++ {
		n := uint32(1) << (24 - bits)
		for _, r := range byLen[bits] {
			first := r.addr >> 8
			rng := t24[first:][:n]
			for i := range rng {
				rng[i] = r.ent
			}
		}
	}
	for bits := 25; bits <= 32; bits++ {
		for _, r := range byLen[bits] {
			if err := c.setLocked(r.addr, bits, r.ent); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}
