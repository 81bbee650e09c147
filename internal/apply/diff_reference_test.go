package apply

// The reference model of the reload diff: the first implementation, which
// kept every logical command with its keys as strings in maps (simple, and
// ~1 KB per route line). TestDiffMatchesReference holds the compact diff
// (diff.go) to exactly its steps and statistics on random pairs.

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/neigh"
)

func refDiff(old, new []config.Command, opts DiffOptions, all bool) ([]Step, DiffStats) {
	bridges := map[string]bool{}
	for _, set := range [][]config.Command{old, new} {
		for _, c := range set {
			if c.Link != nil && c.Link.Op == "add" && c.Link.Kind == "bridge" {
				bridges[c.Link.Name] = true
			}
		}
	}
	a, b := refNormalise(old, bridges), refNormalise(new, bridges)
	// Match equal commands in order.
	queue := map[string][]int{}
	for i := range a {
		queue[a[i].text] = append(queue[a[i].text], i)
	}
	aRedo, bRedo := make([]bool, len(a)), make([]bool, len(b))
	bPair := make([]int, len(b))
	aPair := make([]int, len(a))
	for i := range aPair {
		aPair[i] = -1
	}
	var st DiffStats
	for j := range b {
		q := queue[b[j].text]
		if len(q) == 0 || all {
			bPair[j] = -1
			bRedo[j] = true
			st.Added++
			continue
		}
		bPair[j], aPair[q[0]] = q[0], j
		queue[b[j].text] = q[1:]
	}
	dirty := map[string]bool{}
	pulled := map[string]bool{} // keys whose owners are re-done (see refLogical.pulls)
	mark := func(l *refLogical) {
		for _, k := range l.own {
			dirty[k] = true
			if strings.HasPrefix(k, "addr:") {
				dirty["addr:*"] = true
			}
		}
		for _, k := range l.pulls {
			pulled[k] = true
		}
	}
	for i := range a {
		if aPair[i] < 0 {
			aRedo[i] = true
			st.Removed++
			mark(&a[i])
		}
	}
	for j := range b {
		if bRedo[j] {
			mark(&b[j])
		}
	}
	// Order within a key matters (primary and secondary addresses, equal
	// metric routes, the last of several settings wins): a key whose common
	// commands come in another order in B is dirty.
	lastB := map[string]int{}
	for i := range a {
		j := aPair[i]
		if j < 0 {
			continue
		}
		// (pulls too: a neighbour or route moved across a link-down line)
		for _, k := range append(append([]string(nil), a[i].own...), a[i].pulls...) {
			if prev, ok := lastB[k]; ok && prev > j {
				dirty[k] = true
			}
			lastB[k] = j
		}
	}
	touched := func(l *refLogical) bool {
		for _, k := range l.own {
			if dirty[k] || pulled[k] || strings.HasPrefix(k, "linkstate:") && pulled["linkstate:*"] {
				return true
			}
		}
		for _, k := range l.deps {
			if dirty[k] {
				return true
			}
		}
		return false
	}
	for changed := true; changed; {
		changed = false
		for j := range b {
			if bRedo[j] || !touched(&b[j]) && (bPair[j] < 0 || !touched(&a[bPair[j]])) {
				continue
			}
			bRedo[j] = true
			mark(&b[j])
			if i := bPair[j]; i >= 0 {
				aRedo[i] = true
				mark(&a[i])
			}
			st.Redone++
			changed = true
		}
		for i := range a {
			if aRedo[i] || !touched(&a[i]) {
				continue
			}
			aRedo[i] = true // a common command: its B twin follows on the next round
			mark(&a[i])
			changed = true
		}
	}
	// Inverses in reverse order; FDB and mdb deletions first of all (no
	// other inverse depends on them, and they must precede the `nomaster`
	// or bridge deletion that resets their unit: see bridgeLogical).
	var steps, late []Step
	for i := len(a) - 1; i >= 0; i-- {
		if aRedo[i] {
			for _, inv := range a[i].inverse {
				st := Step{Command: inv, Lenient: true}
				if inv.Bridge != nil {
					steps = append(steps, st)
				} else {
					late = append(late, st)
				}
			}
		}
	}
	steps = append(steps, late...)
	for j := range b {
		if !bRedo[j] {
			continue
		}
		fwd := b[j].fwd
		if l := fwd.Link; l != nil && l.Op == "add" && l.Kind == "bridge" && len(l.Address) == 0 && opts.BridgeMAC != nil {
			if mac, ok := opts.BridgeMAC(l.Name); ok {
				c := *l
				c.Address = net.HardwareAddr(mac[:])
				fwd.Link = &c
			}
		}
		steps = append(steps, Step{Command: fwd})
	}
	return steps, st
}

