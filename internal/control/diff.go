package control

// Reload diffs: the steps that take an engine configured by file A to the
// state file B gives a fresh engine, touching only what changed.
//
// Flow: both files are normalised into logical commands (one per effect:
// `link set eth1 up mtu 9000 master br0` is three, `link add br0 type
// bridge ageing_time 100` is a creation plus an attribute), matched by their
// canonical text (the i-th occurrence in A with the i-th in B). Unmatched
// ones are removed (A) or added (B). Each logical command owns keys (the
// objects it sets) and depends on keys (objects whose re-creation undoes or
// changes its effect). The keys of removed and added commands are dirty;
// any command owning or depending on a dirty key is re-done and dirties all
// it owns, until nothing changes. The result is: the inverses of the re-done
// A commands in reverse A order (lenient: an inverse of something already
// gone is skipped), then the re-done B commands in B order, for one
// all-or-nothing Apply.
//
// Keys and rules (why each is needed is in the comments of logicalOf):
//   dev:N        a bridge or VLAN interface N exists (re-creating it resets all on it)
//   brport:P     P's bridge membership and everything on it (vlan, fdb, link flags, mdb):
//                redone as a unit; its inverse is `nomaster`, which resets all of it
//   iface:P      the router interface of port P (it exists while P is not bridged)
//   brattr:B:O   bridge attribute O (ageing_time, fdb_max_learned)
//   hostvlan:B:V the host membership a VLAN interface brings
//   addr:D       D's addresses (redone as a unit: order makes primaries/secondaries,
//                and removing the last one flushes D's routes); addr:* is any of them
//   route:T:P    the routes of table T at prefix P (order among equal metrics matters)
//   nh:I         nexthop I (deleting it deletes its routes and shrinks its groups)
//   linkstate:D, mtu:D, mac:D  link settings (down and MAC changes flush neighbours)
//   neigh:D:A    the neighbour entry
// The bridge device's own VLANs and FDB entries (`dev BR`) have no reset, so
// changing any of them re-creates the bridge (dev:BR).
//
// Locking: pure functions.

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"sort"
	"strings"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/wire"
)

// DiffOptions tune Diff.
type DiffOptions struct {
	// BridgeMAC returns the current MAC of a bridge: a bridge without a
	// configured address that has to be re-created keeps it (its random
	// address would otherwise change under the hosts' ARP caches).
	BridgeMAC func(name string) (wire.MAC, bool)
}

// DiffStats describe a diff.
type DiffStats struct {
	Removed, Added, Redone int // logical commands
}

// Diff returns the steps that take an engine configured with old to the
// configuration new (see the file comment).
func Diff(old, new []config.Command, opts DiffOptions) ([]Step, DiffStats) {
	return diff(old, new, opts, false)
}

// FullRedo is the diff that re-does everything: every inverse of old, then
// all of new (the fallback when a diff cannot be trusted).
func FullRedo(old, new []config.Command, opts DiffOptions) []Step {
	s, _ := diff(old, new, opts, true)
	return s
}

