package fib

// Route operations with iproute2/kernel semantics:
//   add      fails if (table, prefix, metric) exists                (NLM_F_EXCL)
//   append   adds after the routes of the same metric; fails only on an
//            identical route                                         (NLM_F_APPEND)
//   replace  replaces the first route of that metric, or adds       (NLM_F_REPLACE|CREATE)
//   change   replaces the first route of that metric, or fails      (NLM_F_REPLACE)
//   del      removes the first route (metric order) matching every
//            attribute given
// Each (table, prefix) keeps its routes ordered by metric, insertion order
// among equals; the first usable one decides lookups. Every operation sees
// only the routes of its own owner (owner.go): "exists", "replace the first
// of that metric" and "delete the first match" are all per owner.
//
// Locking: inside a Txn (FIB writer lock).

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/netfwd/netfwd/nexthop"
)

// Errors with iproute2's wording ("RTNETLINK answers: ...").
var (
	ErrExists  = errors.New("file exists")
	ErrNoRoute = errors.New("no such process") // ESRCH: no matching route
)

type insertMode uint8

const (
	modeAdd insertMode = iota
	modeAppend
	modeReplace
	modeChange
)

// AddRoute adds a route; it fails if one with the same table, prefix and
// metric exists.
func (tx *Txn) AddRoute(s RouteSpec) error { return tx.insert(s, modeAdd) }

// AppendRoute adds a route after existing ones of the same metric.
func (tx *Txn) AppendRoute(s RouteSpec) error { return tx.insert(s, modeAppend) }

// ReplaceRoute replaces the route with the same table, prefix and metric, or
// adds it.
func (tx *Txn) ReplaceRoute(s RouteSpec) error { return tx.insert(s, modeReplace) }

// ChangeRoute replaces the route with the same table, prefix and metric; it
// fails if there is none.
func (tx *Txn) ChangeRoute(s RouteSpec) error { return tx.insert(s, modeChange) }

func (tx *Txn) insert(s RouteSpec, mode insertMode) error {
	r, err := tx.buildRoute(s)
	if err != nil {
		return err
	}
	if err := tx.insertRoute(r, mode); err != nil {
		tx.release(r)
		return err
	}
	return nil
}

// insertRoute stores a built route (its nexthop reference is already held).
func (tx *Txn) insertRoute(r *Route, mode insertMode) error {
	list := tx.getList(r.Table, r.Prefix)
	same := slices.IndexFunc(list, func(o *Route) bool { return o.Metric == r.Metric && o.Owner == r.Owner })
	var next []*Route
	switch mode {
	case modeAdd:
		if same >= 0 {
			return ErrExists
		}
		next = insertSorted(list, r)
	case modeAppend:
		for _, o := range list {
			if identical(o, r) {
				return ErrExists
			}
		}
		next = insertSorted(list, r)
	case modeReplace, modeChange:
		if same < 0 {
			if mode == modeChange {
				return ErrNoRoute
			}
			next = insertSorted(list, r)
			break
		}
		// The kernel's fib_table_insert: an identical route among those of
		// the same metric makes the replace a no-op if it is the first of
		// them, and an error otherwise.
		for i := same; i < len(list) && list[i].Metric == r.Metric; i++ {
			if list[i].Owner != r.Owner {
				continue
			}
			if identical(list[i], r) {
				if i == same {
					tx.release(r)
					return nil
				}
				return ErrExists
			}
		}
		old := list[same]
		next = slices.Clone(list)
		next[same] = r
		tx.release(old)
	}
	tx.setList(r.Table, r.Prefix, next)
	tx.updateMerged(r.Table, r.Prefix)
	return nil
}

// insertSorted returns a new list with r after every route of lower or
// equal metric, except that at equal metric a configured route goes before
// learned ones.
func insertSorted(list []*Route, r *Route) []*Route {
	i := 0
	for i < len(list) && (list[i].Metric < r.Metric || list[i].Metric == r.Metric && list[i].Owner.rank() <= r.Owner.rank()) {
		i++
	}
	next := make([]*Route, 0, len(list)+1)
	next = append(next, list[:i]...)
	next = append(next, r)
	return append(next, list[i:]...)
}