// refLogical is one normalised command.
type refLogical struct {
	text    string           // canonical form, for matching
	fwd     config.Command   // what applies it
	inverse []config.Command // what undoes it (applied leniently)
	own     []string
	deps    []string
	// pulls are keys whose commands must be re-done when this one is,
	// without this one depending on them: a route is checked against the
	// link state of its device where it stands in the file, so re-adding it
	// re-applies the device's link state lines in order around it
	// ("linkstate:*": every device's, for a gateway whose device is not
	// named); a later link change does not affect the route itself.
	pulls []string
}

func refNormalise(cmds []config.Command, bridges map[string]bool) []refLogical {
	var out []refLogical
	masters := map[string]string{} // each port's bridge at this point of the file
	vrfs := map[string]uint32{}    // the VRFs declared so far: a `route ... vrf NAME` line's table
	for i := range cmds {
		c := &cmds[i]
		lgs := refLogicalOf(c, bridges, vrfs)
		if c.Bridge != nil {
			// A port's lines also own its bridge's brports key (see
			// bridgeSetLogicals).
			for j := range lgs {
				for _, k := range lgs[j].own {
					if p, ok := strings.CutPrefix(k, "brport:"); ok && masters[p] != "" {
						lgs[j].own = append(lgs[j].own, "brports:"+masters[p])
						break
					}
				}
			}
		}
		if l := c.Link; l != nil && l.Op == "set" && (l.Master != "" || l.NoMaster) {
			masters[l.Name] = l.Master
		}
		if l := c.Link; l != nil && l.Op == "add" && l.Kind == "vrf" {
			vrfs[l.Name] = l.Table
		}
		if l := c.Link; l != nil && l.Op == "delete" {
			delete(vrfs, l.Name)
			for p, m := range masters {
				if m == l.Name {
					delete(masters, p)
				}
			}
		}
		out = append(out, lgs...)
	}
	return out
}

func refLogicalOf(c *config.Command, bridges map[string]bool, vrfs map[string]uint32) []refLogical {
	switch {
	case c.Link != nil:
		return refLinkLogical(c)
	case c.Bridge != nil:
		return []refLogical{refBridgeLogical(c, bridges)}
	case c.Addr != nil:
		return []refLogical{refAddrLogical(c)}
	case c.Route != nil:
		return []refLogical{refRouteLogical(c, vrfs)}
	case c.Nexthop != nil:
		return []refLogical{refNexthopLogical(c)}
	case c.Neigh != nil:
		return []refLogical{refNeighLogical(c)}
	}
	// A query in a file (refused by Apply anyway).
	return []refLogical{{text: "query " + c.Text, fwd: *c}}
}

