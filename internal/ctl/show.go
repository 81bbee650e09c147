package ctl

// Queries of the control socket: the state as iproute2 shows it (text), or
// as `ip -j` / `bridge -j` show it (JSON, one value per query).
//
// Locking: queries read published state (FIB snapshots, interface tables)
// and take the short dump locks of the tables they list.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/control"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
	"github.com/netfwd/netfwd/neigh"
)

// Query is one parsed query line.
type Query struct {
	Kind  string // route-show, route-get, fdb, vlan, neigh, link, address, nexthop, stats, reload
	Table uint32 // route-show
	Addr  string // route-get
	Dev   string // neigh, link, address, fdb (br)
	NUD   uint16 // neigh
}

// ParseQuery classifies a line: a query (parsed), or not (a config line).
func ParseQuery(line string) (*Query, bool, error) {
	if i := strings.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	w := strings.Fields(line)
	if len(w) > 0 && w[0] == "ip" {
		w = w[1:]
	}
	if len(w) == 0 {
		return nil, false, nil
	}
	isShow := func(s string) bool { return s == "show" || s == "list" || s == "ls" || s == "sh" || s == "lst" }
	obj := w[0]
	if obj == "bridge" && len(w) > 1 {
		obj, w = w[1], w[1:]
	}
	switch obj {
	case "stats":
		return &Query{Kind: "stats"}, true, nil
	case "reload":
		return &Query{Kind: "reload"}, true, nil
	}
	if len(w) < 2 {
		if obj == "fdb" || obj == "vlan" || obj == "nexthop" || obj == "nh" {
			w = append(w, "show")
		} else {
			return nil, false, nil
		}
	}
	verb, args := w[1], w[2:]
	switch {
	case (obj == "route" || obj == "ro" || obj == "r") && verb == "get":
		if len(args) > 0 && args[0] == "to" {
			args = args[1:]
		}
		if len(args) != 1 {
			return nil, true, fmt.Errorf("route get: want one address")
		}
		return &Query{Kind: "route-get", Addr: args[0]}, true, nil
	case (obj == "route" || obj == "ro" || obj == "r") && isShow(verb):
		q := &Query{Kind: "route-show", Table: fib.TableMain}
		for len(args) > 0 {
			if args[0] != "table" || len(args) < 2 {
				return nil, true, fmt.Errorf("route show: unexpected %q (want: table local|main|all|N)", args[0])
			}
			if args[1] == "all" {
				q.Table = fib.TableAll
			} else if t, ok := fib.ParseTable(args[1]); ok {
				q.Table = t
			} else {
				return nil, true, fmt.Errorf("invalid table %q", args[1])
			}
			args = args[2:]
		}
		return q, true, nil
	case obj == "fdb" && isShow(verb):
		q := &Query{Kind: "fdb"}
		for i := 0; i+1 < len(args); i += 2 {
			if args[i] == "br" || args[i] == "dev" {
				q.Dev = args[i+1]
			}
		}
		return q, true, nil
	case obj == "vlan" && isShow(verb):
		return &Query{Kind: "vlan"}, true, nil
	case (obj == "neigh" || obj == "neighbour" || obj == "neighbor" || obj == "n") && isShow(verb):
		q := &Query{Kind: "neigh"}
		for i := 0; i < len(args); i++ {
			if i+1 >= len(args) {
				return nil, true, fmt.Errorf("neigh show: %q needs a value", args[i])
			}
			switch args[i] {
			case "dev":
				q.Dev = args[i+1]
			case "nud":
				if args[i+1] == "all" {
					q.NUD = neigh.ShowAll
				} else if args[i+1] == "none" {
					q.NUD |= neigh.ShowNone
				} else {
					st, err := neigh.ParseState(args[i+1])
					if err != nil {
						return nil, true, err
					}
					q.NUD |= uint16(st)
				}
			default:
				return nil, true, fmt.Errorf("neigh show: unexpected %q", args[i])
			}
			i++
		}
		return q, true, nil
	case (obj == "link" || obj == "l") && isShow(verb):
		q := &Query{Kind: "link"}
		if len(args) > 0 {
			q.Dev = args[len(args)-1]
		}
		return q, true, nil
	case (obj == "address" || obj == "addr" || obj == "a") && isShow(verb):
		q := &Query{Kind: "address"}
		if len(args) > 0 {
			q.Dev = args[len(args)-1]
		}
		return q, true, nil
	case (obj == "nexthop" || obj == "nh") && isShow(verb):
		return &Query{Kind: "nexthop"}, true, nil
	}
	return nil, false, nil
}

