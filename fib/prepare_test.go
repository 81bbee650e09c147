package fib

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/netfwd/netfwd/nexthop"
)

// Batches applied through BeginPrepared (clones made before the batch,
// sometimes made stale by a commit in between) leave the FIB exactly as the
// same batches through Begin: routes, merged trie, counts and references;
// and the published state a clone was made from never changes.
func TestBeginPreparedMatchesBegin(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	plain, prep := New(Options{}), New(Options{})
	for _, f := range []*FIB{plain, prep} {
		tx := f.Begin(1)
		if err := tx.AddAddress("eth0", netip.MustParsePrefix("192.0.2.1/24")); err != nil {
			t.Fatal(err)
		}
		tx.Commit()
	}
	prefix := func() netip.Prefix {
		a := netip.AddrFrom4([4]byte{10, byte(rng.IntN(4)), byte(rng.IntN(256)), 0})
		p, _ := a.Prefix(16 + rng.IntN(9))
		return p
	}
	type op struct {
		p   netip.Prefix
		gw  string
		del bool
	}
	apply := func(f *FIB, tx *Txn, ops []op) {
		for _, o := range ops {
			if o.del {
				tx.DelLearned(OwnerFPM, &LearnedMatch{Prefix: o.p, Metric: 20, MetricSet: true})
				continue
			}
			nh, err := tx.Nexthops().Implicit(nexthop.Spec{Gateway: netip.MustParseAddr(o.gw), Dev: "eth0"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.SetLearned(OwnerFPM, 1, LearnedReplace, &LearnedRoute{Prefix: o.p, Proto: ProtoBGP, Metric: 20, NH: nh}); err != nil {
				t.Fatal(err)
			}
		}
		tx.Commit()
	}
	var prepared *Prepared
	used := 0
	for step := 0; step < 60; step++ {
		n := 1 + rng.IntN(400)
		ops := make([]op, n)
		for i := range ops {
			ops[i] = op{p: prefix(), gw: fmt.Sprintf("192.0.2.%d", 10+rng.IntN(3)), del: rng.IntN(4) == 0}
		}
		if step%7 == 3 { // a small commit in between: the clones are stale
			for _, f := range []*FIB{plain, prep} {
				apply(f, f.Begin(1), ops[:1])
			}
		}
		hint := n
		if rng.IntN(2) == 0 {
			hint = 1 << 20 // in place
		}
		apply(plain, plain.Begin(hint), ops)
		before := prep.cur.Load()
		beforeMerged := maps.Collect(before.merged.all())
		tx := prep.BeginPrepared(hint, prepared)
		if prepared != nil && tx.bulk && prepared.version == tx.base.version {
			used++
		}
		apply(prep, tx, ops)
		if got := maps.Collect(before.merged.all()); !maps.Equal(got, beforeMerged) {
			t.Fatalf("step %d: the published state changed under a prepared transaction", step)
		}
		prepared = prep.PrepareInPlace(TableMain, TableLocal)
		if err := prep.checkInvariants(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		a, b := plain.Routes(TableMain), prep.Routes(TableMain)
		if len(a) != len(b) {
			t.Fatalf("step %d: %d routes, with prepared clones %d", step, len(a), len(b))
		}
		for i := range a {
			if a[i].Prefix != b[i].Prefix || a[i].NH.String() != b[i].NH.String() {
				t.Fatalf("step %d: route %d: %v via %v, with prepared clones %v via %v", step, i, a[i].Prefix, a[i].NH, b[i].Prefix, b[i].NH)
			}
		}
		ma, mb := maps.Collect(plain.cur.Load().merged.all()), maps.Collect(prep.cur.Load().merged.all())
		if len(ma) != len(mb) {
			t.Fatalf("step %d: merged trie %d prefixes, with prepared clones %d", step, len(ma), len(mb))
		}
		for p, nh := range ma {
			if mb[p] == nil || mb[p].String() != nh.String() {
				t.Fatalf("step %d: merged %v -> %v, with prepared clones %v", step, p, nh, mb[p])
			}
		}
	}
	if used < 10 {
		t.Errorf("only %d batches used prepared clones", used)
	}
}
