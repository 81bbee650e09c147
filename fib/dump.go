package fib

// Dumps: the routes of each table as configured, in `ip route show` text
// and `ip -j route show` JSON forms. The merged trie is never dumped; dumps
// read the per-table tries of one published state.
//
// Locking: lock-free (one published state).

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/netfwd/netfwd/nexthop"
)

// TableAll asks Routes for every table.
const TableAll uint32 = 0

// Routes returns the routes of a table (TableAll: all tables, main first,
// then local, then numbered ones), in prefix order, best first within a
// prefix.
func (f *FIB) Routes(table uint32) []*Route {
	s := f.cur.Load()
	var ids []uint32
	if table != TableAll {
		ids = []uint32{table}
	} else {
		for id := range s.tables {
			ids = append(ids, id)
		}
		order := func(id uint32) int {
			switch id {
			case TableMain:
				return 0
			case TableLocal:
				return 1
			}
			return 2
		}
		slices.SortFunc(ids, func(a, b uint32) int {
			if d := order(a) - order(b); d != 0 {
				return d
			}
			return int(int64(a) - int64(b))
		})
	}
	var out []*Route
	for _, id := range ids {
		t := s.tables[id]
		if t == nil {
			continue
		}
		for _, rl := range t.AllSorted4() {
			out = append(out, rl.routes...)
		}
	}
	return out
}

// RouteCounts returns the number of routes per table and type (for metrics).
func (f *FIB) RouteCounts() map[uint32]map[Type]int {
	s := f.cur.Load()
	out := map[uint32]map[Type]int{}
	for id, t := range s.tables {
		m := map[Type]int{}
		for _, rl := range t.All4() {
			for _, r := range rl.routes {
				m[r.Type]++
			}
		}
		out[id] = m
	}
	return out
}

func dstString(p netip.Prefix) string {
	if p.Bits() == 0 {
		return "default"
	}
	if p.Bits() == 32 {
		return p.Addr().String()
	}
	return p.String()
}

// Format prints the route as `ip route show` does. withTable adds
// "table T" for tables other than main (as `ip route show table all`).
func (r *Route) Format(withTable bool) string {
	var b strings.Builder
	if r.Type != Unicast {
		b.WriteString(r.Type.String())
		b.WriteByte(' ')
	}
	b.WriteString(dstString(r.Prefix))
	nh := r.NH
	if nh != nil && nh.ID != 0 {
		fmt.Fprintf(&b, " nhid %d", nh.ID)
	}
	if nh != nil && nh.Group == nil && r.Type.hasNexthop() {
		if nh.Gateway.IsValid() {
			fmt.Fprintf(&b, " via %s", nh.Gateway)
		}
		if nh.Dev != "" {
			fmt.Fprintf(&b, " dev %s", nh.Dev)
		}
	}
	if withTable && r.Table != TableMain {
		fmt.Fprintf(&b, " table %s", TableName(r.Table))
	}
	if r.Proto != ProtoBoot {
		fmt.Fprintf(&b, " proto %s", r.Proto)
	}
	if r.Scope != ScopeUniverse {
		fmt.Fprintf(&b, " scope %s", r.Scope)
	}
	if r.Src.IsValid() {
		fmt.Fprintf(&b, " src %s", r.Src)
	}
	if r.Metric != 0 {
		fmt.Fprintf(&b, " metric %d", r.Metric)
	}
	if nh != nil && nh.Group == nil && nh.OnLink {
		b.WriteString(" onlink")
	}
	if r.dead() {
		b.WriteString(" dead linkdown")
	}
	if nh != nil && nh.Group != nil && nh.ID == 0 {
		for _, m := range nh.Group.Members {
			b.WriteString("\n\tnexthop")
			if m.NH.Gateway.IsValid() {
				fmt.Fprintf(&b, " via %s", m.NH.Gateway)
			}
			fmt.Fprintf(&b, " dev %s weight %d", m.NH.Dev, m.Weight)
			if m.NH.OnLink {
				b.WriteString(" onlink")
			}
			if m.NH.Dead() {
				b.WriteString(" dead linkdown")
			}
		}
	}
	return b.String()
}

// JSONRoute is a route in `ip -j route show` form.
type JSONRoute struct {
	Type     string         `json:"type,omitempty"`
	Dst      string         `json:"dst"`
	NhID     uint32         `json:"nhid,omitempty"`
	Gateway  string         `json:"gateway,omitempty"`
	Dev      string         `json:"dev,omitempty"`
	Table    string         `json:"table,omitempty"`
	Protocol string         `json:"protocol,omitempty"`
	Scope    string         `json:"scope,omitempty"`
	Prefsrc  string         `json:"prefsrc,omitempty"`
	Metric   uint32         `json:"metric,omitempty"`
	Flags    []string       `json:"flags"`
	Nexthops []JSONMultiHop `json:"nexthops,omitempty"`
}

// JSONMultiHop is one path of a multipath route.
type JSONMultiHop struct {
	Gateway string   `json:"gateway,omitempty"`
	Dev     string   `json:"dev"`
	Weight  uint16   `json:"weight"`
	Flags   []string `json:"flags"`
}

// JSON returns the route in `ip -j route show` form.
func (r *Route) JSON(withTable bool) JSONRoute {
	j := JSONRoute{Dst: dstString(r.Prefix), Flags: []string{}}
	if r.Type != Unicast {
		j.Type = r.Type.String()
	}
	if nh := r.NH; nh != nil {
		j.NhID = nh.ID
		if nh.Group == nil && r.Type.hasNexthop() {
			if nh.Gateway.IsValid() {
				j.Gateway = nh.Gateway.String()
			}
			j.Dev = nh.Dev
			if nh.OnLink {
				j.Flags = append(j.Flags, "onlink")
			}
		}
		if nh.Group != nil && nh.ID == 0 {
			for _, m := range nh.Group.Members {
				h := JSONMultiHop{Dev: m.NH.Dev, Weight: m.Weight, Flags: flags(m.NH)}
				if m.NH.Gateway.IsValid() {
					h.Gateway = m.NH.Gateway.String()
				}
				j.Nexthops = append(j.Nexthops, h)
			}
		}
	}
	if withTable && r.Table != TableMain {
		j.Table = TableName(r.Table)
	}
	if r.Proto != ProtoBoot {
		j.Protocol = r.Proto.String()
	}
	if r.Scope != ScopeUniverse {
		j.Scope = r.Scope.String()
	}
	if r.Src.IsValid() {
		j.Prefsrc = r.Src.String()
	}
	j.Metric = r.Metric
	if r.dead() {
		j.Flags = append(j.Flags, "dead", "linkdown")
	}
	return j
}

func flags(nh *nexthop.Nexthop) []string {
	f := []string{}
	if nh.OnLink {
		f = append(f, "onlink")
	}
	if nh.Dead() {
		f = append(f, "dead", "linkdown")
	}
	return f
}