// Answer writes the query's answer.
func (q *Query) Answer(w io.Writer, c *control.Controller, asJSON bool) error {
	e := c.Engine()
	switch q.Kind {
	case "route-get":
		_, err := w.Write(AppendRouteGet(nil, e.FIB(), q.Addr, asJSON))
		return err
	case "route-show":
		routes := e.FIB().Routes(q.Table)
		withTable := q.Table == fib.TableAll
		if asJSON {
			out := make([]fib.JSONRoute, len(routes))
			for i, r := range routes {
				out[i] = r.JSON(withTable)
			}
			return writeJSON(w, out)
		}
		bw := bufio.NewWriter(w)
		for _, r := range routes {
			fmt.Fprintln(bw, r.Format(withTable))
		}
		return bw.Flush()
	case "fdb":
		return answerFDB(w, e, q.Dev, asJSON)
	case "vlan":
		return answerVLAN(w, e, asJSON)
	case "neigh":
		return answerNeigh(w, e, q, asJSON)
	case "link":
		return answerLink(w, c, q.Dev, asJSON)
	case "address":
		return answerAddress(w, e, q.Dev, asJSON)
	case "nexthop":
		return answerNexthop(w, e, asJSON)
	case "stats":
		return answerStats(w, e, asJSON)
	}
	return fmt.Errorf("unknown query %q", q.Kind)
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

type fdbJSON struct {
	MAC    string   `json:"mac"`
	VLAN   uint16   `json:"vlan,omitempty"`
	Dev    string   `json:"dev"`
	Master string   `json:"master,omitempty"`
	Flags  []string `json:"flags"`
	State  string   `json:"state,omitempty"`
}

func answerFDB(w io.Writer, e *l3.Engine, br string, asJSON bool) error {
	var list []fdbJSON
	for _, b := range e.Domain().Bridges() {
		if br != "" && b.Name != br {
			continue
		}
		if !asJSON {
			if err := b.WriteFDB(w); err != nil {
				return err
			}
			continue
		}
		for _, en := range b.FDB().Entries() {
			j := fdbJSON{MAC: en.MAC.String(), VLAN: en.VID, Dev: b.Name, Flags: []string{}}
			if en.Port != nil {
				j.Dev, j.Master = en.Port.Name, b.Name
			} else {
				j.Flags = append(j.Flags, "self")
			}
			switch {
			case en.Local:
				j.State = "permanent"
			case en.Static:
				j.State = "static"
			}
			if en.Sticky {
				j.Flags = append(j.Flags, "sticky")
			}
			if en.Learned {
				j.Flags = append(j.Flags, "learned")
			}
			list = append(list, j)
		}
	}
	if asJSON {
		if list == nil {
			list = []fdbJSON{}
		}
		return writeJSON(w, list)
	}
	return nil
}

type vlanJSON struct {
	Ifname string          `json:"ifname"`
	VLANs  []vlanEntryJSON `json:"vlans"`
}

type vlanEntryJSON struct {
	VLAN  uint16   `json:"vlan"`
	Flags []string `json:"flags"`
}

// answerVLAN prints `bridge vlan show`; the JSON form is read back from
// the text (one source of truth for the listing).
func answerVLAN(w io.Writer, e *l3.Engine, asJSON bool) error {
	var all []vlanJSON
	for _, b := range e.Domain().Bridges() {
		var buf strings.Builder
		if err := b.WriteVLANs(&buf, false); err != nil {
			return err
		}
		if !asJSON {
			io.WriteString(w, buf.String())
			continue
		}
		var cur *vlanJSON
		for i, line := range strings.Split(buf.String(), "\n") {
			if i == 0 || strings.TrimSpace(line) == "" {
				continue
			}
			f := strings.Fields(line)
			if !strings.HasPrefix(line, " ") {
				all = append(all, vlanJSON{Ifname: f[0]})
				cur = &all[len(all)-1]
				f = f[1:]
			}
			if cur == nil || len(f) == 0 {
				continue
			}
			var v vlanEntryJSON
			fmt.Sscan(f[0], &v.VLAN)
			v.Flags = []string{}
			rest := strings.Join(f[1:], " ")
			if strings.Contains(rest, "PVID") {
				v.Flags = append(v.Flags, "PVID")
			}
			if strings.Contains(rest, "Untagged") {
				v.Flags = append(v.Flags, "Egress Untagged")
			}
			cur.VLANs = append(cur.VLANs, v)
		}
	}
	if asJSON {
		if all == nil {
			all = []vlanJSON{}
		}
		return writeJSON(w, all)
	}
	return nil
}

func devNames(e *l3.Engine) func(uint32) string {
	names := map[uint32]string{}
	for _, i := range e.Router().Ifaces() {
		names[i.Index] = i.Name
	}
	return func(i uint32) string {
		if n, ok := names[i]; ok {
			return n
		}
		return fmt.Sprintf("if%d", i)
	}
}

func answerNeigh(w io.Writer, e *l3.Engine, q *Query, asJSON bool) error {
	f := neigh.ShowFilter{States: q.NUD}
	if q.Dev != "" {
		ifc := e.Router().Iface(q.Dev)
		if ifc == nil {
			return fmt.Errorf("cannot find device %q", q.Dev)
		}
		f.IfIndex = ifc.Index
	}
	infos := e.Router().Neighbours().Dump(e.Domain().Clock().Now())
	if asJSON {
		return neigh.FormatJSON(w, infos, f, devNames(e))
	}
	return neigh.FormatShow(w, infos, f, devNames(e))
}

type linkJSON struct {
	Ifindex   uint32   `json:"ifindex,omitempty"`
	Ifname    string   `json:"ifname"`
	Flags     []string `json:"flags"`
	MTU       int      `json:"mtu,omitempty"`
	Operstate string   `json:"operstate"`
	LinkType  string   `json:"link_type"`
	Address   string   `json:"address,omitempty"`
	Kind      string   `json:"kind"`
	Master    string   `json:"master,omitempty"`
}

// answerLink lists the router interfaces and the bridge ports (which have
// no router interface while they are in a bridge).
func answerLink(w io.Writer, c *control.Controller, dev string, asJSON bool) error {
	e := c.Engine()
	var list []linkJSON
	seen := map[string]bool{}
	for _, i := range e.Router().Ifaces() {
		seen[i.Name] = true
		j := linkJSON{Ifindex: i.Index, Ifname: i.Name, MTU: i.MTU, LinkType: "ether", Address: i.MAC.String(), Kind: i.Kind.String()}
		j.Operstate, j.Flags = state(c, i.Name, i.Up())
		list = append(list, j)
	}
	for _, p := range e.Domain().Ports() {
		if seen[p.Name] || p.Bridge() == nil {
			continue
		}
		j := linkJSON{Ifname: p.Name, LinkType: "ether", Kind: "bridge_slave", Master: p.Bridge().Name}
		j.Operstate, j.Flags = state(c, p.Name, !c.AdminDown(p.Name) && !c.CarrierDown(p.Name))
		if !p.MAC.IsZero() {
			j.Address = p.MAC.String()
		}
		list = append(list, j)
	}
	if dev != "" {
		var f []linkJSON
		for _, l := range list {
			if l.Ifname == dev {
				f = append(f, l)
			}
		}
		if len(f) == 0 {
			return fmt.Errorf("device %q does not exist", dev)
		}
		list = f
	}
	if asJSON {
		if list == nil {
			list = []linkJSON{}
		}
		return writeJSON(w, list)
	}
	bw := bufio.NewWriter(w)
	for _, l := range list {
		idx := "-"
		if l.Ifindex != 0 {
			idx = fmt.Sprint(l.Ifindex)
		}
		fmt.Fprintf(bw, "%s: %s: <%s>", idx, l.Ifname, strings.Join(l.Flags, ","))
		if l.MTU > 0 {
			fmt.Fprintf(bw, " mtu %d", l.MTU)
		}
		fmt.Fprintf(bw, " state %s kind %s", l.Operstate, l.Kind)
		if l.Master != "" {
			fmt.Fprintf(bw, " master %s", l.Master)
		}
		fmt.Fprintf(bw, "\n    link/ether %s\n", orNone(l.Address))
	}
	return bw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "00:00:00:00:00:00"
	}
	return s
}

