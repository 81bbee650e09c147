package nexthop

// Nexthop groups (`ip nexthop add id N group A[,W]/B[,W]`) and the
// hash-threshold member selection of Linux (RFC 2992): each live member owns a
// slice of the 31-bit hash space proportional to its weight, so one flow
// (one hash) always maps to the same member while the set of live members is
// unchanged, and a change moves only the flows of the neighbouring slices.
//
// Locking: Members is immutable. The selection table is rebuilt by the writer
// when member liveness changes and published with an atomic store; Select
// loads it once and never locks.

import "sync/atomic"

// MaxWeight is the largest member weight, as in Linux.
const MaxWeight = 256

// Member is one nexthop of a group with its weight (1..MaxWeight).
type Member struct {
	NH     *Nexthop
	Weight uint16
}

// Group is the member list of a group nexthop.
type Group struct {
	Members []Member
	sel     atomic.Pointer[selector]
}

// selector is the immutable selection table over the live members.
type selector struct {
	upper []uint32 // inclusive upper bound of each live member's hash slice
	nhs   []*Nexthop
}

// newGroup builds a group; every member starts live unless marked dead.
func newGroup(members []Member) *Group {
	g := &Group{Members: members}
	g.rebalance()
	return g
}

// rebalance recomputes the selection table from the members' liveness, with
// the kernel's bounds: upper_i = round(W_i<<31 / total) - 1, W_i the running
// sum of live weights. Writer side.
func (g *Group) rebalance() {
	var total uint64
	for _, m := range g.Members {
		if !m.NH.dead.Load() {
			total += uint64(m.Weight)
		}
	}
	s := &selector{}
	if total > 0 {
		var w uint64
		for _, m := range g.Members {
			if m.NH.dead.Load() {
				continue
			}
			w += uint64(m.Weight)
			s.upper = append(s.upper, uint32((w<<31+total/2)/total-1))
			s.nhs = append(s.nhs, m.NH)
		}
	}
	g.sel.Store(s)
}

// Select picks the member for a flow hash. It returns nil when no member is
// live (the FIB does not return such a group while it is dead, but a reader
// holding an old result may race with a link going down).
func (g *Group) Select(hash uint32) *Nexthop {
	s := g.sel.Load()
	h := hash & (1<<31 - 1)
	for i, u := range s.upper {
		if h <= u {
			return s.nhs[i]
		}
	}
	if len(s.nhs) > 0 {
		return s.nhs[len(s.nhs)-1]
	}
	return nil
}

// Live returns the number of live members.
func (g *Group) Live() int { return len(g.sel.Load().nhs) }

// Resolve returns the nexthop that forwards a flow with the given hash: the
// nexthop itself, or the selected member of a group.
func (nh *Nexthop) Resolve(hash uint32) *Nexthop {
	if nh.Group == nil {
		return nh
	}
	return nh.Group.Select(hash)
}