func refLinkLogical(c *config.Command) []refLogical {
	l := c.Link
	name := l.Name
	switch l.Op {
	case "add":
		if l.Kind == "vrf" {
			return []refLogical{{
				text:    fmt.Sprintf("vrf %s table %d", name, l.Table),
				fwd:     *c,
				inverse: []config.Command{with(c, func(n *config.Command) { n.Link = &config.LinkCmd{Op: "delete", Name: name} })},
				own:     []string{"dev:" + name},
			}}
		}
		if l.Kind == "vlan" {
			return []refLogical{{
				text:    fmt.Sprintf("vlan %s link %s id %d", name, l.Parent, l.VID),
				fwd:     *c,
				inverse: []config.Command{with(c, func(n *config.Command) { n.Link = &config.LinkCmd{Op: "delete", Name: name} })},
				own:     []string{"dev:" + name, fmt.Sprintf("hostvlan:%s:%d", l.Parent, l.VID)},
				deps:    []string{"dev:" + l.Parent},
			}}
		}
		createOpts := map[string]string{}
		var attrs []string
		for k, v := range l.Options {
			if createOptions[k] {
				createOpts[k] = v
			} else {
				attrs = append(attrs, k)
			}
		}
		sort.Strings(attrs)
		create := *l
		create.Options = createOpts
		out := []refLogical{{
			text:    fmt.Sprintf("bridge %s address %s options %v", name, l.Address, createOpts),
			fwd:     with(c, func(n *config.Command) { n.Link = &create }),
			inverse: []config.Command{with(c, func(n *config.Command) { n.Link = &config.LinkCmd{Op: "delete", Name: name} })},
			own:     []string{"dev:" + name},
		}}
		return append(out, refBridgeAttrLogicals(c, attrs)...)
	case "delete":
		return []refLogical{{text: "link del " + name, fwd: *c, own: []string{"dev:" + name}}}
	case "set":
		if l.Kind == "bridge" {
			return refBridgeSetLogicals(c)
		}
		var out []refLogical
		set := func(text string, lc config.LinkCmd, inv *config.LinkCmd, own []string, deps ...string) {
			// Every line naming a device is re-done when the device is
			// re-created or stops being a bridge (it declares it as a port).
			deps = append(deps, "dev:"+name)
			lg := refLogical{text: text, fwd: with(c, func(n *config.Command) { x := lc; n.Link = &x }), own: own, deps: deps}
			if inv != nil {
				lg.inverse = []config.Command{with(c, func(n *config.Command) { x := *inv; n.Link = &x })}
			}
			out = append(out, lg)
		}
		if l.Master != "" {
			set("master "+name+" "+l.Master, config.LinkCmd{Op: "set", Name: name, Master: l.Master},
				&config.LinkCmd{Op: "set", Name: name, NoMaster: true},
				[]string{"brport:" + name, "iface:" + name, "brports:" + l.Master}, "dev:"+l.Master)
		}
		if l.NoMaster {
			set("nomaster "+name, config.LinkCmd{Op: "set", Name: name, NoMaster: true}, nil,
				[]string{"brport:" + name, "iface:" + name})
		}
		if l.Up || l.Down {
			set(fmt.Sprintf("linkstate %s up=%v", name, l.Up), config.LinkCmd{Op: "set", Name: name, Up: l.Up, Down: l.Down},
				&config.LinkCmd{Op: "set", Name: name, Up: true}, []string{"linkstate:" + name})
		}
		if l.MTU > 0 {
			set(fmt.Sprintf("mtu %s %d", name, l.MTU), config.LinkCmd{Op: "set", Name: name, MTU: l.MTU},
				&config.LinkCmd{Op: "set", Name: name, MTU: 1500}, []string{"mtu:" + name})
		}
		if len(l.Address) == 6 {
			set(fmt.Sprintf("mac %s %s", name, l.Address), config.LinkCmd{Op: "set", Name: name, Address: l.Address},
				&config.LinkCmd{Op: "set", Name: name, Address: make(net.HardwareAddr, 6)}, []string{"mac:" + name})
		}
		if len(out) == 0 { // `link set eth0`: names a port, sets nothing
			set("link "+name, config.LinkCmd{Op: "set", Name: name}, nil, nil)
		}
		return out
	}
	return []refLogical{{text: "link " + l.Op + " " + name, fwd: *c}}
}

// bridgeAttrLogicals: one refLogical command per bridge attribute of a `link
// add|set BR type bridge` line (keys in sorted order), each set back to its
// default by its inverse.
func refBridgeAttrLogicals(c *config.Command, keys []string) []refLogical {
	name := c.Link.Name
	var out []refLogical
	for _, k := range keys {
		v := c.Link.Options[k]
		def, ok := bridgeDefaults[k]
		if !ok {
			def = v
		}
		out = append(out, refLogical{
			text: fmt.Sprintf("bridge-attr %s %s %s", name, k, v),
			fwd: with(c, func(n *config.Command) {
				n.Link = &config.LinkCmd{Op: "set", Name: name, Kind: "bridge", Options: map[string]string{k: v}}
			}),
			inverse: []config.Command{with(c, func(n *config.Command) {
				n.Link = &config.LinkCmd{Op: "set", Name: name, Kind: "bridge", Options: map[string]string{k: def}}
			})},
			own:  []string{"brattr:" + name + ":" + k},
			deps: []string{"dev:" + name},
		})
	}
	return out
}

