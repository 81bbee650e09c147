package fib

// Randomized differential tests of the FIB against the reference model:
// random operation streams over a small address space (so local and main
// overlap heavily), every route type, metrics, throw, deletes, addresses,
// link changes and user nexthops; after each step the errors, the dumps of
// every table and the lookups of many probe addresses must agree.

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/netfwd/netfwd/internal/race"
	"github.com/netfwd/netfwd/nexthop"
	"github.com/netfwd/netfwd/wire"
)

var devs = []string{"eth0", "eth1", "eth2", "eth3"}

type gen struct {
	r *rand.Rand
	m *model
}

// addr draws from 10.{0,1}.{0..3}.x: a few hundred addresses, so prefixes
// collide and nest all the time.
func (g *gen) addr() netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(g.r.IntN(2)), byte(g.r.IntN(4)), byte(g.r.IntN(256))})
}

func (g *gen) prefix() netip.Prefix {
	lens := []int{0, 8, 15, 16, 22, 23, 24, 25, 26, 28, 30, 31, 32, 32}
	p, _ := g.addr().Prefix(lens[g.r.IntN(len(lens))])
	return p
}

// gateway picks an address likely to be on a connected subnet.
func (g *gen) gateway() netip.Addr {
	if len(g.m.addrs) > 0 && g.r.IntN(5) > 0 {
		a := g.m.addrs[g.r.IntN(len(g.m.addrs))].Prefix
		b := a.Masked().Addr().As4()
		host := uint32(1)<<(32-a.Bits()) - 1
		off := uint32(g.r.IntN(int(min(host, 1<<20)) + 1))
		v := (uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])) + off
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	return g.addr()
}

func (g *gen) dev() string { return devs[g.r.IntN(len(devs))] }

func (g *gen) routeSpec() RouteSpec {
	s := RouteSpec{Prefix: g.prefix()}
	types := []Type{Unicast, Unicast, Unicast, Unicast, Local, Local, Broadcast, Blackhole, Unreachable, Prohibit, Throw, Throw}
	s.Type = types[g.r.IntN(len(types))]
	s.TypeSet = s.Type != Unicast || g.r.IntN(2) == 0
	switch g.r.IntN(3) {
	case 0:
		s.Table = TableLocal
	case 1:
		s.Table = TableMain
	}
	if g.r.IntN(3) == 0 {
		s.Metric, s.MetricSet = uint32(g.r.IntN(3)*10), true
	}
	switch s.Type {
	case Unicast:
		switch g.r.IntN(8) {
		case 0:
			s.Dev = g.dev()
		case 1:
			if ids := g.m.nhIDs(); len(ids) > 0 {
				s.NhID = ids[g.r.IntN(len(ids))]
			} else {
				s.Dev = g.dev()
			}
		case 2:
			for range 1 + g.r.IntN(3) {
				s.Multipath = append(s.Multipath, Path{Gateway: g.gateway(), Weight: uint16(1 + g.r.IntN(3))})
			}
		case 3:
			s.Gateway, s.Dev, s.OnLink = g.gateway(), g.dev(), true
		default:
			s.Gateway = g.gateway()
			if g.r.IntN(2) == 0 {
				s.Dev = g.dev()
			}
		}
	case Local, Broadcast:
		s.Dev = g.dev()
	}
	if g.r.IntN(10) == 0 && len(g.m.addrs) > 0 {
		s.Src = g.m.addrs[g.r.IntN(len(g.m.addrs))].Prefix.Addr()
	}
	if g.r.IntN(20) == 0 {
		s.Src = g.addr()
	}
	return s
}

