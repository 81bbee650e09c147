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

var ruleOrder = [...]uint32{TableLocal, TableMain}

// lookupTables returns the deciding route for a, or nil (no route).
func lookupTables(tables map[uint32]*routeTrie, a netip.Addr, f lookupFilter) *Route {
	if f.onlyTable {
		r := lookupTable(tables[f.table], a, f)
		if r != nil && r.Type == Throw {
			return nil
		}
		return r
	}
	for _, id := range ruleOrder {
		r := lookupTable(tables[id], a, f)
		if r != nil && r.Type != Throw {
			return r
		}
	}
	return nil
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
	return lookupTables(tx.next.tables, a, f)
}

// Result is the answer of LookupRoute: the route that decided, and for
// forwarding routes the nexthop that a flow with hash 0 takes and the source
// address the router would use.
type Result struct {
	Route *Route
	// NH is the route's nexthop, resolved to one member for groups.
	NH      *nexthop.Nexthop
	Prefsrc netip.Addr
}

// LookupRoute answers like `ip route get`: the full route as configured.
// ok is false when there is no route. Lock-free.
func (f *FIB) LookupRoute(dst netip.Addr) (Result, bool) { return f.LookupRouteOIF(dst, "") }

// LookupRouteOIF is LookupRoute restricted to routes through device oif
// ("" = any), as `ip route get ADDR oif D` asks the kernel (flowi4_oif:
// routes through other devices are skipped, a shorter prefix may answer).
func (f *FIB) LookupRouteOIF(dst netip.Addr, oif string) (Result, bool) {
	s := f.cur.Load()
	r := lookupTables(s.tables, dst, lookupFilter{dev: oif})
	if r == nil {
		return Result{}, false
	}
	res := Result{Route: r, NH: r.NH}
	if r.NH != nil {
		var key nexthop.FlowKey
		if dst.Is4() {
			key.Dst = wire.Addr4From(dst)
		}
		res.NH = r.NH.Resolve(nexthop.FlowHash(key))
	}
	res.Prefsrc = r.Src
	if !res.Prefsrc.IsValid() && r.Type == Local {
		res.Prefsrc = dst // the kernel's output route for a local destination
	}
	if !res.Prefsrc.IsValid() && res.NH != nil && res.NH.Dev != "" {
		// The kernel caches inet_select_addr(dev, gateway) per nexthop: the
		// gateway's subnet decides, not the destination's.
		res.Prefsrc = selectSource(s.addrs, res.NH.Dev, res.NH.Gateway)
	}
	return res, true
}
