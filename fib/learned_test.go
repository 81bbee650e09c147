package fib

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/netfwd/netfwd/nexthop"
)

// The learned-route model: per (table, prefix) the list of routes with
// their owner, mark and attributes, maintained with the documented rules
// (owner.go, learned.go) in the most direct way.
type lmRoute struct {
	owner  Owner
	mark   uint8
	metric uint32
	typ    Type
	proto  Proto
	nh     string // gateway/dev of a unicast route, "" otherwise
}

type lmKey struct {
	table  uint32
	prefix netip.Prefix
}

type lmodel struct{ lists map[lmKey][]lmRoute }

func (m *lmodel) insertSorted(k lmKey, r lmRoute) {
	l := m.lists[k]
	i := 0
	for i < len(l) && (l[i].metric < r.metric || l[i].metric == r.metric && l[i].owner.rank() <= r.owner.rank()) {
		i++
	}
	m.lists[k] = slices.Insert(slices.Clone(l), i, r)
}

func (m *lmodel) set(k lmKey, r lmRoute, mode LearnedMode) SetResult {
	l := m.lists[k]
	same := func(o lmRoute) bool {
		return o.typ == r.typ && o.proto == r.proto && o.nh == r.nh
	}
	first, last := -1, -1
	for i, o := range l {
		if o.owner == r.owner && o.metric == r.metric {
			if first < 0 {
				first = i
			}
			last = i
			if mode != LearnedReplace && same(o) {
				l[i].mark = r.mark
				return Unchanged
			}
		}
	}
	switch {
	case mode == LearnedReplace && first >= 0:
		if same(l[first]) {
			l[first].mark = r.mark
			return Unchanged
		}
		l = slices.Clone(l)
		l[first] = r
		m.lists[k] = l
		return Replaced
	case mode == LearnedAppend && last >= 0:
		m.lists[k] = slices.Insert(slices.Clone(l), last+1, r)
	case mode == LearnedPrepend && first >= 0:
		m.lists[k] = slices.Insert(slices.Clone(l), first, r)
	default:
		m.insertSorted(k, r)
	}
	return Added
}

func (m *lmodel) del(k lmKey, owner Owner, metric uint32, metricSet bool) bool {
	for i, o := range m.lists[k] {
		if o.owner == owner && (!metricSet || o.metric == metric) {
			m.lists[k] = slices.Delete(slices.Clone(m.lists[k]), i, i+1)
			return true
		}
	}
	return false
}

// configAdd and configDel are `route add|replace|del TYPE P metric M` of
// the configuration (error types only: no nexthop validation to model).
func (m *lmodel) configAdd(k lmKey, r lmRoute, replace bool) error {
	for i, o := range m.lists[k] {
		if o.owner != OwnerConfig || o.metric != r.metric {
			continue
		}
		if !replace {
			return ErrExists
		}
		if o.typ == r.typ && o.proto == r.proto {
			return nil
		}
		l := slices.Clone(m.lists[k])
		l[i] = r
		m.lists[k] = l
		return nil
	}
	m.insertSorted(k, r)
	return nil
}

func (m *lmodel) configDel(k lmKey, typ Type, metric uint32) error {
	other := false
	for i, o := range m.lists[k] {
		if o.typ != typ || metric != 0 && o.metric != metric {
			continue
		}
		if o.owner != OwnerConfig {
			other = true
			continue
		}
		m.lists[k] = slices.Delete(slices.Clone(m.lists[k]), i, i+1)
		return nil
	}
	if other {
		return &ownedError{}
	}
	return ErrNoRoute
}

func (m *lmodel) sweep(owner Owner, keep uint8) int {
	n := 0
	for k, l := range m.lists {
		m.lists[k] = slices.DeleteFunc(slices.Clone(l), func(o lmRoute) bool {
			if o.owner == owner && o.mark != keep {
				n++
				return true
			}
			return false
		})
	}
	return n
}