func (m *model) nhIDs() []uint32 {
	var ids []uint32
	for id := range m.nhs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (m *model) routesOf(id uint32) []*mroute { return m.tables[id] }

func (g *gen) userSpec() nexthop.UserSpec {
	u := nexthop.UserSpec{ID: uint32(1 + g.r.IntN(8))}
	switch g.r.IntN(6) {
	case 0:
		u.Single.Kind = nexthop.Blackhole
	case 1, 2:
		ids := g.m.nhIDs()
		for range 1 + g.r.IntN(3) {
			if len(ids) == 0 {
				break
			}
			u.Group = append(u.Group, nexthop.GroupMemberSpec{ID: ids[g.r.IntN(len(ids))], Weight: uint16(1 + g.r.IntN(4))})
		}
		if len(u.Group) == 0 {
			u.Single.Dev = g.dev()
		}
	case 3:
		u.Single.Dev = g.dev()
	default:
		u.Single.Gateway, u.Single.Dev = g.gateway(), g.dev()
	}
	return u
}

// op applies one random operation to both and returns a description.
func (g *gen) op(tx *Txn) (string, error, error) {
	m := g.m
	switch k := g.r.IntN(100); {
	case k < 30:
		s := g.routeSpec()
		return fmt.Sprintf("route add %+v", s), tx.AddRoute(s), m.insert(s, modeAdd)
	case k < 36:
		s := g.routeSpec()
		return fmt.Sprintf("route append %+v", s), tx.AppendRoute(s), m.insert(s, modeAppend)
	case k < 42:
		s := g.routeSpec()
		return fmt.Sprintf("route replace %+v", s), tx.ReplaceRoute(s), m.insert(s, modeReplace)
	case k < 45:
		s := g.routeSpec()
		return fmt.Sprintf("route change %+v", s), tx.ChangeRoute(s), m.insert(s, modeChange)
	case k < 58:
		// delete something that exists most of the time
		var s RouteSpec
		ids := []uint32{TableLocal, TableMain}
		l := m.routesOf(ids[g.r.IntN(2)])
		if len(l) > 0 && g.r.IntN(4) > 0 {
			r := l[g.r.IntN(len(l))]
			s = RouteSpec{Prefix: r.prefix, Table: r.table}
			if g.r.IntN(2) == 0 {
				s.Metric, s.MetricSet = r.metric, true
			}
			if g.r.IntN(3) == 0 {
				s.Type, s.TypeSet = r.typ, true
			}
			if g.r.IntN(4) == 0 && r.dev() != "" {
				s.Dev = r.dev()
			}
		} else {
			s = g.routeSpec()
			s.Gateway, s.Dev, s.Multipath, s.NhID, s.OnLink, s.Src = netip.Addr{}, "", nil, 0, false, netip.Addr{}
		}
		return fmt.Sprintf("route del %+v", s), tx.DelRoute(s), m.del(s)
	case k < 72:
		p := g.prefix()
		if p.Bits() < 8 {
			p = netip.PrefixFrom(p.Addr(), 24)
		}
		d := g.dev()
		return fmt.Sprintf("address add %s dev %s", p, d), tx.AddAddress(d, p), m.addAddress(d, p)
	case k < 78:
		if len(m.addrs) > 0 {
			a := m.addrs[g.r.IntN(len(m.addrs))]
			return fmt.Sprintf("address del %s dev %s", a.Prefix, a.Dev), tx.DelAddress(a.Dev, a.Prefix), m.delAddress(a.Dev, a.Prefix)
		}
		return "address del (none)", tx.DelAddress("eth0", g.prefix()), ErrAddrNotFound
	case k < 86:
		d := g.dev()
		up := g.r.IntN(3) > 0
		m.setLink(d, up)
		return fmt.Sprintf("link set %s up=%t", d, up), tx.SetLinkUp(d, up), nil
	case k < 92:
		u := g.userSpec()
		return fmt.Sprintf("nexthop add %+v", u), tx.AddNexthop(u), m.addNH(u)
	case k < 96:
		u := g.userSpec()
		return fmt.Sprintf("nexthop replace %+v", u), tx.ReplaceNexthop(u), m.replaceNH(u)
	default:
		id := uint32(1 + g.r.IntN(8))
		return fmt.Sprintf("nexthop del %d", id), tx.DelNexthop(id), m.delNH(id)
	}
}

// probes: every prefix's first and last address and their neighbours, plus
// random addresses.
func (g *gen) probes() []netip.Addr {
	var ps []netip.Addr
	for _, l := range g.m.tables {
		for _, r := range l {
			first := r.prefix.Addr()
			last := lastAddr(r.prefix)
			ps = append(ps, first, last, first.Prev(), last.Next())
		}
	}
	for range 64 {
		ps = append(ps, g.addr())
	}
	return slices.DeleteFunc(ps, func(a netip.Addr) bool { return !a.IsValid() })
}

func compare(t *testing.T, f *FIB, g *gen, step int, what string) {
	t.Helper()
	m := g.m
	ids := map[uint32]bool{}
	for id, l := range m.tables {
		if len(l) > 0 {
			ids[id] = true
		}
	}
	for id := range f.cur.Load().tables {
		ids[id] = true
	}
	for id := range ids {
		var got []string
		for _, r := range f.Routes(id) {
			got = append(got, routeString(r))
		}
		var want []string
		for _, s := range m.dump() {
			var tid uint32
			fmt.Sscanf(s, "%d|", &tid)
			if tid == id {
				want = append(want, s)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("step %d (%s): table %d differs\n got: %q\nwant: %q", step, what, id, got, want)
		}
	}
	for _, a := range g.probes() {
		nh := f.Lookup(a)
		want := m.lookup(a, mfilter{})
		got := "none"
		if nh != nil {
			got = nhKeyOf(nh)
		}
		w := "none"
		if want != nil {
			w = want.nhKey()
		}
		if got != w {
			t.Fatalf("step %d (%s): Lookup(%s) = %s, model %s (route %v)", step, what, a, got, w, want)
		}
		// The compact forms answer the same nexthop (0 in trie mode).
		wantIdx := uint32(0)
		if f.compiled != nil && nh != nil {
			wantIdx = nh.Index
		}
		if i, i4 := f.lookupIndex(a), f.lookupIndex4(wire.Addr4From(a)); i != wantIdx || i4 != wantIdx {
			t.Fatalf("step %d (%s): lookupIndex(%s) = %d, lookupIndex4 = %d, want %d", step, what, a, i, i4, wantIdx)
		}
		res, ok := f.LookupRoute(a)
		if ok != (want != nil) || ok && routeString(res.Route) != want.String() {
			t.Fatalf("step %d (%s): LookupRoute(%s) = %v, model %v", step, what, a, res.Route, want)
		}
		// Own sources: a local or broadcast /32 route of the local table.
		if v := wire.Addr4From(a); !v.IsZeroNet() {
			lr := m.lookupTable(TableLocal, a, mfilter{ignoreDead: true})
			wantOwn := lr != nil && lr.prefix.Bits() == 32 && (lr.typ == Local || lr.typ == Broadcast)
			if got := f.IsLocalOrBroadcast(v); got != wantOwn {
				t.Fatalf("step %d (%s): IsLocalOrBroadcast(%s) = %v, model %v (route %v)", step, what, a, got, wantOwn, lr)
			}
		}
	}
	if err := f.checkInvariants(); err != nil {
		t.Fatalf("step %d (%s): %v", step, what, err)
	}
}

func TestDifferentialRandom(t *testing.T) {
	seeds := 40
	steps := 300
	if testing.Short() || race.Enabled {
		seeds, steps = 6, 150
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			kind := TrieFast
			if seed%2 == 1 {
				kind = TrieTable
			}
			// Every fourth seed looks up through the compiled structure.
			f := New(Options{Trie: kind, Compiled: seed%4 == 2})
			g := &gen{r: rand.New(rand.NewPCG(uint64(seed), 7)), m: newModel()}
			for step := range steps {
				tx := f.Begin(1)
				what, gotErr, wantErr := g.op(tx)
				tx.Commit()
				if (gotErr != nil) != (wantErr != nil) {
					t.Fatalf("step %d: %s: fib error %v, model error %v", step, what, gotErr, wantErr)
				}
				compare(t, f, g, step, what)
			}
		})
	}
}

// TestDifferentialTransactions runs multi-operation transactions; when any
// operation fails the whole transaction is aborted and both the FIB and the
// model must be exactly as before.
func TestDifferentialTransactions(t *testing.T) {
	seeds := 12
	if testing.Short() || race.Enabled {
		seeds = 3
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			f := New(Options{Compiled: seed%2 == 1})
			g := &gen{r: rand.New(rand.NewPCG(uint64(seed), 99)), m: newModel()}
			for step := range 120 {
				saved := g.m.clone()
				version := f.Version()
				tx := f.Begin(8)
				failed := false
				var log []string
				for range 1 + g.r.IntN(8) {
					what, gotErr, wantErr := g.op(tx)
					log = append(log, what)
					if (gotErr != nil) != (wantErr != nil) {
						t.Fatalf("step %d: %s: fib error %v, model error %v", step, what, gotErr, wantErr)
					}
					if gotErr != nil {
						failed = true
					}
				}
				if failed {
					tx.Abort()
					g.m = saved
					if f.Version() != version {
						t.Fatalf("step %d: aborted transaction changed the version", step)
					}
				} else {
					tx.Commit()
				}
				compare(t, f, g, step, fmt.Sprint(log))
			}
		})
	}
}