// bridgeSetLogicals: `link set BR type bridge OPTIONS` at file level. The
// attributes that the reset of a bridge cannot undo one by one
// (vlan_filtering and vlan_default_pvid move ports' VLANs) own the bridge
// itself: a change re-creates it, as for its `link add` line. They also
// depend on the bridge's memberships (brports:B): a port joining again
// after such a line gets the VLANs of the new defaults, so re-doing any
// membership of B re-does the line, and with it the bridge.
func refBridgeSetLogicals(c *config.Command) []refLogical {
	name := c.Link.Name
	var attrs []string
	var out []refLogical
	for k, v := range c.Link.Options {
		if !createOptions[k] {
			attrs = append(attrs, k)
			continue
		}
		out = append(out, refLogical{
			text: fmt.Sprintf("bridge-create-attr %s %s %s", name, k, v),
			fwd: with(c, func(n *config.Command) {
				n.Link = &config.LinkCmd{Op: "set", Name: name, Kind: "bridge", Options: map[string]string{k: v}}
			}),
			own:  []string{"dev:" + name},
			deps: []string{"dev:" + name, "brports:" + name},
			// Pulled too, so that moving port lines across it counts as a
			// change of order.
			pulls: []string{"brports:" + name},
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].text < out[j].text })
	sort.Strings(attrs)
	return append(out, refBridgeAttrLogicals(c, attrs)...)
}

// bridgeLogical: lines on a port belong to its brport unit (reset by
// `nomaster`); lines on the bridge device re-create the bridge.
func refBridgeLogical(c *config.Command, bridges map[string]bool) refLogical {
	lg := refLogical{text: c.Bridge.Op.String(), fwd: *c}
	dev := ""
	var vids [2]uint16
	self := false
	switch o := c.Bridge.Op.(type) {
	case l2.VLANAdd:
		dev, vids, self = o.Dev, [2]uint16{o.VID, o.VIDEnd}, o.Self
	case l2.VLANDel:
		dev, vids, self = o.Dev, [2]uint16{o.VID, o.VIDEnd}, o.Self
	case l2.FDBAdd:
		dev = o.Dev
		// The unit's reset (nomaster, bridge deletion) removes the entry,
		// but l2's validation view does not know that yet: delete it
		// explicitly first, so the re-add in the same batch validates.
		lg.inverse = []config.Command{with(c, func(n *config.Command) {
			n.Bridge = &config.BridgeCmd{Op: l2.FDBDel{MAC: o.MAC, Dev: o.Dev, VID: o.VID, HasVID: o.HasVID}}
		})}
	case l2.FDBDel:
		dev = o.Dev
	case l2.LinkSet:
		dev = o.Dev
	case l2.MDBAdd:
		lg.own, lg.deps = []string{"brport:" + o.Port}, []string{"dev:" + o.Bridge}
		lg.inverse = []config.Command{with(c, func(n *config.Command) { // as for FDBAdd
			n.Bridge = &config.BridgeCmd{Op: l2.MDBDel{Bridge: o.Bridge, Port: o.Port, Group: o.Group, VID: o.VID}}
		})}
		return lg
	case l2.MDBDel:
		lg.own, lg.deps = []string{"brport:" + o.Port}, []string{"dev:" + o.Bridge}
		return lg
	}
	if bridges[dev] || self {
		lg.own = []string{"dev:" + dev}
		if vids[0] != 0 {
			forVIDs(vids[0], vids[1], func(v uint16) { lg.deps = append(lg.deps, fmt.Sprintf("hostvlan:%s:%d", dev, v)) })
		}
		return lg
	}
	lg.own = []string{"brport:" + dev}
	return lg
}

// addrLogical: an address also owns the keys of the routes derived from it,
// so user routes sharing their (table, prefix) are re-done in order with
// them.
func refAddrLogical(c *config.Command) refLogical {
	a := c.Addr
	lg := refLogical{text: fmt.Sprintf("address %s %s dev %s", a.Op, a.Prefix, a.Dev), fwd: *c,
		own: []string{"addr:" + a.Dev}, deps: []string{"dev:" + a.Dev}}
	if a.Op == "add" {
		lg.inverse = []config.Command{with(c, func(n *config.Command) {
			n.Addr = &config.AddrCmd{Op: "delete", Dev: a.Dev, Prefix: a.Prefix}
		})}
		p := a.Prefix
		lg.own = append(lg.own, refRouteKey(fib.TableLocal, netip.PrefixFrom(p.Addr(), 32)))
		if p.Bits() < 31 {
			lg.own = append(lg.own, refRouteKey(fib.TableLocal, netip.PrefixFrom(fib.LastAddr(p), 32)))
		}
		if p.Bits() < 32 {
			lg.own = append(lg.own, refRouteKey(fib.TableMain, p.Masked()))
		}
	}
	return lg
}