func state(c *control.Controller, name string, up bool) (string, []string) {
	flags := []string{"BROADCAST", "MULTICAST"}
	if !c.AdminDown(name) {
		flags = append(flags, "UP")
	}
	if !c.CarrierDown(name) {
		flags = append(flags, "LOWER_UP")
	} else {
		flags = append(flags, "NO-CARRIER")
	}
	if up {
		return "UP", flags
	}
	return "DOWN", flags
}

type addrJSON struct {
	Ifname   string         `json:"ifname"`
	AddrInfo []addrInfoJSON `json:"addr_info"`
}

type addrInfoJSON struct {
	Family    string `json:"family"`
	Local     string `json:"local"`
	Prefixlen int    `json:"prefixlen"`
	Broadcast string `json:"broadcast,omitempty"`
	Scope     string `json:"scope"`
	Secondary bool   `json:"secondary,omitempty"`
}

func answerAddress(w io.Writer, e *l3.Engine, dev string, asJSON bool) error {
	byDev := map[string][]fib.Address{}
	var order []string
	for _, a := range e.FIB().Addresses() {
		if dev != "" && a.Dev != dev {
			continue
		}
		if _, ok := byDev[a.Dev]; !ok {
			order = append(order, a.Dev)
		}
		byDev[a.Dev] = append(byDev[a.Dev], a)
	}
	index := map[string]uint32{}
	for _, i := range e.Router().Ifaces() {
		index[i.Name] = i.Index
	}
	sort.SliceStable(order, func(i, j int) bool { return index[order[i]] < index[order[j]] })
	var list []addrJSON
	for _, d := range order {
		j := addrJSON{Ifname: d}
		for _, a := range byDev[d] {
			ai := addrInfoJSON{Family: "inet", Local: a.Prefix.Addr().String(), Prefixlen: a.Prefix.Bits(), Scope: "global", Secondary: a.Secondary}
			if a.Prefix.Bits() < 31 {
				ai.Broadcast = fib.LastAddr(a.Prefix).String()
			}
			j.AddrInfo = append(j.AddrInfo, ai)
		}
		list = append(list, j)
	}
	if asJSON {
		if list == nil {
			list = []addrJSON{}
		}
		return writeJSON(w, list)
	}
	bw := bufio.NewWriter(w)
	for _, j := range list {
		fmt.Fprintf(bw, "%d: %s\n", index[j.Ifname], j.Ifname)
		for _, a := range j.AddrInfo {
			fmt.Fprintf(bw, "    inet %s/%d", a.Local, a.Prefixlen)
			if a.Broadcast != "" {
				fmt.Fprintf(bw, " brd %s", a.Broadcast)
			}
			fmt.Fprintf(bw, " scope %s", a.Scope)
			if a.Secondary {
				bw.WriteString(" secondary")
			}
			fmt.Fprintf(bw, " %s\n", j.Ifname)
		}
	}
	return bw.Flush()
}