func (m *lmodel) dump() []string {
	var out []string
	for k, l := range m.lists {
		for _, r := range l {
			out = append(out, fmt.Sprintf("%d %s %s/%d %d %s %s %s", k.table, k.prefix, r.owner, r.mark, r.metric, r.typ, r.proto, r.nh))
		}
	}
	slices.Sort(out)
	return out
}

func dumpLearned(f *FIB) []string {
	var out []string
	f.mu.Lock() // marks are writer-side
	defer f.mu.Unlock()
	for _, t := range f.cur.Load().tables {
		for p, rl := range t.All4() {
			for _, r := range rl.routes {
				nh := ""
				if r.Type == Unicast {
					nh = r.NH.Gateway.String() + "%" + r.NH.Dev
				}
				out = append(out, fmt.Sprintf("%d %s %s/%d %d %s %s %s", r.Table, p, r.Owner, r.Mark, r.Metric, r.Type, r.Proto, nh))
			}
		}
	}
	slices.Sort(out)
	return out
}

// listOrder returns the routes of each prefix in list order, to compare
// orders (the sorted dump above compares contents).
func listOrder(f *FIB) map[lmKey][]string {
	out := map[lmKey][]string{}
	for _, r := range f.Routes(TableAll) {
		k := lmKey{r.Table, r.Prefix}
		out[k] = append(out[k], fmt.Sprintf("%s %d %s %s", r.Owner, r.Metric, r.Type, r.Proto))
	}
	return out
}

func (m *lmodel) listOrder() map[lmKey][]string {
	out := map[lmKey][]string{}
	for k, l := range m.lists {
		for _, r := range l {
			out[k] = append(out[k], fmt.Sprintf("%s %d %s %s", r.owner, r.metric, r.typ, r.proto))
		}
	}
	return out
}

// Random learned and configured operations against the model; after every
// transaction the FIB's lists must equal the model's (contents and order),
// and the FIB's own invariants (reference counts, the merged trie against a
// recomputation from the tables) must hold.
func TestLearnedAgainstModel(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { learnedRound(t, seed) })
	}
}

