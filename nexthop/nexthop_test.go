package nexthop

import (
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/netfwd/netfwd/wire"
)

func mustAdd(t *testing.T, r *Registry, u UserSpec) *Nexthop {
	t.Helper()
	nh, err := r.Add(u)
	if err != nil {
		t.Fatalf("add %+v: %v", u, err)
	}
	return nh
}

func gw(s string) netip.Addr { return netip.MustParseAddr(s) }

// Hash-threshold: each member gets a share of flows proportional to its
// weight, a flow always maps to the same member, and a dead member's flows
// move while the others' mostly stay.
func TestGroupWeightsAndStability(t *testing.T) {
	r := NewRegistry(nil)
	a := mustAdd(t, r, UserSpec{ID: 1, Single: Spec{Gateway: gw("192.0.2.1"), Dev: "eth0"}})
	b := mustAdd(t, r, UserSpec{ID: 2, Single: Spec{Gateway: gw("192.0.2.2"), Dev: "eth1"}})
	c := mustAdd(t, r, UserSpec{ID: 3, Single: Spec{Gateway: gw("192.0.2.3"), Dev: "eth2"}})
	g := mustAdd(t, r, UserSpec{ID: 10, Group: []GroupMemberSpec{{ID: 1, Weight: 1}, {ID: 2, Weight: 2}, {ID: 3, Weight: 5}}})
	const flows = 80000
	count := map[*Nexthop]int{}
	before := make([]*Nexthop, flows)
	for i := range flows {
		h := FlowHash(FlowKey{Src: wire.Addr4(i) * 2654435761, Dst: 0x0a000001, Proto: 6, SrcPort: uint16(i), DstPort: 443})
		m := g.Resolve(h)
		if m != g.Resolve(h) {
			t.Fatal("same hash, different member")
		}
		before[i] = m
		count[m]++
	}
	for nh, w := range map[*Nexthop]float64{a: 1, b: 2, c: 5} {
		want := flows * w / 8
		if got := float64(count[nh]); math.Abs(got-want) > want*0.05 {
			t.Errorf("member %v got %v flows, want about %v", nh, got, want)
		}
	}
	// eth1 goes down: only b's flows move.
	r.Begin()
	changed := r.SetDevUp("eth1", false)
	r.Commit()
	if len(changed) != 1 || changed[0] != b {
		t.Fatalf("SetDevUp changed %v, want only member 2", changed)
	}
	moved := 0
	for i := range flows {
		h := FlowHash(FlowKey{Src: wire.Addr4(i) * 2654435761, Dst: 0x0a000001, Proto: 6, SrcPort: uint16(i), DstPort: 443})
		m := g.Resolve(h)
		if m == b {
			t.Fatal("dead member selected")
		}
		if before[i] != b && m != before[i] {
			moved++
		}
	}
	if moved > flows/4 {
		t.Errorf("%d flows of live members moved", moved)
	}
	if g.Dead() {
		t.Error("group with live members is dead")
	}
	r.Begin()
	r.SetDevUp("eth0", false)
	changed = r.SetDevUp("eth2", false)
	r.Commit()
	if !g.Dead() || g.Resolve(1) != nil {
		t.Errorf("group with all members down: dead=%t resolve=%v", g.Dead(), g.Resolve(1))
	}
	if len(changed) != 2 {
		t.Errorf("last member down changed %v, want member 3 and the group", changed)
	}
}

// Implicit nexthops are shared per (gateway, dev) and freed with their last
// user; Rollback restores everything, including reference counts.
func TestImplicitSharingAndRollback(t *testing.T) {
	r := NewRegistry(nil)
	s := Spec{Gateway: gw("192.0.2.1"), Dev: "eth0"}
	r.Begin()
	x, _ := r.Implicit(s)
	y, _ := r.Implicit(s)
	r.Commit()
	if x != y || x.Refs() != 2 || r.Len() != 1 {
		t.Fatalf("not shared: %p %p refs %d len %d", x, y, x.Refs(), r.Len())
	}
	r.Begin()
	r.Release(x)
	r.Release(x)
	z, _ := r.Implicit(Spec{Gateway: gw("192.0.2.9"), Dev: "eth0"})
	mustAdd(t, r, UserSpec{ID: 5, Single: Spec{Kind: Blackhole}})
	r.SetDevUp("eth0", false)
	r.Rollback()
	if x.Refs() != 2 || r.Len() != 1 || r.ByID(5) != nil || !r.DevUp("eth0") || z.Refs() != 0 {
		t.Fatalf("rollback left refs %d len %d id5 %v up %t", x.Refs(), r.Len(), r.ByID(5), r.DevUp("eth0"))
	}
	if got, _ := r.Implicit(s); got != x {
		t.Fatal("rolled-back registry lost the shared nexthop")
	}
	if r.ByIndex(x.Index) != x {
		t.Fatal("index does not map back")
	}
}