func identical(a, b *Route) bool {
	return a.Owner == b.Owner && a.Type == b.Type && a.Metric == b.Metric && a.NH == b.NH && a.Proto == b.Proto &&
		a.Scope == b.Scope && a.Src == b.Src
}

func (tx *Txn) release(r *Route) {
	if r.NH != nil {
		tx.f.nhs.Release(r.NH)
	}
}

// DelRoute deletes the first route matching every attribute set in s.
func (tx *Txn) DelRoute(s RouteSpec) error {
	if err := checkPrefix(s.Prefix); err != nil {
		return err
	}
	id := s.table()
	list := tx.getList(id, s.Prefix)
	var other *Route
	for i, r := range list {
		if !tx.matches(r, &s) {
			continue
		}
		if r.Owner != s.Owner {
			if other == nil {
				other = r
			}
			continue
		}
		tx.removeAt(id, s.Prefix, i)
		return nil
	}
	if other != nil {
		return &ownedError{Route: other}
	}
	return ErrNoRoute
}

// removeAt deletes the i-th route of (table, prefix).
func (tx *Txn) removeAt(id uint32, p netip.Prefix, i int) {
	list := tx.getList(id, p)
	r := list[i]
	next := slices.Delete(slices.Clone(list), i, i+1)
	tx.setList(id, p, next)
	tx.release(r)
	tx.updateMerged(id, p)
}

// matches implements the kernel's fib_table_delete filter: unset fields
// match anything.
func (tx *Txn) matches(r *Route, s *RouteSpec) bool {
	if s.TypeSet && r.Type != s.Type {
		return false
	}
	if s.MetricSet && s.Metric != 0 && r.Metric != s.Metric { // metric 0 matches any, as in the kernel
		return false
	}
	if s.Proto != 0 && r.Proto != s.Proto {
		return false
	}
	if s.ScopeSet && r.Scope != s.Scope {
		return false
	}
	if s.Src.IsValid() && r.Src != s.Src {
		return false
	}
	if s.NhID != 0 && (r.NH == nil || r.NH.ID != s.NhID) {
		return false
	}
	if s.Gateway.IsValid() || s.Dev != "" {
		nh := r.NH
		if nh == nil || nh.Group != nil {
			return false
		}
		if s.Gateway.IsValid() && nh.Gateway != s.Gateway {
			return false
		}
		if s.Dev != "" && nh.Dev != s.Dev {
			return false
		}
	}
	if len(s.Multipath) > 0 {
		nh := r.NH
		if nh == nil || nh.Group == nil || len(nh.Group.Members) != len(s.Multipath) {
			return false
		}
		for i, p := range s.Multipath {
			m := nh.Group.Members[i]
			if p.Gateway.IsValid() && m.NH.Gateway != p.Gateway || p.Dev != "" && m.NH.Dev != p.Dev {
				return false
			}
		}
	}
	return true
}

func checkPrefix(p netip.Prefix) error {
	if !p.IsValid() || !p.Addr().Is4() {
		return fmt.Errorf("invalid IPv4 prefix %q", p)
	}
	if p.Masked() != p {
		return fmt.Errorf("invalid prefix for given prefix length: %s", p)
	}
	return nil
}