func learnedRound(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 99))
	f := New(Options{Trie: TrieKind(seed % 2)})
	tx := f.Begin(1)
	for i, a := range []string{"192.0.2.1/24", "198.18.0.1/24"} {
		if err := tx.AddAddress(fmt.Sprintf("eth%d", i), netip.MustParsePrefix(a)); err != nil {
			t.Fatal(err)
		}
	}
	tx.Commit()
	m := &lmodel{lists: map[lmKey][]lmRoute{}}
	for _, rt := range f.Routes(TableAll) { // the derived routes
		k := lmKey{rt.Table, rt.Prefix}
		m.lists[k] = append(m.lists[k], lmRoute{owner: OwnerConfig, metric: rt.Metric, typ: rt.Type, proto: rt.Proto})
		if rt.Type == Unicast {
			m.lists[k][len(m.lists[k])-1].nh = rt.NH.Gateway.String() + "%" + rt.NH.Dev
		}
	}
	prefixes := []netip.Prefix{}
	for _, s := range []string{"0.0.0.0/0", "10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24", "10.1.2.128/25",
		"10.1.2.129/32", "192.0.2.0/24", "192.0.2.1/32", "203.0.113.0/24", "203.0.113.7/32"} {
		prefixes = append(prefixes, netip.MustParsePrefix(s))
	}
	gws := []nexthop.Spec{{Gateway: netip.MustParseAddr("192.0.2.7"), Dev: "eth0"},
		{Gateway: netip.MustParseAddr("198.18.0.9"), Dev: "eth1"}, {Dev: "eth1"}}
	owners := []Owner{OwnerFPM, OwnerKernel}
	marks := map[Owner]uint8{OwnerFPM: 1, OwnerKernel: 1}
	for step := range 300 {
		n := 1 + r.IntN(12)
		hint := n
		if r.IntN(4) == 0 {
			hint = 1000 // bulk mode
		}
		tx := f.Begin(hint)
		for range n {
			k := lmKey{TableMain, prefixes[r.IntN(len(prefixes))]}
			if r.IntN(6) == 0 {
				k.table = TableLocal
			}
			metric := uint32(r.IntN(3) * 10)
			owner := owners[r.IntN(2)]
			switch op := r.IntN(20); {
			case op < 9:
				lr := LearnedRoute{Table: k.table, Prefix: k.prefix, Type: Unicast, Proto: ProtoBGP, Metric: metric}
				mr := lmRoute{owner: owner, mark: marks[owner], metric: metric, typ: Unicast, proto: ProtoBGP}
				if r.IntN(5) == 0 {
					lr.Type, mr.typ = Blackhole, Blackhole
					lr.NH, _ = tx.Nexthops().Implicit(nexthop.Spec{Kind: nexthop.Blackhole})
				} else {
					s := gws[r.IntN(len(gws))]
					lr.NH, _ = tx.Nexthops().Implicit(s)
					mr.nh = s.Gateway.String() + "%" + s.Dev
				}
				if r.IntN(4) == 0 {
					lr.Proto, mr.proto = Proto(12), Proto(12)
				}
				mode := LearnedMode(r.IntN(3))
				got, err := tx.SetLearned(owner, marks[owner], mode, &lr)
				if err != nil {
					t.Fatal(err)
				}
				if want := m.set(k, mr, mode); got != want {
					t.Fatalf("step %d: SetLearned %v %v mode %d: got %d, model %d", step, k, mr, mode, got, want)
				}
			case op < 12:
				metricSet := r.IntN(2) == 0
				got := tx.DelLearned(owner, &LearnedMatch{Table: k.table, Prefix: k.prefix, Metric: metric, MetricSet: metricSet})
				if want := m.del(k, owner, metric, metricSet); got != want {
					t.Fatalf("step %d: DelLearned %v: got %v, model %v", step, k, got, want)
				}
			case op < 16:
				typ := []Type{Blackhole, Unreachable}[r.IntN(2)]
				replace := r.IntN(2) == 0
				s := RouteSpec{Prefix: k.prefix, Table: k.table, Type: typ, TypeSet: true, Metric: metric, MetricSet: true}
				var err error
				if replace {
					err = tx.ReplaceRoute(s)
				} else {
					err = tx.AddRoute(s)
				}
				want := m.configAdd(k, lmRoute{owner: OwnerConfig, metric: metric, typ: typ, proto: ProtoBoot}, replace)
				if !errors.Is(err, want) && (err == nil) != (want == nil) {
					t.Fatalf("step %d: config add %v: got %v, model %v", step, k, err, want)
				}
			case op < 18:
				typ := []Type{Blackhole, Unreachable}[r.IntN(2)]
				err := tx.DelRoute(RouteSpec{Prefix: k.prefix, Table: k.table, Type: typ, TypeSet: true, Metric: metric, MetricSet: true})
				want := m.configDel(k, typ, metric)
				var oe *ownedError
				if (err == nil) != (want == nil) || errors.As(want, &oe) != errors.As(err, &oe) {
					t.Fatalf("step %d: config del %v %s metric %d: got %v, model %v", step, k, typ, metric, err, want)
				}
				if err != nil && !errors.Is(err, ErrNoRoute) {
					t.Fatalf("config del error %v does not match ErrNoRoute", err)
				}
			case op < 19:
				marks[owner]++
			default:
				got := tx.SweepLearned(owner, marks[owner])
				if want := m.sweep(owner, marks[owner]); got != want {
					t.Fatalf("step %d: sweep %s: got %d, model %d", step, owner, got, want)
				}
			}
		}
		tx.Commit()
		if err := f.checkInvariants(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if got, want := dumpLearned(f), m.dump(); !slices.Equal(got, want) {
			t.Fatalf("step %d: routes differ\nfib:   %q\nmodel: %q", step, got, want)
		}
		got, want := listOrder(f), m.listOrder()
		for k, l := range want {
			if !slices.Equal(got[k], l) {
				t.Fatalf("step %d: order at %v: fib %q, model %q", step, k, got[k], l)
			}
		}
	}
}

