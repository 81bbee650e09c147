package fib

// The slow path: a rule-order lookup over the per-table route tries, with the
// full route as configured. It is the kernel's fib_lookup over fib_table_lookup
// (local, then main; longest prefix first; within a prefix the first route that
// passes the filters; a throw continues with the next table), and it must
// agree with the merged trie's one-pointer answer on every address.
// `route get`, gateway validation and the tests use it.
//
// Locking: reads one state; lock-free on published states.

import (
	"net/netip"

	"github.com/netfwd/netfwd/nexthop"
	"github.com/netfwd/netfwd/wire"
)

type lookupFilter struct {
	minScope   Scope  // skip routes of wider scope (the kernel's flowi4_scope)
	dev        string // only routes through this device (flowi4_oif)
	ignoreDead bool   // FIB_LOOKUP_IGNORE_LINKSTATE
	table      uint32 // with onlyTable: look in this table alone
	onlyTable  bool
}

// lookupTables returns the deciding route for a in one table
// (f.onlyTable), or by the rule walk for a flow that has only the
// destination and the filter's device as output interface; nil: no route,
// or a rule's action decided.
func (s *state) lookupTables(a netip.Addr, f lookupFilter, devIndex func(string) uint32) *Route {
	if f.onlyTable {
		r := lookupTable(s.tables[f.table], a, f)
		if r != nil && r.Type == Throw {
			return nil
		}
		return r
	}
	if !a.Is4() {
		return nil
	}
	// The router's own lookup: iif lo; a device in a VRF gives the flow the
	// VRF's l3mdev (l3mdev_update_flow, for fib_check_nh_v4_gw's lookup).
	k := Flow{Dst: wire.Addr4From(a), OIF: devIndex(f.dev), IIF: 1, L3mdev: s.vrfTable(f.dev)}
	return walkSlow(s.rules.list, s.tables, &k, f, devIndex).route
}

func lookupTable(t *routeTrie, a netip.Addr, f lookupFilter) *Route {
	if t == nil || !a.Is4() {
		return nil
	}
	for _, rl := range t.Supernets(netip.PrefixFrom(a, 32)) {
		for _, r := range rl.routes {
			if r.Scope < f.minScope {
				continue
			}
			if !r.Type.hasNexthop() {
				return r // error types and throw answer regardless of device and state
			}
			if !f.ignoreDead && r.dead() {
				continue
			}
			if f.dev != "" && (r.NH == nil || r.NH.Dev != f.dev) {
				continue
			}
			return r
		}
	}
	return nil
}

func (tx *Txn) lookupSlow(a netip.Addr, f lookupFilter) *Route {
	return tx.next.lookupTables(a, f, tx.f.DevIndex)
}

// Result is the answer of LookupRoute: the route that decided, and for
// forwarding routes the nexthop that a flow with hash 0 takes and the source
// address the router would use.
type Result struct {
	// Route is the deciding route; when a rule's action decided (blackhole,
	// prohibit) it is a route of that type with no prefix and table 0.
	Route *Route
	// NH is the route's nexthop, resolved to one member for groups.
	NH      *nexthop.Nexthop
	Prefsrc netip.Addr
	// Rule is the rule that decided (a copy); RuleSet is false when no
	// rule did (no route).
	Rule    Rule
	RuleSet bool
	// Table is the table the route came from.
	Table uint32
}

// FlowQuery is a `route get` with selectors: what the kernel's
// inet_rtm_getroute puts in its flow. IIF empty is an output lookup (the
// router's own packet: iif lo); with IIF, an input lookup.
type FlowQuery struct {
	Dst, Src     netip.Addr
	IIF, OIF     string
	Mark         uint32
	TOS, Proto   uint8
	SPort, DPort uint16
	// VRF is `route get ... vrf NAME`: the lookup in that VRF (the kernel
	// makes the VRF device the output interface). Without it, an IIF or
	// OIF enslaved to a VRF puts the lookup in that VRF, with the VRF
	// device as the input interface, as Linux's l3mdev does.
	VRF string
}

// LookupRoute answers like `ip route get`: the full route as configured.
// ok is false when there is no route. Lock-free.
func (f *FIB) LookupRoute(dst netip.Addr) (Result, bool) { return f.LookupRouteOIF(dst, "") }

// LookupRouteOIF is LookupRoute restricted to routes through device oif
// ("" = any), as `ip route get ADDR oif D` asks the kernel (flowi4_oif:
// routes through other devices are skipped, a shorter prefix may answer).
func (f *FIB) LookupRouteOIF(dst netip.Addr, oif string) (Result, bool) {
	return f.LookupRouteFlow(FlowQuery{Dst: dst, OIF: oif})
}

// LookupRouteFlow is LookupRoute for a flow with selectors: the rule walk
// (the reference one, which also names the rule), then the route's
// nexthop and source. ok is false when the answer is "network unreachable"
// (no route, or a rule's unreachable).
func (f *FIB) LookupRouteFlow(q FlowQuery) (Result, bool) {
	s := f.cur.Load()
	if !q.Dst.Is4() {
		return Result{}, false
	}
	k := Flow{Dst: wire.Addr4From(q.Dst), OIF: f.DevIndex(q.OIF), Mark: q.Mark, TOS: q.TOS, Proto: q.Proto,
		SPort: q.SPort, DPort: q.DPort, IIF: 1}
	if q.IIF != "" {
		k.IIF = f.DevIndex(q.IIF)
	}
	switch {
	case q.VRF != "":
		t, ok := s.vrfs[q.VRF]
		if !ok {
			return Result{}, false
		}
		k.L3mdev, k.OIF = t, f.DevIndex(q.VRF)
	case s.devVRF[q.IIF] != "":
		k.IIF = f.DevIndex(s.devVRF[q.IIF])
		k.L3mdev = s.vrfs[s.devVRF[q.IIF]]
	case s.devVRF[q.OIF] != "":
		k.L3mdev = s.vrfs[s.devVRF[q.OIF]]
	}
	if q.Src.Is4() {
		k.Src = wire.Addr4From(q.Src)
	}
	d := walkSlow(s.rules.list, s.tables, &k, lookupFilter{dev: q.OIF}, f.DevIndex)
	var res Result
	if d.rule >= 0 {
		res.Rule, res.RuleSet = s.rules.list[d.rule], true
	}
	r := d.route
	if r == nil {
		nh := d.answer(s.rules.list)
		if nh == nil {
			return res, false
		}
		typ := Blackhole
		if nh.Kind == nexthop.Prohibit {
			typ = Prohibit
		}
		res.Route = &Route{Type: typ, NH: nh, Scope: ScopeUniverse}
		res.NH = nh
		return res, true
	}
	res.Route, res.NH, res.Table = r, r.NH, d.table
	if r.NH != nil {
		key := nexthop.FlowKey{Dst: k.Dst}
		res.NH = r.NH.Resolve(nexthop.FlowHash(key))
	}
	res.Prefsrc = r.Src
	if !res.Prefsrc.IsValid() && r.Type == Local {
		res.Prefsrc = q.Dst // the kernel's output route for a local destination
	}
	if !res.Prefsrc.IsValid() && res.NH != nil && res.NH.Dev != "" {
		// The kernel caches inet_select_addr(dev, gateway) per nexthop: the
		// gateway's subnet decides, not the destination's.
		res.Prefsrc = selectSource(s.addrs, res.NH.Dev, res.NH.Gateway)
	}
	return res, true
}
