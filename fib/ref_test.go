package fib

// The slow, obviously-correct reference model of the FIB: one plain route
// list per table, linear longest match in rule order, and the route,
// address, link and nexthop rules written out directly. The randomized tests
// drive the FIB and the model with the same operations and compare errors,
// dumps and lookups.

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/netfwd/netfwd/nexthop"
)

type mroute struct {
	table  uint32
	prefix netip.Prefix
	typ    Type
	proto  Proto
	scope  Scope
	metric uint32
	src    netip.Addr
	// nexthop: nhid, or paths (one path for single-nexthop routes), or
	// dev only for local/broadcast, or nothing for the error types.
	nhid  uint32
	paths []fib_path
	key   string // nhKey, computed once (routes are never changed in place)
}

type fib_path struct {
	gw     netip.Addr
	dev    string
	onlink bool
	weight uint16
}

type mnh struct {
	blackhole bool
	gw        netip.Addr
	dev       string
	onlink    bool
	group     []nexthop.GroupMemberSpec
}

type model struct {
	tables map[uint32][]*mroute // one flat list per table, in stored order
	addrs  []Address
	down   map[string]bool
	nhs    map[uint32]*mnh
}

func newModel() *model {
	return &model{tables: map[uint32][]*mroute{}, down: map[string]bool{}, nhs: map[uint32]*mnh{}}
}

func (m *model) clone() *model {
	c := newModel()
	for id, l := range m.tables {
		cl := make([]*mroute, len(l))
		for i, r := range l {
			rc := *r
			rc.paths = slices.Clone(r.paths)
			cl[i] = &rc
		}
		c.tables[id] = cl
	}
	c.addrs = slices.Clone(m.addrs)
	for k, v := range m.down {
		c.down[k] = v
	}
	for k, v := range m.nhs {
		vc := *v
		vc.group = slices.Clone(v.group)
		c.nhs[k] = &vc
	}
	return c
}

// ---- liveness and keys ----

func (m *model) nhDead(id uint32) bool {
	n := m.nhs[id]
	if n.group == nil {
		return !n.blackhole && m.down[n.dev]
	}
	for _, g := range n.group {
		if !m.nhDead(g.ID) {
			return false
		}
	}
	return true
}

func (m *model) dead(r *mroute) bool {
	switch {
	case r.typ != Unicast:
		return false
	case r.nhid != 0:
		return m.nhDead(r.nhid)
	}
	for _, p := range r.paths {
		if !m.down[p.dev] {
			return false
		}
	}
	return true
}

func (r *mroute) nhKey() string {
	if r.key == "" {
		r.key = r.computeKey()
	}
	return r.key
}

func (r *mroute) computeKey() string {
	switch {
	case r.typ == Throw:
		return "throw"
	case r.nhid != 0:
		return fmt.Sprintf("id%d", r.nhid)
	case r.typ != Unicast:
		dev := ""
		if len(r.paths) > 0 {
			dev = r.paths[0].dev
		}
		return fmt.Sprintf("%s/%s", specialKind[r.typ], dev)
	case len(r.paths) > 1 || r.paths[0].weight != 0:
		var b strings.Builder
		b.WriteString("mp[")
		for _, p := range r.paths {
			fmt.Fprintf(&b, "%s/%s/%t/%d;", p.gw, p.dev, p.onlink, max(p.weight, 1))
		}
		return b.String() + "]"
	}
	p := r.paths[0]
	return fmt.Sprintf("unicast/%s/%s/%t", p.gw, p.dev, p.onlink)
}

// nhKeyOf is the same key for the FIB's nexthop objects.
func nhKeyOf(nh *nexthop.Nexthop) string {
	switch {
	case nh == nil:
		return "throw"
	case nh.ID != 0:
		return fmt.Sprintf("id%d", nh.ID)
	case nh.Group != nil:
		var b strings.Builder
		b.WriteString("mp[")
		for _, mb := range nh.Group.Members {
			fmt.Fprintf(&b, "%s/%s/%t/%d;", mb.NH.Gateway, mb.NH.Dev, mb.NH.OnLink, mb.Weight)
		}
		return b.String() + "]"
	case nh.Kind != nexthop.Unicast:
		return fmt.Sprintf("%s/%s", nh.Kind, nh.Dev)
	}
	return fmt.Sprintf("unicast/%s/%s/%t", nh.Gateway, nh.Dev, nh.OnLink)
}