func diff(old, new []config.Command, opts DiffOptions, all bool) ([]Step, DiffStats) {
	bridges := map[string]bool{}
	for _, set := range [][]config.Command{old, new} {
		for _, c := range set {
			if c.Link != nil && c.Link.Op == "add" && c.Link.Kind == "bridge" {
				bridges[c.Link.Name] = true
			}
		}
	}
	a, b := normalise(old, bridges), normalise(new, bridges)
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
	pulled := map[string]bool{} // keys whose owners are re-done (see logical.pulls)
	mark := func(l *logical) {
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
			if debugDiff {
				fmt.Println("removed", a[i].text, a[i].own)
			}
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
	touched := func(l *logical) bool {
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
			if debugDiff {
				fmt.Println("redo B", b[j].text, b[j].own, b[j].deps)
			}
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
			if debugDiff {
				fmt.Println("redo A", a[i].text, a[i].own, a[i].deps)
			}
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

// logical is one normalised command.
type logical struct {
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

func normalise(cmds []config.Command, bridges map[string]bool) []logical {
	var out []logical
	for i := range cmds {
		out = append(out, logicalOf(&cmds[i], bridges)...)
	}
	return out
}

// with returns a copy of c (position kept) with one part replaced.
func with(c *config.Command, f func(*config.Command)) config.Command {
	n := config.Command{Pos: c.Pos, Text: c.Text}
	f(&n)
	return n
}

// bridgeDefaults are the values attribute inverses restore.
var bridgeDefaults = map[string]string{"ageing_time": "30000", "fdb_max_learned": "0"}

// createOptions stay with a bridge's creation: changing them re-creates it
// (ports joined before and after a pvid change differ).
var createOptions = map[string]bool{"vlan_filtering": true, "vlan_default_pvid": true}

func logicalOf(c *config.Command, bridges map[string]bool) []logical {
	switch {
	case c.Link != nil:
		return linkLogical(c)
	case c.Bridge != nil && c.Bridge.Op != nil:
		return []logical{bridgeLogical(c, bridges)}
	case c.Addr != nil:
		return []logical{addrLogical(c)}
	case c.Route != nil:
		return []logical{routeLogical(c)}
	case c.Nexthop != nil:
		return []logical{nexthopLogical(c)}
	case c.Neigh != nil:
		return []logical{neighLogical(c)}
	}
	// A query in a file (refused by Apply anyway).
	return []logical{{text: "query " + c.Text, fwd: *c}}
}

func linkLogical(c *config.Command) []logical {
	l := c.Link
	name := l.Name
	switch l.Op {
	case "add":
		if l.Kind == "vlan" {
			return []logical{{
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
		out := []logical{{
			text:    fmt.Sprintf("bridge %s address %s options %v", name, l.Address, createOpts),
			fwd:     with(c, func(n *config.Command) { n.Link = &create }),
			inverse: []config.Command{with(c, func(n *config.Command) { n.Link = &config.LinkCmd{Op: "delete", Name: name} })},
			own:     []string{"dev:" + name},
		}}
		for _, k := range attrs {
			v := l.Options[k]
			def, ok := bridgeDefaults[k]
			if !ok {
				def = v
			}
			out = append(out, logical{
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
	case "delete":
		return []logical{{text: "link del " + name, fwd: *c, own: []string{"dev:" + name}}}
	case "set":
		var out []logical
		set := func(text string, lc config.LinkCmd, inv *config.LinkCmd, own []string, deps ...string) {
			// Every line naming a device is re-done when the device is
			// re-created or stops being a bridge (it declares it as a port).
			deps = append(deps, "dev:"+name)
			lg := logical{text: text, fwd: with(c, func(n *config.Command) { x := lc; n.Link = &x }), own: own, deps: deps}
			if inv != nil {
				lg.inverse = []config.Command{with(c, func(n *config.Command) { x := *inv; n.Link = &x })}
			}
			out = append(out, lg)
		}
		if l.Master != "" {
			set("master "+name+" "+l.Master, config.LinkCmd{Op: "set", Name: name, Master: l.Master},
				&config.LinkCmd{Op: "set", Name: name, NoMaster: true},
				[]string{"brport:" + name, "iface:" + name}, "dev:"+l.Master)
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
	return []logical{{text: "link " + l.Op + " " + name, fwd: *c}}
}

// bridgeLogical: lines on a port belong to its brport unit (reset by
// `nomaster`); lines on the bridge device re-create the bridge.
func bridgeLogical(c *config.Command, bridges map[string]bool) logical {
	lg := logical{text: c.Bridge.Op.String(), fwd: *c}
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
func addrLogical(c *config.Command) logical {
	a := c.Addr
	lg := logical{text: fmt.Sprintf("address %s %s dev %s", a.Op, a.Prefix, a.Dev), fwd: *c,
		own: []string{"addr:" + a.Dev}, deps: []string{"dev:" + a.Dev}}
	if a.Op == "add" {
		lg.inverse = []config.Command{with(c, func(n *config.Command) {
			n.Addr = &config.AddrCmd{Op: "delete", Dev: a.Dev, Prefix: a.Prefix}
		})}
		p := a.Prefix
		lg.own = append(lg.own, routeKey(fib.TableLocal, netip.PrefixFrom(p.Addr(), 32)))
		if p.Bits() < 31 {
			lg.own = append(lg.own, routeKey(fib.TableLocal, netip.PrefixFrom(fib.LastAddr(p), 32)))
		}
		if p.Bits() < 32 {
			lg.own = append(lg.own, routeKey(fib.TableMain, p.Masked()))
		}
	}
	return lg
}

func routeKey(table uint32, p netip.Prefix) string { return fmt.Sprintf("route:%d:%s", table, p) }

func routeTable(s *fib.RouteSpec) uint32 {
	if s.Table != 0 {
		return s.Table
	}
	if s.TypeSet && (s.Type == fib.Local || s.Type == fib.Broadcast) {
		return fib.TableLocal
	}
	return fib.TableMain
}

// routeLogical: a route depends on its nexthop object, on the addresses of
// its devices (a device losing its last address flushes its routes), and on
// every address when a gateway's device is not given or a source is.
func routeLogical(c *config.Command) logical {
	r := c.Route
	s := r.Spec
	lg := logical{text: fmt.Sprintf("route %s %+v", r.Op, s), fwd: *c, own: []string{routeKey(routeTable(&s), s.Prefix)}}
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
		lg.inverse = []config.Command{with(c, func(n *config.Command) { n.Route = &config.RouteCmd{Op: "delete", Spec: inv} })}
	}
	return lg
}

func nexthopLogical(c *config.Command) logical {
	n := c.Nexthop
	id := n.Spec.ID
	lg := logical{text: fmt.Sprintf("nexthop %s %+v", n.Op, n.Spec), fwd: *c, own: []string{fmt.Sprintf("nh:%d", id)}}
	for _, m := range n.Spec.Group {
		lg.deps = append(lg.deps, fmt.Sprintf("nh:%d", m.ID))
	}
	if d := n.Spec.Single.Dev; d != "" {
		lg.pulls = append(lg.pulls, "linkstate:"+d) // checked against it (see logical.pulls)
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
func neighLogical(c *config.Command) logical {
	o, err := parseNeigh(c.Neigh.Args)
	if err != nil {
		return logical{text: "neigh " + strings.Join(c.Neigh.Args, " "), fwd: *c}
	}
	lg := logical{text: o.String(), fwd: *c, own: []string{"neigh:" + o.dev + ":" + o.ip.String()},
		deps: []string{"dev:" + o.dev, "iface:" + o.dev, "mac:" + o.dev}}
	if o.state != permanentState {
		// A link-down line after it in the file flushes it: it follows the
		// link state lines, and re-doing it re-does them.
		lg.deps = append(lg.deps, "linkstate:"+o.dev)
		lg.pulls = append(lg.pulls, "linkstate:"+o.dev)
	}
	if o.op != "delete" {
		lg.inverse = []config.Command{with(c, func(n *config.Command) {
			n.Neigh = &config.NeighCmd{Args: []string{"del", o.ip.String(), "dev", o.dev}}
		})}
	}
	return lg
}

var debugDiff = os.Getenv("NETFWD_DEBUG_DIFF") != ""