func refRouteKey(table uint32, p netip.Prefix) string { return fmt.Sprintf("route:%d:%s", table, p) }

// routeLogical: a route depends on its nexthop object, on the addresses of
// its devices (a device losing its last address flushes its routes), and on
// every address when a gateway's device is not given or a source is; a
// `vrf NAME` route on its VRF (keyed by the VRF's table as declared so far
// in the file, 0 if it is not declared there).
func refRouteLogical(c *config.Command, vrfs map[string]uint32) refLogical {
	r := c.Route
	s := r.Spec
	table := routeTable(&s)
	if r.VRF != "" {
		table = vrfs[r.VRF]
	}
	lg := refLogical{text: fmt.Sprintf("route %s vrf %q %+v", r.Op, r.VRF, s), fwd: *c, own: []string{refRouteKey(table, s.Prefix)}}
	if r.VRF != "" {
		lg.deps = append(lg.deps, "dev:"+r.VRF)
	}
	if s.NhID != 0 {
		lg.deps = append(lg.deps, fmt.Sprintf("nh:%d", s.NhID))
	}
	anyAddr := s.Src.IsValid() || s.Gateway.IsValid() && s.Dev == ""
	if s.Dev != "" {
		lg.deps = append(lg.deps, "addr:"+s.Dev, "dev:"+s.Dev)
		lg.pulls = append(lg.pulls, "linkstate:"+s.Dev)
	}
	for _, p := range s.Multipath {
		if p.Dev != "" {
			lg.deps = append(lg.deps, "addr:"+p.Dev)
			lg.pulls = append(lg.pulls, "linkstate:"+p.Dev)
		} else {
			anyAddr = true
		}
	}
	if anyAddr {
		lg.deps = append(lg.deps, "addr:*")
	}
	if anyAddr || s.Gateway.IsValid() && s.Dev == "" {
		lg.pulls = append(lg.pulls, "linkstate:*")
	}
	if r.Op != "delete" {
		inv := s
		if inv.Proto == 0 {
			inv.Proto = fib.ProtoBoot
		}
		inv.TypeSet = true
		lg.inverse = []config.Command{with(c, func(n *config.Command) { n.Route = &config.RouteCmd{Op: "delete", Spec: inv, VRF: r.VRF} })}
	}
	return lg
}

func refNexthopLogical(c *config.Command) refLogical {
	n := c.Nexthop
	id := n.Spec.ID
	lg := refLogical{text: fmt.Sprintf("nexthop %s %+v", n.Op, n.Spec), fwd: *c, own: []string{fmt.Sprintf("nh:%d", id)}}
	for _, m := range n.Spec.Group {
		lg.deps = append(lg.deps, fmt.Sprintf("nh:%d", m.ID))
	}
	if d := n.Spec.Single.Dev; d != "" {
		lg.pulls = append(lg.pulls, "linkstate:"+d) // checked against it (see refLogical.pulls)
		lg.deps = append(lg.deps, "dev:"+d)
	}
	if n.Op != "delete" {
		lg.inverse = []config.Command{with(c, func(x *config.Command) {
			x.Nexthop = &config.NexthopCmd{Op: "delete"}
			x.Nexthop.Spec.ID = id
		})}
	}
	return lg
}

// neighLogical: an entry goes when its interface is re-created or changes
// its MAC, and (unless permanent) when its link goes down.
func refNeighLogical(c *config.Command) refLogical {
	o := c.Neigh
	lg := refLogical{text: o.String(), fwd: *c, own: []string{"neigh:" + o.Dev + ":" + o.IP.String()},
		deps: []string{"dev:" + o.Dev, "iface:" + o.Dev, "mac:" + o.Dev},
		// A MAC change flushes the entries before it, not those after it:
		// moving the entry across a `link set D address` line is a change.
		pulls: []string{"mac:" + o.Dev}}
	if o.State != neigh.NUDPermanent {
		// A link-down line after it in the file flushes it: it follows the
		// link state lines, and re-doing it re-does them.
		lg.deps = append(lg.deps, "linkstate:"+o.Dev)
		lg.pulls = append(lg.pulls, "linkstate:"+o.Dev)
	}
	if o.Op != "delete" {
		lg.inverse = []config.Command{with(c, func(n *config.Command) {
			n.Neigh = &config.NeighCmd{Op: "delete", IP: o.IP, Dev: o.Dev}
		})}
	}
	return lg
}