func (r *mroute) String() string {
	return fmt.Sprintf("%d|%s|%s|%d|%d|%d|%s|%s", r.table, r.prefix, r.typ, r.proto, r.scope, r.metric, r.src, r.nhKey())
}

func routeString(r *Route) string {
	return fmt.Sprintf("%d|%s|%s|%d|%d|%d|%s|%s", r.Table, r.Prefix, r.Type, r.Proto, r.Scope, r.Metric, r.Src, nhKeyOf(r.NH))
}

// dump lists the model's routes by table, prefix (bart's sorted order:
// address, then length) and stored order.
func (m *model) dump() []string {
	var ids []uint32
	for id, l := range m.tables {
		if len(l) > 0 {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var out []string
	for _, id := range ids {
		l := slices.Clone(m.tables[id])
		sort.SliceStable(l, func(i, j int) bool {
			a, b := l[i].prefix, l[j].prefix
			if c := a.Addr().Compare(b.Addr()); c != 0 {
				return c < 0
			}
			return a.Bits() < b.Bits()
		})
		for _, r := range l {
			out = append(out, r.String())
		}
	}
	return out
}

// ---- lookups ----

type mfilter struct {
	minScope   Scope
	dev        string
	ignoreDead bool
	table      uint32
	onlyTable  bool
}

func (r *mroute) dev() string {
	if r.nhid != 0 {
		return ""
	}
	if len(r.paths) == 1 && r.paths[0].weight == 0 {
		return r.paths[0].dev
	}
	return ""
}

func (m *model) nhidDev(r *mroute) string {
	if r.nhid != 0 {
		if n := m.nhs[r.nhid]; n.group == nil {
			return n.dev
		}
		return ""
	}
	return r.dev()
}

// lookupTable: the longest prefix first; within it the first route that
// passes the filters (list order).
func (m *model) lookupTable(id uint32, a netip.Addr, f mfilter) *mroute {
	for bits := 32; bits >= 0; bits-- {
		for _, r := range m.tables[id] {
			if r.prefix.Bits() != bits || !r.prefix.Contains(a) {
				continue
			}
			if r.scope < f.minScope {
				continue
			}
			if !r.typ.hasNexthop() {
				return r
			}
			if !f.ignoreDead && m.dead(r) {
				continue
			}
			if f.dev != "" && m.nhidDev(r) != f.dev {
				continue
			}
			return r
		}
	}
	return nil
}

func (m *model) lookup(a netip.Addr, f mfilter) *mroute {
	if f.onlyTable {
		r := m.lookupTable(f.table, a, f)
		if r != nil && r.typ == Throw {
			return nil
		}
		return r
	}
	for _, id := range []uint32{TableLocal, TableMain} {
		if r := m.lookupTable(id, a, f); r != nil && r.typ != Throw {
			return r
		}
	}
	return nil
}

// ---- routes ----

func (m *model) buildRoute(s RouteSpec) (*mroute, error) {
	if !s.Prefix.IsValid() || !s.Prefix.Addr().Is4() || s.Prefix.Masked() != s.Prefix {
		return nil, fmt.Errorf("bad prefix")
	}
	r := &mroute{prefix: s.Prefix, typ: s.Type, proto: s.Proto, metric: s.Metric, src: s.Src}
	r.table = s.Table
	if r.table == 0 {
		r.table = TableMain
		if s.TypeSet && (s.Type == Local || s.Type == Broadcast) {
			r.table = TableLocal
		}
	}
	if r.proto == 0 {
		r.proto = ProtoBoot
	}
	switch {
	case s.ScopeSet:
		r.scope = s.Scope
	case s.Type == Local:
		r.scope = ScopeHost
	case s.Type == Broadcast:
		r.scope = ScopeLink
	case s.Type == Unicast && !s.Gateway.IsValid() && len(s.Multipath) == 0 && s.NhID == 0:
		r.scope = ScopeLink
	}
	min := ScopeUniverse
	if r.typ == Local {
		min = ScopeHost
	} else if r.typ == Broadcast {
		min = ScopeLink
	}
	if r.scope < min || r.scope > ScopeHost {
		return nil, fmt.Errorf("invalid scope")
	}
	hasNH := s.Gateway.IsValid() || s.Dev != "" || len(s.Multipath) > 0 || s.NhID != 0
	switch r.typ {
	case Throw, Blackhole, Unreachable, Prohibit:
		if hasNH {
			return nil, fmt.Errorf("nh for error type")
		}
	case Local, Broadcast:
		if s.Gateway.IsValid() || len(s.Multipath) > 0 || s.NhID != 0 || s.Dev == "" {
			return nil, fmt.Errorf("local/broadcast need only dev")
		}
		r.paths = []fib_path{{dev: s.Dev}}
	default:
		if r.scope == ScopeHost && (s.Gateway.IsValid() || len(s.Multipath) > 0 || s.NhID != 0) {
			return nil, fmt.Errorf("host scope")
		}
		switch {
		case s.NhID != 0:
			if s.Gateway.IsValid() || s.Dev != "" || len(s.Multipath) > 0 {
				return nil, fmt.Errorf("exclusive")
			}
			if m.nhs[s.NhID] == nil {
				return nil, fmt.Errorf("no nh")
			}
			r.nhid = s.NhID
		case len(s.Multipath) > 0:
			if s.Gateway.IsValid() || s.Dev != "" {
				return nil, fmt.Errorf("mp + gw")
			}
			for _, p := range s.Multipath {
				dev, err := m.checkPath(p.Gateway, p.Dev, p.OnLink, r)
				if err != nil {
					return nil, err
				}
				r.paths = append(r.paths, fib_path{gw: p.Gateway, dev: dev, onlink: p.OnLink, weight: max(p.Weight, 1)})
			}
		case hasNH:
			dev, err := m.checkPath(s.Gateway, s.Dev, s.OnLink, r)
			if err != nil {
				return nil, err
			}
			r.paths = []fib_path{{gw: s.Gateway, dev: dev, onlink: s.OnLink}}
		default:
			return nil, fmt.Errorf("no nexthop")
		}
	}
	if r.src.IsValid() && !m.validSrc(r) {
		return nil, fmt.Errorf("bad prefsrc")
	}
	return r, nil
}

func (m *model) validSrc(r *mroute) bool {
	if r.typ == Local && r.prefix.Bits() == 32 && r.prefix.Addr() == r.src {
		return true
	}
	id := r.table
	if id == TableMain {
		id = TableLocal
	}
	x := m.lookup(r.src, mfilter{table: id, onlyTable: true, ignoreDead: true})
	if (x == nil || x.typ != Local) && id != TableLocal {
		x = m.lookup(r.src, mfilter{table: TableLocal, onlyTable: true, ignoreDead: true})
	}
	return x != nil && x.typ == Local
}

func (m *model) checkPath(gw netip.Addr, dev string, onlink bool, r *mroute) (string, error) {
	if !gw.IsValid() {
		if onlink || m.down[dev] {
			return "", fmt.Errorf("bad dev path")
		}
		return dev, nil
	}
	if onlink {
		if r.scope >= ScopeLink || dev == "" || m.down[dev] {
			return "", fmt.Errorf("bad onlink")
		}
		b := gw.As4()
		if b[0] == 0 || gw.IsMulticast() || gw == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
			return "", fmt.Errorf("bad onlink gw")
		}
		if x := m.lookup(gw, mfilter{table: TableLocal, onlyTable: true}); x != nil && x.typ.hasNexthop() && x.typ != Unicast {
			return "", fmt.Errorf("bad onlink gw")
		}
		return dev, nil
	}
	f := mfilter{minScope: max(r.scope+1, ScopeLink), dev: dev, ignoreDead: true}
	if r.scope == ScopeHost {
		f.minScope = ScopeNowhere
	}
	var x *mroute
	if r.table != TableMain {
		tf := f
		tf.table, tf.onlyTable = r.table, true
		x = m.lookup(gw, tf)
	}
	if x == nil || x.typ != Unicast && x.typ != Local {
		x = m.lookup(gw, f)
	}
	if x == nil || x.typ != Unicast && x.typ != Local {
		return "", fmt.Errorf("bad gw")
	}
	xdev := m.nhidDev(x)
	if xdev == "" {
		return "", fmt.Errorf("no egress dev")
	}
	if dev == "" {
		dev = xdev
	}
	if m.down[dev] {
		return "", fmt.Errorf("dev down")
	}
	return dev, nil
}

func (m *model) samePrefix(id uint32, p netip.Prefix) []int {
	var idx []int
	for i, r := range m.tables[id] {
		if r.prefix == p {
			idx = append(idx, i)
		}
	}
	return idx
}

// insertSorted puts r after the last route of the same prefix with a
// metric <= r's, else before the first of that prefix, else at the end.
func (m *model) insertSorted(r *mroute) {
	l := m.tables[r.table]
	pos := len(l)
	idx := m.samePrefix(r.table, r.prefix)
	if len(idx) > 0 {
		pos = idx[0]
		for _, i := range idx {
			if l[i].metric <= r.metric {
				pos = i + 1
			}
		}
	}
	m.tables[r.table] = slices.Insert(l, pos, r)
}

func (m *model) insert(s RouteSpec, mode insertMode) error {
	r, err := m.buildRoute(s)
	if err != nil {
		return err
	}
	return m.insertBuilt(r, mode)
}

func (m *model) insertBuilt(r *mroute, mode insertMode) error {
	l := m.tables[r.table]
	same := -1
	for _, i := range m.samePrefix(r.table, r.prefix) {
		if l[i].metric == r.metric {
			same = i
			break
		}
	}
	switch mode {
	case modeAdd:
		if same >= 0 {
			return ErrExists
		}
	case modeAppend:
		for _, i := range m.samePrefix(r.table, r.prefix) {
			o := l[i]
			if o.typ == r.typ && o.metric == r.metric && o.nhKey() == r.nhKey() && o.proto == r.proto && o.scope == r.scope && o.src == r.src {
				return ErrExists
			}
		}
	case modeReplace, modeChange:
		if same >= 0 {
			for _, i := range m.samePrefix(r.table, r.prefix) {
				o := l[i]
				if o.metric == r.metric && o.typ == r.typ && o.nhKey() == r.nhKey() && o.proto == r.proto && o.scope == r.scope && o.src == r.src {
					if i == same {
						return nil
					}
					return ErrExists
				}
			}
			l[same] = r
			return nil
		}
		if mode == modeChange {
			return ErrNoRoute
		}
	}
	m.insertSorted(r)
	return nil
}

func (m *model) del(s RouteSpec) error {
	if !s.Prefix.IsValid() || s.Prefix.Masked() != s.Prefix {
		return fmt.Errorf("bad prefix")
	}
	id := s.Table
	if id == 0 {
		id = TableMain
		if s.TypeSet && (s.Type == Local || s.Type == Broadcast) {
			id = TableLocal
		}
	}
	for _, i := range m.samePrefix(id, s.Prefix) {
		r := m.tables[id][i]
		if s.TypeSet && r.typ != s.Type || s.MetricSet && s.Metric != 0 && r.metric != s.Metric || s.Proto != 0 && r.proto != s.Proto ||
			s.ScopeSet && r.scope != s.Scope || s.Src.IsValid() && r.src != s.Src || s.NhID != 0 && r.nhid != s.NhID {
			continue
		}
		if s.Gateway.IsValid() || s.Dev != "" {
			if r.nhid != 0 {
				n := m.nhs[r.nhid]
				if n.group != nil || s.Gateway.IsValid() && n.gw != s.Gateway || s.Dev != "" && n.dev != s.Dev {
					continue
				}
			} else if len(r.paths) != 1 || r.paths[0].weight != 0 || s.Gateway.IsValid() && r.paths[0].gw != s.Gateway || s.Dev != "" && r.paths[0].dev != s.Dev {
				continue
			}
		}
		m.tables[id] = slices.Delete(m.tables[id], i, i+1)
		return nil
	}
	return ErrNoRoute
}

// ---- addresses and links ----

func (m *model) devAddrs(dev string) []Address {
	var out []Address
	for _, a := range m.addrs {
		if a.Dev == dev {
			out = append(out, a)
		}
	}
	return out
}

// mderived: the kernel's derived routes of one device.
func mderived(addrs []Address, up bool) []*mroute {
	var out []*mroute
	add := func(r *mroute) {
		for _, o := range out {
			if o.String() == r.String() {
				return
			}
		}
		out = append(out, r)
	}
	for _, a := range addrs {
		prim := a.Prefix.Addr()
		for _, b := range addrs {
			if !b.Secondary && b.Prefix.Bits() == a.Prefix.Bits() && b.Prefix.Masked() == a.Prefix.Masked() {
				prim = b.Prefix.Addr()
				break
			}
		}
		add(&mroute{table: TableLocal, prefix: netip.PrefixFrom(a.Prefix.Addr(), 32), typ: Local, proto: ProtoKernel,
			scope: ScopeHost, src: prim, paths: []fib_path{{dev: a.Dev}}})
		if !up {
			continue
		}
		if a.Prefix.Bits() < 31 {
			add(&mroute{table: TableLocal, prefix: netip.PrefixFrom(lastAddr(a.Prefix), 32), typ: Broadcast, proto: ProtoKernel,
				scope: ScopeLink, src: prim, paths: []fib_path{{dev: a.Dev}}})
		}
		if !a.Secondary && a.Prefix.Bits() < 32 && a.Prefix.Masked().Addr() != netip.IPv4Unspecified() {
			add(&mroute{table: TableMain, prefix: a.Prefix.Masked(), typ: Unicast, proto: ProtoKernel,
				scope: ScopeLink, src: a.Prefix.Addr(), paths: []fib_path{{dev: a.Dev}}})
		}
	}
	return out
}

func (m *model) syncDerived(dev string, before []Address, wasUp bool) {
	old := mderived(before, wasUp)
	now := mderived(m.devAddrs(dev), !m.down[dev])
	has := func(l []*mroute, r *mroute) bool {
		return slices.ContainsFunc(l, func(o *mroute) bool { return o.String() == r.String() })
	}
	for _, o := range old {
		if !has(now, o) {
			for _, i := range m.samePrefix(o.table, o.prefix) {
				if m.tables[o.table][i].String() == o.String() {
					m.tables[o.table] = slices.Delete(m.tables[o.table], i, i+1)
					break
				}
			}
		}
	}
	for _, n := range now {
		if has(old, n) {
			continue
		}
		exists := false
		for _, i := range m.samePrefix(n.table, n.prefix) {
			if m.tables[n.table][i].String() == n.String() {
				exists = true
			}
		}
		if !exists && m.validSrc(n) {
			m.insertSorted(n)
		}
	}
}

func (m *model) addAddress(dev string, p netip.Prefix) error {
	before := m.devAddrs(dev)
	sec := false
	for _, a := range before {
		if a.Prefix.Bits() == p.Bits() && a.Prefix.Masked() == p.Masked() {
			if a.Prefix.Addr() == p.Addr() {
				return ErrExists
			}
			sec = true
		}
	}
	m.addrs = append(m.addrs, Address{Dev: dev, Prefix: p, Secondary: sec})
	m.syncDerived(dev, before, !m.down[dev])
	return nil
}

func (m *model) delAddress(dev string, p netip.Prefix) error {
	before := m.devAddrs(dev)
	i := slices.IndexFunc(m.addrs, func(a Address) bool { return a.Dev == dev && a.Prefix == p })
	if i < 0 {
		return ErrAddrNotFound
	}
	gone := m.addrs[i]
	var keep []Address
	for j, a := range m.addrs {
		sameSubnet := a.Dev == dev && a.Prefix.Bits() == p.Bits() && a.Prefix.Masked() == p.Masked()
		if j == i || !gone.Secondary && a.Secondary && sameSubnet {
			continue
		}
		keep = append(keep, a)
	}
	m.addrs = keep
	m.syncDerived(dev, before, !m.down[dev])
	if len(m.devAddrs(dev)) == 0 {
		for id, l := range m.tables {
			m.tables[id] = slices.DeleteFunc(l, func(r *mroute) bool {
				return r.typ.hasNexthop() && r.nhid == 0 && len(r.paths) == 1 && r.paths[0].weight == 0 && r.paths[0].dev == dev
			})
		}
	}
	return nil
}

func (m *model) setLink(dev string, up bool) {
	if !m.down[dev] == up {
		return
	}
	addrs := m.devAddrs(dev)
	wasUp := !m.down[dev]
	if up {
		delete(m.down, dev)
	} else {
		m.down[dev] = true
	}
	m.syncDerived(dev, addrs, wasUp)
}

// ---- nexthops ----

func (m *model) checkNH(u nexthop.UserSpec) error {
	if u.ID == 0 {
		return fmt.Errorf("id 0")
	}
	if len(u.Group) == 0 {
		s := u.Single
		switch s.Kind {
		case nexthop.Blackhole:
			if s.Dev != "" || s.Gateway.IsValid() {
				return fmt.Errorf("bh args")
			}
			return nil
		case nexthop.Unicast:
			if s.Dev == "" {
				return fmt.Errorf("no dev")
			}
			if m.down[s.Dev] {
				return fmt.Errorf("down")
			}
			if s.OnLink && !s.Gateway.IsValid() {
				return fmt.Errorf("onlink")
			}
			if s.Gateway.IsValid() {
				if _, err := m.checkPath(s.Gateway, s.Dev, s.OnLink, &mroute{table: TableMain}); err != nil {
					return err
				}
			}
			return nil
		}
		return fmt.Errorf("kind")
	}
	seen := map[uint32]bool{}
	for _, g := range u.Group {
		n := m.nhs[g.ID]
		if g.ID == u.ID || n == nil || n.group != nil || seen[g.ID] || g.Weight > nexthop.MaxWeight || n.blackhole && len(u.Group) > 1 {
			return fmt.Errorf("bad group")
		}
		seen[g.ID] = true
	}
	return nil
}

func toMnh(u nexthop.UserSpec) *mnh {
	if len(u.Group) > 0 {
		g := slices.Clone(u.Group)
		for i := range g {
			if g[i].Weight == 0 {
				g[i].Weight = 1
			}
		}
		return &mnh{group: g}
	}
	return &mnh{blackhole: u.Single.Kind == nexthop.Blackhole, gw: u.Single.Gateway, dev: u.Single.Dev, onlink: u.Single.OnLink}
}

func (m *model) addNH(u nexthop.UserSpec) error {
	if err := m.checkNH(u); err != nil {
		return err
	}
	if m.nhs[u.ID] != nil {
		return nexthop.ErrExists
	}
	m.nhs[u.ID] = toMnh(u)
	return nil
}

func (m *model) replaceNH(u nexthop.UserSpec) error {
	if err := m.checkNH(u); err != nil {
		return err
	}
	old := m.nhs[u.ID]
	if old == nil {
		m.nhs[u.ID] = toMnh(u)
		return nil
	}
	if (old.group != nil) != (len(u.Group) > 0) {
		return fmt.Errorf("group/single")
	}
	if len(u.Group) == 0 && u.Single.Kind == nexthop.Blackhole {
		for _, n := range m.nhs {
			if len(n.group) > 1 && slices.ContainsFunc(n.group, func(g nexthop.GroupMemberSpec) bool { return g.ID == u.ID }) {
				return fmt.Errorf("bh in group")
			}
		}
	}
	m.nhs[u.ID] = toMnh(u)
	return nil
}

func (m *model) delNH(id uint32) error {
	if m.nhs[id] == nil {
		return nexthop.ErrNotFound
	}
	gone := map[uint32]bool{id: true}
	delete(m.nhs, id)
	for gid, n := range m.nhs {
		if n.group == nil {
			continue
		}
		n.group = slices.DeleteFunc(n.group, func(g nexthop.GroupMemberSpec) bool { return g.ID == id })
		if len(n.group) == 0 {
			delete(m.nhs, gid)
			gone[gid] = true
		}
	}
	for tid, l := range m.tables {
		m.tables[tid] = slices.DeleteFunc(l, func(r *mroute) bool { return gone[r.nhid] })
	}
	return nil
}