// buildRoute completes a spec with defaults, validates it as the kernel's
// fib_create_info does, and takes a reference on its nexthop.
func (tx *Txn) buildRoute(s RouteSpec) (*Route, error) {
	if err := checkPrefix(s.Prefix); err != nil {
		return nil, err
	}
	r := &Route{Table: s.table(), Owner: s.Owner, Prefix: s.Prefix, Type: s.Type, Proto: s.Proto, Metric: s.Metric, Src: s.Src}
	if r.Proto == ProtoUnspec {
		r.Proto = ProtoBoot
	}
	r.Scope = s.defaultScope()
	if s.ScopeSet {
		r.Scope = s.Scope
	}
	if r.Scope < minScope(r.Type) || r.Scope > ScopeHost {
		return nil, errors.New("invalid scope")
	}
	if s.Src.IsValid() && !s.Src.Is4() {
		return nil, errors.New("invalid prefsrc address")
	}
	if s.Gateway.IsValid() && !s.Gateway.Is4() {
		return nil, errors.New("gateway must be an IPv4 address")
	}
	hasNH := s.Gateway.IsValid() || s.Dev != "" || len(s.Multipath) > 0 || s.NhID != 0
	var err error
	switch {
	case !r.Type.hasNexthop():
		if hasNH {
			return nil, errors.New("gateway, device and multipath can not be specified for this route type")
		}
		if r.Type != Throw {
			r.NH, err = tx.f.nhs.Implicit(nexthop.Spec{Kind: specialKind[r.Type]})
		}
	case r.Type == Local || r.Type == Broadcast:
		if s.Gateway.IsValid() || len(s.Multipath) > 0 || s.NhID != 0 {
			return nil, fmt.Errorf("a %s route takes only a device", r.Type)
		}
		if s.Dev == "" {
			return nil, errors.New("no device specified")
		}
		r.NH, err = tx.f.nhs.Implicit(nexthop.Spec{Kind: specialKind[r.Type], Dev: s.Dev})
	case r.Scope == ScopeHost && (s.Gateway.IsValid() || len(s.Multipath) > 0 || s.NhID != 0):
		return nil, errors.New("route with host scope can not have a gateway or multiple nexthops")
	case s.NhID != 0:
		if s.Gateway.IsValid() || s.Dev != "" || len(s.Multipath) > 0 {
			return nil, errors.New("nexthop specification and nexthop id are mutually exclusive")
		}
		nh := tx.f.nhs.ByID(s.NhID)
		if nh == nil {
			return nil, nexthop.ErrNotFound
		}
		tx.f.nhs.Hold(nh)
		r.NH = nh
	case len(s.Multipath) > 0:
		if s.Gateway.IsValid() || s.Dev != "" {
			return nil, errors.New("give the gateway and device of each path after \"nexthop\"")
		}
		paths := make([]nexthop.Spec, len(s.Multipath))
		weights := make([]uint16, len(s.Multipath))
		for i, p := range s.Multipath {
			if p.Gateway.IsValid() && !p.Gateway.Is4() {
				return nil, errors.New("gateway must be an IPv4 address")
			}
			if paths[i], err = tx.checkPath(p.Gateway, p.Dev, p.OnLink, r); err != nil {
				return nil, err
			}
			weights[i] = max(p.Weight, 1)
			if weights[i] > nexthop.MaxWeight {
				return nil, fmt.Errorf("invalid weight %d (1-%d)", p.Weight, nexthop.MaxWeight)
			}
		}
		r.NH, err = tx.f.nhs.ImplicitGroup(paths, weights)
	case s.Gateway.IsValid() || s.Dev != "":
		var spec nexthop.Spec
		if spec, err = tx.checkPath(s.Gateway, s.Dev, s.OnLink, r); err != nil {
			return nil, err
		}
		r.NH, err = tx.f.nhs.Implicit(spec)
	default:
		return nil, errors.New("unicast route needs a nexthop: via, dev, nexthop or nhid")
	}
	if err != nil {
		return nil, err
	}
	if r.Src.IsValid() && !tx.validPrefsrc(r) {
		tx.release(r)
		return nil, errors.New("invalid prefsrc address")
	}
	return r, nil
}

var specialKind = map[Type]nexthop.Kind{
	Local: nexthop.Local, Broadcast: nexthop.Broadcast, Blackhole: nexthop.Blackhole,
	Unreachable: nexthop.Unreachable, Prohibit: nexthop.Prohibit,
}

// minScope is the kernel's fib_props scope per type: a route's scope may not
// be narrower... wider than this.
func minScope(t Type) Scope {
	switch t {
	case Local:
		return ScopeHost
	case Broadcast:
		return ScopeLink
	}
	return ScopeUniverse
}