// A released index is not reused before the grace period: a reader holding
// it from an old snapshot still finds the old nexthop.
func TestIndexGracePeriod(t *testing.T) {
	now := time.Unix(1000, 0)
	r := NewRegistry(func() time.Time { return now })
	a, _ := r.Implicit(Spec{Dev: "eth0"})
	idx := a.Index
	r.Release(a)
	b, _ := r.Implicit(Spec{Dev: "eth1"})
	if b.Index == idx || r.ByIndex(idx) != a {
		t.Fatalf("index %d reused immediately (new %d)", idx, b.Index)
	}
	now = now.Add(indexGrace)
	c, _ := r.Implicit(Spec{Dev: "eth2"})
	if c.Index != idx || r.ByIndex(idx) != c {
		t.Fatalf("index %d not reused after the grace period (got %d)", idx, c.Index)
	}
}

func TestUserValidation(t *testing.T) {
	r := NewRegistry(nil)
	mustAdd(t, r, UserSpec{ID: 1, Single: Spec{Gateway: gw("192.0.2.1"), Dev: "eth0"}})
	mustAdd(t, r, UserSpec{ID: 2, Single: Spec{Kind: Blackhole}})
	mustAdd(t, r, UserSpec{ID: 3, Group: []GroupMemberSpec{{ID: 1}}})
	bad := []UserSpec{
		{ID: 1, Single: Spec{Dev: "eth0"}},                      // exists
		{ID: 4, Single: Spec{Gateway: gw("192.0.2.1")}},         // no dev
		{ID: 4, Group: []GroupMemberSpec{{ID: 3}}},              // nested
		{ID: 4, Group: []GroupMemberSpec{{ID: 9}}},              // missing member
		{ID: 4, Group: []GroupMemberSpec{{ID: 1}, {ID: 1}}},     // duplicate
		{ID: 4, Group: []GroupMemberSpec{{ID: 1}, {ID: 2}}},     // blackhole in multipath
		{ID: 4, Group: []GroupMemberSpec{{ID: 1, Weight: 257}}}, // weight
		{ID: 0, Single: Spec{Dev: "eth0"}},                      // id 0
		{ID: 4, Single: Spec{Kind: Blackhole, Dev: "eth0"}},     // blackhole with dev
		{ID: 4, Single: Spec{Dev: "eth0", OnLink: true}},        // onlink without gateway
	}
	for _, u := range bad {
		if _, err := r.Add(u); err == nil {
			t.Errorf("Add(%+v) succeeded", u)
		}
	}
	if _, err := r.Replace(UserSpec{ID: 3, Single: Spec{Dev: "eth0"}}); err == nil {
		t.Error("replaced a group with a single nexthop")
	}
	// Replacing a member repoints the member and every group containing it.
	reps, err := r.Replace(UserSpec{ID: 1, Single: Spec{Gateway: gw("192.0.2.7"), Dev: "eth0"}})
	if err != nil || len(reps) != 2 || reps[1].New.Group.Members[0].NH != reps[0].New {
		t.Fatalf("replace: %v %+v", err, reps)
	}
	// Deleting the only member deletes the group.
	deleted, _, err := r.Delete(1)
	if err != nil || len(deleted) != 2 || r.ByID(3) != nil {
		t.Fatalf("delete: %v %v", err, deleted)
	}
}

func TestFlowHashSpreads(t *testing.T) {
	buckets := make([]int, 16)
	for i := range 160000 {
		buckets[FlowHash(FlowKey{Src: 0x0a000000 + wire.Addr4(i), Dst: 0x08080808, Proto: 17, SrcPort: 5000, DstPort: 53})>>28]++
	}
	for i, n := range buckets {
		if n < 9000 || n > 11000 {
			t.Errorf("bucket %d has %d of 160000", i, n)
		}
	}
}
