package fpm

// Seeding after a restart of netfwd: zebra programs the kernel with the
// same table it streams over FPM, and the kernel keeps it while netfwd is
// away. A new netfwd has no FPM routes until zebra reconnects (its 3 s
// timer) and replays; SeedFromKernel installs the kernel's copy of zebra's
// routes at once, before the first session, as the routes of an earlier
// session that ended: with mark 0, which no session ever gets. So the
// first session's sweep removes those zebra does not replay (after it
// delivered their protocols and went quiet, as for any stale route), a
// replayed identical route only gets its mark refreshed in place (no
// forwarding gap), and StaleTime removes them all if zebra never connects.
//
// Only routes and nexthop objects of zebra's protocols are taken (FRR's
// RTPROT_ZEBRA and the protocols its daemons install with: BGP, OSPF,
// ISIS, static, ...), never proto kernel/boot/static of other programs.
//
// Locking: runs before Serve; the stale timer under mu as endSession's.

import (
	"time"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/rtnl"
)

// seedMark stamps seeded routes: session marks are 1-255.
const seedMark = 0

// zebraProto reports whether FRR's zebra installs kernel routes and
// nexthops with protocol p (FRR's rt_netlink.h: RTPROT_ZEBRA 11, BABEL
// 42, BGP 186 ... SRTE 198).
func zebraProto(p uint8) bool { return p == 11 || p == 42 || p >= 186 && p <= 198 }

// SeedFromKernel installs zebra's routes from the kernel table that c (a
// NETLINK_ROUTE socket in zebra's namespace) dumps; see the file comment.
// Call it before Serve. It returns the number of routes installed.
func (s *Server) SeedFromKernel(c *rtnl.Conn) (int, error) {
	start := time.Now()
	var nhs []rtnl.Nexthop
	err := c.Dump(rtnl.RTM_GETNEXTHOP, rtnl.AF_UNSPEC, func(h rtnl.Header, body []byte) error {
		var n rtnl.Nexthop
		if h.Type == rtnl.RTM_NEWNEXTHOP && n.Decode(body) == nil && zebraProto(n.Protocol) {
			nhs = append(nhs, n)
		}
		return nil
	}, nil)
	if err != nil {
		return 0, err
	}
	var routes []rtnl.Route
	err = c.Dump(rtnl.RTM_GETROUTE, rtnl.AF_INET, func(h rtnl.Header, body []byte) error {
		var r rtnl.Route
		if h.Type == rtnl.RTM_NEWROUTE && r.Decode(body) == nil && zebraProto(r.Protocol) {
			routes = append(routes, r)
		}
		return nil
	}, nil)
	if err != nil || len(routes) == 0 {
		return 0, err
	}
	// Groups name their members by id: members first (the kernel dumps
	// in id order, and a group's members are older than the group).
	tr := NewTranslator(fib.OwnerFPM, seedMark, s.opts.Iface, new(Counters))
	tr.KeepKernelProto = s.opts.KeepKernelProto
	tx := s.opts.FIB.Begin(max(len(routes), 1))
	for i := range nhs {
		tr.NewNexthop(tx, &nhs[i])
	}
	for i := range routes {
		tr.NewRoute(tx, rtnl.NLM_F_CREATE|rtnl.NLM_F_REPLACE, &routes[i])
	}
	tr.Close(tx)
	all, _ := tx.LearnedCount(fib.OwnerFPM, seedMark)
	tx.Commit()
	s.stats.C.RoutesSeeded.Add(uint64(all))
	s.mu.Lock()
	if s.cur == nil && !s.closed && s.opts.StaleTime > 0 && s.stale == nil {
		s.stale = time.AfterFunc(s.opts.StaleTime, s.flushStale)
	}
	s.mu.Unlock()
	s.log.Info("fpm: seeded zebra's routes from the kernel until zebra replays them", "routes", all,
		"kernel_routes", len(routes), "nexthops", len(nhs), "took", time.Since(start).Round(time.Millisecond))
	return all, nil
}
