package show

// Routes as configured, per table: `ip route show` lines and `ip -j route
// show` objects, both from the Route value.

import (
	"io"
	"net/netip"
	"strconv"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/nexthop"
)

// Route is a route in `ip -j route show` form; Text prints the same value
// as `ip route show` does.
type Route struct {
	Type     string     `json:"type,omitempty"` // omitted for unicast
	Dst      string     `json:"dst"`
	NhID     uint32     `json:"nhid,omitempty"`
	Gateway  string     `json:"gateway,omitempty"`
	Dev      string     `json:"dev,omitempty"`
	Table    string     `json:"table,omitempty"` // only with `table all`, for tables other than main
	Protocol string     `json:"protocol,omitempty"`
	Scope    string     `json:"scope,omitempty"`
	Prefsrc  string     `json:"prefsrc,omitempty"`
	Metric   uint32     `json:"metric,omitempty"`
	Flags    []string   `json:"flags"` // onlink, dead, linkdown
	Nexthops []Multihop `json:"nexthops,omitempty"`
}

// Multihop is one path of a multipath route.
type Multihop struct {
	Gateway string   `json:"gateway,omitempty"`
	Dev     string   `json:"dev"`
	Weight  uint16   `json:"weight"`
	Flags   []string `json:"flags"`
}

// RouteOf describes r. withTable names tables other than main (as `ip
// route show table all` does).
func RouteOf(r *fib.Route, withTable bool) Route {
	j := Route{Dst: dstString(r.Prefix), Flags: []string{}}
	if r.Type != fib.Unicast {
		j.Type = r.Type.String()
	}
	// Only unicast, local and broadcast routes go through a device; the
	// others just answer an error.
	throughDev := r.Type == fib.Unicast || r.Type == fib.Local || r.Type == fib.Broadcast
	if nh := r.NH; nh != nil {
		j.NhID = nh.ID
		if nh.Group == nil && throughDev {
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
				h := Multihop{Dev: m.NH.Dev, Weight: m.Weight, Flags: nexthopFlags(m.NH)}
				if m.NH.Gateway.IsValid() {
					h.Gateway = m.NH.Gateway.String()
				}
				j.Nexthops = append(j.Nexthops, h)
			}
		}
	}
	if withTable && r.Table != fib.TableMain {
		j.Table = fib.TableName(r.Table)
	}
	if r.Proto != fib.ProtoBoot {
		j.Protocol = r.Proto.String()
	}
	if r.Scope != fib.ScopeUniverse {
		j.Scope = r.Scope.String()
	}
	if r.Src.IsValid() {
		j.Prefsrc = r.Src.String()
	}
	j.Metric = r.Metric
	if r.NH != nil && r.NH.Dead() {
		j.Flags = append(j.Flags, "dead", "linkdown")
	}
	return j
}

func nexthopFlags(nh *nexthop.Nexthop) []string {
	f := []string{}
	if nh.OnLink {
		f = append(f, "onlink")
	}
	if nh.Dead() {
		f = append(f, "dead", "linkdown")
	}
	return f
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

// AppendText appends the route as `ip route show` prints it (a multipath
// route takes one more line per path; no final newline).
func (j *Route) AppendText(b []byte) []byte {
	if j.Type != "" {
		b = append(b, j.Type...)
		b = append(b, ' ')
	}
	b = append(b, j.Dst...)
	if j.NhID != 0 {
		b = append(b, " nhid "...)
		b = strconv.AppendUint(b, uint64(j.NhID), 10)
	}
	if j.Gateway != "" {
		b = append(b, " via "+j.Gateway...)
	}
	if j.Dev != "" {
		b = append(b, " dev "+j.Dev...)
	}
	if j.Table != "" {
		b = append(b, " table "+j.Table...)
	}
	if j.Protocol != "" {
		b = append(b, " proto "+j.Protocol...)
	}
	if j.Scope != "" {
		b = append(b, " scope "+j.Scope...)
	}
	if j.Prefsrc != "" {
		b = append(b, " src "+j.Prefsrc...)
	}
	if j.Metric != 0 {
		b = append(b, " metric "...)
		b = strconv.AppendUint(b, uint64(j.Metric), 10)
	}
	for _, f := range j.Flags {
		b = append(b, ' ')
		b = append(b, f...)
	}
	for _, h := range j.Nexthops {
		b = append(b, "\n\tnexthop"...)
		if h.Gateway != "" {
			b = append(b, " via "+h.Gateway...)
		}
		b = append(b, " dev "+h.Dev+" weight "...)
		b = strconv.AppendUint(b, uint64(h.Weight), 10)
		for _, f := range h.Flags {
			b = append(b, ' ')
			b = append(b, f...)
		}
	}
	return b
}

// Text is AppendText as a string.
func (j *Route) Text() string { return string(j.AppendText(nil)) }

// Routes writes the routes of a table (fib.TableAll: every table, each
// route naming its table unless main).
func Routes(w io.Writer, f *fib.FIB, table uint32, asJSON bool) error {
	return RoutesFiltered(w, f, config.RouteFilter{Table: table}, asJSON)
}

// RoutesFiltered writes the routes a selector takes (`ip route show dev D
// proto P 10.2.0.0/24`). As iproute2, what the selector fixes is not
// repeated on every line: no `dev` when filtering by device, no `proto`
// by protocol, no `scope` by scope.
func RoutesFiltered(w io.Writer, f *fib.FIB, flt config.RouteFilter, asJSON bool) error {
	routes := f.Routes(flt.Table)
	withTable := flt.Table == fib.TableAll
	of := func(r *fib.Route) Route {
		j := RouteOf(r, withTable)
		if flt.Dev != "" {
			j.Dev = ""
		}
		if flt.Proto != 0 {
			j.Protocol = ""
		}
		if flt.ScopeSet {
			j.Scope = ""
		}
		return j
	}
	if asJSON {
		a := jsonArray{w: w}
		for _, r := range routes {
			if flt.Selects(r) {
				a.add(of(r))
			}
		}
		return a.close()
	}
	var b []byte
	for _, r := range routes {
		if !flt.Selects(r) {
			continue
		}
		j := of(r)
		b = append(j.AppendText(b[:0]), '\n')
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}