// checkPath validates one unicast path as fib_check_nh does and returns its
// nexthop spec (with the device found by the gateway lookup if none given).
func (tx *Txn) checkPath(gw netip.Addr, dev string, onlink bool, r *Route) (nexthop.Spec, error) {
	spec := nexthop.Spec{Kind: nexthop.Unicast, Gateway: gw, Dev: dev, OnLink: onlink}
	if !gw.IsValid() {
		if onlink {
			return spec, errors.New("invalid flags for nexthop: onlink needs a gateway")
		}
		if !tx.f.nhs.DevUp(dev) {
			return spec, errors.New("device for nexthop is not up")
		}
		return spec, nil
	}
	if onlink {
		if r.Scope >= ScopeLink {
			return spec, errors.New("nexthop has invalid scope")
		}
		if dev == "" {
			return spec, errors.New("nexthop device required for onlink")
		}
		if !tx.f.nhs.DevUp(dev) {
			return spec, errors.New("nexthop device is not up")
		}
		if !tx.unicastAddr(gw) {
			return spec, errors.New("nexthop has invalid gateway")
		}
		return spec, nil
	}
	gr, err := tx.gatewayRoute(gw, dev, r)
	if err != nil {
		return spec, err
	}
	if spec.Dev == "" {
		spec.Dev = gr.NH.Dev
	}
	spec.LocalGateway = gr.Type == Local
	if !tx.f.nhs.DevUp(spec.Dev) {
		return spec, errors.New("nexthop device is not up")
	}
	return spec, nil
}

// gatewayRoute finds the route that makes gw reachable: a lookup that sees
// only routes of scope link or narrower (connected and local routes), in the
// route's own table first if that is not main, else in rule order; with a
// device given, only routes through that device.
func (tx *Txn) gatewayRoute(gw netip.Addr, dev string, r *Route) (*Route, error) {
	f := lookupFilter{minScope: max(r.Scope+1, ScopeLink), dev: dev, ignoreDead: true}
	if r.Scope == ScopeHost {
		f.minScope = ScopeNowhere
	}
	var gr *Route
	if r.Table != TableMain {
		tf := f
		tf.table, tf.onlyTable = r.Table, true
		gr = tx.lookupSlow(gw, tf)
	}
	// Only a miss there (no route, a throw, an error route) goes on to the
	// rule walk (fib_check_nh_v4_gw): a broadcast route refuses the gateway.
	if gr == nil || !gr.Type.hasNexthop() {
		gr = tx.lookupSlow(gw, f)
	}
	if gr == nil || gr.Type != Unicast && gr.Type != Local {
		return nil, errors.New("nexthop has invalid gateway")
	}
	if gr.NH == nil || gr.NH.Dev == "" {
		return nil, errors.New("no egress device for nexthop gateway")
	}
	return gr, nil
}

// validPrefsrc: a preferred source must be one of the router's addresses
// (a local route), except on the local route of that very address.
func (tx *Txn) validPrefsrc(r *Route) bool {
	if r.Type == Local && r.Prefix.Bits() == 32 && r.Prefix.Addr() == r.Src {
		return true
	}
	id := r.Table
	if id == TableMain {
		id = TableLocal
	}
	rt := tx.lookupSlow(r.Src, lookupFilter{table: id, onlyTable: true, ignoreDead: true})
	if (rt == nil || rt.Type != Local) && id != TableLocal {
		rt = tx.lookupSlow(r.Src, lookupFilter{table: TableLocal, onlyTable: true, ignoreDead: true})
	}
	return rt != nil && rt.Type == Local
}

// unicastAddr is the kernel's inet_addr_type_dev_table(dev, a) ==
// RTN_UNICAST, which despite its name ignores the device: a is not a
// zero-network, limited-broadcast or multicast address, and the local table
// does not make it a local or broadcast address. (The kernel also refuses when
// the namespace has no local table at all; netfwd does not copy that quirk.)
func (tx *Txn) unicastAddr(a netip.Addr) bool {
	b := a.As4()
	if b[0] == 0 || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) || a.IsMulticast() {
		return false
	}
	rt := tx.lookupSlow(a, lookupFilter{table: TableLocal, onlyTable: true})
	return rt == nil || !rt.Type.hasNexthop() || rt.Type == Unicast
}