type nexthopJSON struct {
	ID        uint32         `json:"id"`
	Gateway   string         `json:"gateway,omitempty"`
	Dev       string         `json:"dev,omitempty"`
	Blackhole bool           `json:"blackhole,omitempty"`
	Group     []nhMemberJSON `json:"group,omitempty"`
	Flags     []string       `json:"flags"`
}

type nhMemberJSON struct {
	ID     uint32 `json:"id"`
	Weight uint16 `json:"weight,omitempty"`
}

func answerNexthop(w io.Writer, e *l3.Engine, asJSON bool) error {
	var list []nexthopJSON
	bw := bufio.NewWriter(w)
	for _, id := range e.FIB().NexthopIDs() {
		nh, ok := e.FIB().Nexthop(id)
		if !ok {
			continue
		}
		if !asJSON {
			fmt.Fprintf(bw, "id %d %s", id, nh)
			if nh.Dead() {
				bw.WriteString(" dead linkdown")
			}
			bw.WriteByte('\n')
			continue
		}
		j := nexthopJSON{ID: id, Dev: nh.Dev, Flags: []string{}}
		if nh.Gateway.IsValid() {
			j.Gateway = nh.Gateway.String()
		}
		if nh.Kind.String() == "blackhole" {
			j.Blackhole = true
		}
		if nh.Group != nil {
			for _, m := range nh.Group.Members {
				j.Group = append(j.Group, nhMemberJSON{ID: m.NH.ID, Weight: m.Weight})
			}
		}
		if nh.Dead() {
			j.Flags = append(j.Flags, "dead", "linkdown")
		}
		list = append(list, j)
	}
	if asJSON {
		if list == nil {
			list = []nexthopJSON{}
		}
		return writeJSON(w, list)
	}
	return bw.Flush()
}

// answerStats prints the engine's main counters.
func answerStats(w io.Writer, e *l3.Engine, asJSON bool) error {
	s := e.Stats()
	d := e.Domain().Stats()
	m := map[string]uint64{
		"forwarded": s.Forwarded, "fragmented": s.Fragmented, "local": s.Local, "arp_in": s.ARPIn,
		"fib_lookups": s.FIBLookups, "icmp_rate_limited": s.ICMPRateLimited,
		"flood_inline": d.FloodInline, "flood_deferred": d.FloodDeferred, "host_delivered": d.HostDelivered,
		"fdb_learned": d.FDBLearned, "fdb_moved": d.FDBMoved, "fdb_aged": d.FDBAged,
	}
	for k, v := range s.Drops {
		m["l3_drop_"+k] = v
	}
	for _, r := range l2.DropReasons() {
		m["l2_drop_"+r.String()] = d.Drop(r)
	}
	for k, v := range s.ICMPSent {
		m["icmp_sent_"+k] = v
	}
	for name, ps := range d.Ports {
		m["port_"+name+"_rx_packets"] = ps.RxPackets
		m["port_"+name+"_tx_packets"] = ps.TxPackets
	}
	if asJSON {
		return writeJSON(w, m)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	bw := bufio.NewWriter(w)
	for _, k := range keys {
		fmt.Fprintf(bw, "%s %d\n", k, m[k])
	}
	return bw.Flush()
}