// A route deleted and added back in one transaction (zebra's update as
// RTM_DELROUTE + RTM_NEWROUTE) must not show lookups a missing route: the
// merged trie's change log, which the compiled structure replays one change
// at a time, holds no deletion of the prefix.
func TestLearnedDeleteAddNoGap(t *testing.T) {
	f := New(Options{Compiled: true})
	p := netip.MustParsePrefix("198.51.100.0/24")
	add := func(tx *Txn, gw string) {
		nh, err := tx.Nexthops().Implicit(nexthop.Spec{Gateway: netip.MustParseAddr(gw), Dev: "eth0"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.SetLearned(OwnerFPM, 1, LearnedPrepend, &LearnedRoute{Prefix: p, Proto: ProtoBGP, Metric: 20, NH: nh}); err != nil {
			t.Fatal(err)
		}
	}
	tx := f.Begin(1)
	add(tx, "192.0.2.1")
	tx.Commit()
	var changes []mergedChange
	f.observe(func(c commitInfo) {
		if !c.rebuild {
			changes = append(changes, c.changes...)
		}
	})
	for _, gw := range []string{"192.0.2.2", "192.0.2.3"} {
		tx = f.Begin(1)
		if !tx.DelLearned(OwnerFPM, &LearnedMatch{Prefix: p, Metric: 20, MetricSet: true}) {
			t.Fatal("route not found")
		}
		add(tx, gw)
		tx.Commit()
	}
	if len(changes) != 2 {
		t.Fatalf("want 2 changes, got %+v", changes)
	}
	for _, c := range changes {
		if c.deleted || c.prefix != p {
			t.Fatalf("change %+v: the prefix was deleted on the way", c)
		}
	}
	if nh := f.Lookup(netip.MustParseAddr("198.51.100.1")); nh == nil || nh.Gateway != netip.MustParseAddr("192.0.2.3") {
		t.Fatalf("lookup: %v", nh)
	}
	if err := f.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

// Configured and learned routes of one prefix: neither side's add, replace
// or delete touches the other's route; at equal metric the configured one
// decides.
func TestLearnedOwnership(t *testing.T) {
	f := New(Options{})
	p := netip.MustParsePrefix("203.0.113.0/24")
	tx := f.Begin(1)
	if err := tx.AddAddress("eth0", netip.MustParsePrefix("192.0.2.1/24")); err != nil {
		t.Fatal(err)
	}
	nh, _ := tx.Nexthops().Implicit(nexthop.Spec{Gateway: netip.MustParseAddr("192.0.2.9"), Dev: "eth0"})
	if _, err := tx.SetLearned(OwnerFPM, 1, LearnedReplace, &LearnedRoute{Prefix: p, Proto: ProtoBGP, Metric: 20, NH: nh}); err != nil {
		t.Fatal(err)
	}
	tx.Commit()
	a := netip.MustParseAddr("203.0.113.5")
	tx = f.Begin(1)
	// A configured add of the same prefix and metric succeeds and wins.
	if err := tx.AddRoute(RouteSpec{Prefix: p, Type: Unreachable, TypeSet: true, Metric: 20, MetricSet: true}); err != nil {
		t.Fatalf("config add beside a learned route: %v", err)
	}
	tx.Commit()
	if nh := f.Lookup(a); nh == nil || nh.Kind != nexthop.Unreachable {
		t.Fatalf("equal metric: the configured route must decide, got %v", nh)
	}
	tx = f.Begin(1)
	if err := tx.DelRoute(RouteSpec{Prefix: p, Type: Unreachable, TypeSet: true}); err != nil {
		t.Fatal(err)
	}
	// Now only the learned route is left: a configured delete refuses it.
	err := tx.DelRoute(RouteSpec{Prefix: p})
	var oe *ownedError
	if !errors.As(err, &oe) || !errors.Is(err, ErrNoRoute) || oe.Route.Owner != OwnerFPM {
		t.Fatalf("config delete of a learned route: %v", err)
	}
	// The learned source cannot delete a configured route either.
	if err := tx.AddRoute(RouteSpec{Prefix: p, Type: Blackhole, TypeSet: true, Metric: 5, MetricSet: true}); err != nil {
		t.Fatal(err)
	}
	if tx.DelLearned(OwnerFPM, &LearnedMatch{Prefix: p, Metric: 5, MetricSet: true}) {
		t.Fatal("a learned delete removed a configured route")
	}
	tx.Commit()
	if got := len(f.Routes(TableMain)); got != 3 { // connected + blackhole + learned
		t.Fatalf("want 3 routes, got %d: %v", got, f.Routes(TableMain))
	}
	if err := f.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

// Abort restores the marks a transaction refreshed.
func TestLearnedAbortRestoresMarks(t *testing.T) {
	f := New(Options{})
	p := netip.MustParsePrefix("203.0.113.0/24")
	set := func(mark uint8) *Txn {
		tx := f.Begin(1)
		if _, err := tx.SetLearned(OwnerKernel, mark, LearnedReplace, &LearnedRoute{Prefix: p, Type: Blackhole,
			NH: must(tx.Nexthops().Implicit(nexthop.Spec{Kind: nexthop.Blackhole}))}); err != nil {
			t.Fatal(err)
		}
		return tx
	}
	set(1).Commit()
	set(2).Abort()
	tx := f.Begin(1)
	if all, marked := tx.LearnedCount(OwnerKernel, 1); all != 1 || marked != 1 {
		t.Fatalf("after abort: %d routes, %d with mark 1", all, marked)
	}
	if n := tx.SweepLearned(OwnerKernel, 1); n != 0 {
		t.Fatalf("sweep removed %d", n)
	}
	tx.Commit()
	if err := f.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

// RemarkLearned moves only the owner's routes of one mark; Abort undoes it.
func TestRemarkLearned(t *testing.T) {
	f := New(Options{})
	set := func(owner Owner, mark uint8, p string) {
		tx := f.Begin(1)
		if _, err := tx.SetLearned(owner, mark, LearnedReplace, &LearnedRoute{Prefix: netip.MustParsePrefix(p),
			Type: Blackhole, NH: must(tx.Nexthops().Implicit(nexthop.Spec{Kind: nexthop.Blackhole}))}); err != nil {
			t.Fatal(err)
		}
		tx.Commit()
	}
	set(OwnerFPM, 1, "203.0.113.0/24")
	set(OwnerFPM, 2, "198.51.100.0/24")
	set(OwnerKernel, 1, "192.0.2.0/24")
	tx := f.Begin(1)
	if n := tx.RemarkLearned(OwnerFPM, 1, 0); n != 1 {
		t.Fatalf("re-marked %d, want 1", n)
	}
	tx.Abort()
	tx = f.Begin(1)
	if all, marked := tx.LearnedCount(OwnerFPM, 1); all != 2 || marked != 1 {
		t.Fatalf("after abort: %d routes, %d with mark 1", all, marked)
	}
	tx.RemarkLearned(OwnerFPM, 1, 0)
	tx.Commit()
	tx = f.Begin(1)
	defer tx.Abort()
	if _, marked := tx.LearnedCount(OwnerFPM, 0); marked != 1 {
		t.Fatalf("%d FPM routes with mark 0, want 1", marked)
	}
	if _, marked := tx.LearnedCount(OwnerKernel, 1); marked != 1 {
		t.Fatal("the kernel mirror's route was re-marked")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
