package apply

// Reload diffs, part one: what one config command means to the diff. Each
// command is normalised into logical commands (one per effect), each with
// its canonical form (matched between the files), the command that applies
// it, the commands that undo it, and the keys it owns, depends on and pulls
// (diff.go's file comment says what each key stands for and why each rule
// is needed).
//
// Keys are small fixed-size values, not strings: a name (device, bridge,
// bridge option) is interned once per diff, a route key is its table and
// prefix, so that the keys of a million route lines cost no allocation.
// Route lines, the bulk of any large file, have their own path besides
// (routeRecord): their canonical form is hashed from a binary encoding and
// their dependency keys are shared, so reading one builds no logical at
// all.
//
// Locking: none; a normaliser belongs to one diff.

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"net"
	"net/netip"
	"sort"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/neigh"
)

// keyKind says what a key stands for (the names of diff.go's file comment).
type keyKind uint8

const (
	keyDev          keyKind = iota + 1 // dev:N        a: N
	keyBrport                          // brport:P     a: P
	keyBrports                         // brports:B    a: B
	keyIface                           // iface:P      a: P
	keyBrattr                          // brattr:B:O   a: B, b: O
	keyHostVLAN                        // hostvlan:B:V a: B, b: V
	keyAddr                            // addr:D       a: D
	keyAddrAny                         // addr:*
	keyRoute                           // route:T:P    a: T, b: P's address, bits: P's length
	keyNexthop                         // nh:I         a: I
	keyLinkstate                       // linkstate:D  a: D
	keyLinkstateAny                    // linkstate:*
	keyMTU                             // mtu:D        a: D
	keyMAC                             // mac:D        a: D
	keyNeigh                           // neigh:D:A    a: D, b: A
	keyRule                            // rule:P       a: P (diff_rule.go)
	keyRuleAll                         // rule:*
)

// key is one object a logical command owns, depends on or pulls. Names
// are interned (names.id); an address that is not IPv4 (never parsed
// today) is interned as text, flagged in bits.
type key struct {
	kind keyKind
	bits uint8
	a, b uint32
}

// notIPv4 in a key's bits: b is the interned text of an address or prefix.
const notIPv4 = 0xff

// logical is one normalised command.
type logical struct {
	text    string           // canonical form, for matching ("" for routes: see routeSum)
	fwd     config.Command   // what applies it
	inverse []config.Command // what undoes it (applied leniently)
	own     []key
	deps    []key
	// pulls are keys whose commands must be re-done when this one is,
	// without this one depending on them: a route is checked against the
	// link state of its device where it stands in the file, so re-adding it
	// re-applies the device's link state lines in order around it
	// (linkstate:*: every device's, for a gateway whose device is not
	// named); a later link change does not affect the route itself.
	pulls []key
}

// keySet is the keys of one logical command; route lines with the same
// dependencies share one.
type keySet struct{ own, deps, pulls []key }

// normaliser turns commands into logical commands and records for one
// diff (both files share its interned names, key sets and hash seeds).
type normaliser struct {
	ids     map[string]uint32
	names   []string
	bridges map[string]bool // bridges of either file (classifies bridge lines)
	sets    []keySet
	setIDs  map[string]uint32
	seeds   [2]maphash.Seed
	// rules are the two files' rule lines replayed (diff_rule.go); side
	// is the file being read (0: old, 1: new).
	rules [2]*ruleSim
	side  int
	// vrfTables are each file's VRFs as declared so far in it (side as
	// rules): a `route ... vrf NAME` line's key is its table's.
	vrfTables [2]map[string]uint32
	buf       []byte // scratch for encodings
	deps      []key  // scratch for route keys
	pulls     []key
}

func newNormaliser() *normaliser {
	return &normaliser{ids: map[string]uint32{}, bridges: map[string]bool{}, setIDs: map[string]uint32{},
		seeds:     [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		vrfTables: [2]map[string]uint32{{}, {}}}
}

// id interns a name.
func (n *normaliser) id(s string) uint32 {
	if id, ok := n.ids[s]; ok {
		return id
	}
	id := uint32(len(n.names))
	n.ids[s] = id
	n.names = append(n.names, s)
	return id
}

func (n *normaliser) named(k keyKind, name string) key { return key{kind: k, a: n.id(name)} }

func (n *normaliser) addr32(a netip.Addr) (uint32, uint8) {
	if !a.Is4() {
		return n.id(a.String()), notIPv4
	}
	b := a.As4()
	return binary.BigEndian.Uint32(b[:]), 0
}

func (n *normaliser) routeKey(table uint32, p netip.Prefix) key {
	if !p.Addr().Is4() {
		return key{kind: keyRoute, bits: notIPv4, a: table, b: n.id(p.String())}
	}
	a, _ := n.addr32(p.Addr())
	return key{kind: keyRoute, bits: uint8(p.Bits()), a: table, b: a}
}

func (n *normaliser) neighKey(dev string, ip netip.Addr) key {
	a, bits := n.addr32(ip)
	return key{kind: keyNeigh, bits: bits, a: n.id(dev), b: a}
}

// set interns a key set (lookups allocate nothing).
func (n *normaliser) set(own, deps, pulls []key) uint32 {
	b := n.buf[:0]
	for _, ks := range [][]key{own, deps, pulls} {
		b = binary.AppendUvarint(b, uint64(len(ks)))
		for _, k := range ks {
			b = append(b, byte(k.kind), k.bits)
			b = binary.LittleEndian.AppendUint32(b, k.a)
			b = binary.LittleEndian.AppendUint32(b, k.b)
		}
	}
	n.buf = b
	if id, ok := n.setIDs[string(b)]; ok {
		return id
	}
	id := uint32(len(n.sets))
	n.setIDs[string(b)] = id
	n.sets = append(n.sets, keySet{own: clone(own), deps: clone(deps), pulls: clone(pulls)})
	return id
}

func clone(ks []key) []key {
	if len(ks) == 0 {
		return nil
	}
	return append([]key(nil), ks...)
}

// textSum is the sum of a canonical text.
func (n *normaliser) textSum(s string) [2]uint64 {
	return [2]uint64{maphash.String(n.seeds[0], s), maphash.String(n.seeds[1], s)}
}

// with returns a copy of c (position kept) with one part replaced.
func with(c *config.Command, f func(*config.Command)) config.Command {
	n := config.Command{Pos: c.Pos, Text: c.Text}
	f(&n)
	return n
}

// bridgeDefaults are the values attribute inverses restore.
var bridgeDefaults = map[string]string{"ageing_time": "30000", "fdb_max_learned": "0",
	"flood_defer": fmt.Sprint(l2.DefaultFloodDeferThreshold), "mcast_prefilter": "1"}

// createOptions stay with a bridge's creation: changing them re-creates it
// (ports joined before and after a pvid change differ).
var createOptions = map[string]bool{"vlan_filtering": true, "vlan_default_pvid": true}

// logicalOf normalises one command. A bridge line's keys depend on whether
// its device is a bridge in either file (normaliser.bridges), and a line
// on a port also owns its bridge's brports key (masters: each port's
// bridge at this point of the file; nil when the keys are not needed).
func (n *normaliser) logicalOf(c *config.Command, masters map[string]string) []logical {
	switch {
	case c.Link != nil:
		return n.linkLogical(c)
	case c.Bridge != nil:
		dev, self := bridgeDev(c.Bridge.Op)
		return []logical{n.bridgeLogical(c, self || n.bridges[dev], masters)}
	case c.Addr != nil:
		return []logical{n.addrLogical(c)}
	case c.Route != nil:
		return []logical{n.routeLogical(c)}
	case c.Nexthop != nil:
		return []logical{n.nexthopLogical(c)}
	case c.Neigh != nil:
		return []logical{n.neighLogical(c)}
	}
	// A query in a file (refused by Apply anyway).
	return []logical{{text: "query " + c.Text, fwd: *c}}
}

func (n *normaliser) linkLogical(c *config.Command) []logical {
	l := c.Link
	name := l.Name
	switch l.Op {
	case "add":
		if l.Kind == "vrf" {
			// Re-creating a VRF (another table) re-does its masters' lines
			// (they depend on dev:NAME): the devices re-enter it.
			return []logical{{
				text:    fmt.Sprintf("vrf %s table %d", name, l.Table),
				fwd:     *c,
				inverse: []config.Command{with(c, func(x *config.Command) { x.Link = &config.LinkCmd{Op: "delete", Name: name} })},
				own:     []key{n.named(keyDev, name)},
			}}
		}
		if l.Kind == "vlan" {
			return []logical{{
				text:    fmt.Sprintf("vlan %s link %s id %d", name, l.Parent, l.VID),
				fwd:     *c,
				inverse: []config.Command{with(c, func(x *config.Command) { x.Link = &config.LinkCmd{Op: "delete", Name: name} })},
				own:     []key{n.named(keyDev, name), {kind: keyHostVLAN, a: n.id(l.Parent), b: uint32(l.VID)}},
				deps:    []key{n.named(keyDev, l.Parent)},
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
			fwd:     with(c, func(x *config.Command) { x.Link = &create }),
			inverse: []config.Command{with(c, func(x *config.Command) { x.Link = &config.LinkCmd{Op: "delete", Name: name} })},
			own:     []key{n.named(keyDev, name)},
		}}
		return append(out, n.bridgeAttrLogicals(c, attrs)...)
	case "delete":
		return []logical{{text: "link del " + name, fwd: *c, own: []key{n.named(keyDev, name)}}}
	case "set":
		if l.Kind == "bridge" {
			return n.bridgeSetLogicals(c)
		}
		var out []logical
		set := func(text string, lc config.LinkCmd, inv *config.LinkCmd, own []key, deps ...key) {
			// Every line naming a device is re-done when the device is
			// re-created or stops being a bridge (it declares it as a port).
			deps = append(deps, n.named(keyDev, name))
			lg := logical{text: text, fwd: with(c, func(x *config.Command) { y := lc; x.Link = &y }), own: own, deps: deps}
			if inv != nil {
				lg.inverse = []config.Command{with(c, func(x *config.Command) { y := *inv; x.Link = &y })}
			}
			out = append(out, lg)
		}
		if l.Master != "" {
			set("master "+name+" "+l.Master, config.LinkCmd{Op: "set", Name: name, Master: l.Master},
				&config.LinkCmd{Op: "set", Name: name, NoMaster: true},
				[]key{n.named(keyBrport, name), n.named(keyIface, name), n.named(keyBrports, l.Master)},
				n.named(keyDev, l.Master))
		}
		if l.NoMaster {
			set("nomaster "+name, config.LinkCmd{Op: "set", Name: name, NoMaster: true}, nil,
				[]key{n.named(keyBrport, name), n.named(keyIface, name)})
		}
		if l.Up || l.Down {
			set(fmt.Sprintf("linkstate %s up=%v", name, l.Up), config.LinkCmd{Op: "set", Name: name, Up: l.Up, Down: l.Down},
				&config.LinkCmd{Op: "set", Name: name, Up: true}, []key{n.named(keyLinkstate, name)})
		}
		if l.MTU > 0 {
			set(fmt.Sprintf("mtu %s %d", name, l.MTU), config.LinkCmd{Op: "set", Name: name, MTU: l.MTU},
				&config.LinkCmd{Op: "set", Name: name, MTU: 1500}, []key{n.named(keyMTU, name)})
		}
		if len(l.Address) == 6 {
			set(fmt.Sprintf("mac %s %s", name, l.Address), config.LinkCmd{Op: "set", Name: name, Address: l.Address},
				&config.LinkCmd{Op: "set", Name: name, Address: make(net.HardwareAddr, 6)}, []key{n.named(keyMAC, name)})
		}
		if len(out) == 0 { // `link set eth0`: names a port, sets nothing
			set("link "+name, config.LinkCmd{Op: "set", Name: name}, nil, nil)
		}
		return out
	}
	return []logical{{text: "link " + l.Op + " " + name, fwd: *c}}
}

// bridgeAttrLogicals: one logical command per bridge attribute of a `link
// add|set BR type bridge` line (keys in sorted order), each set back to its
// default by its inverse.
func (n *normaliser) bridgeAttrLogicals(c *config.Command, keys []string) []logical {
	name := c.Link.Name
	var out []logical
	for _, k := range keys {
		v := c.Link.Options[k]
		def, ok := bridgeDefaults[k]
		if !ok {
			def = v
		}
		out = append(out, logical{
			text: fmt.Sprintf("bridge-attr %s %s %s", name, k, v),
			fwd: with(c, func(x *config.Command) {
				x.Link = &config.LinkCmd{Op: "set", Name: name, Kind: "bridge", Options: map[string]string{k: v}}
			}),
			inverse: []config.Command{with(c, func(x *config.Command) {
				x.Link = &config.LinkCmd{Op: "set", Name: name, Kind: "bridge", Options: map[string]string{k: def}}
			})},
			own:  []key{{kind: keyBrattr, a: n.id(name), b: n.id(k)}},
			deps: []key{n.named(keyDev, name)},
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
func (n *normaliser) bridgeSetLogicals(c *config.Command) []logical {
	name := c.Link.Name
	var attrs []string
	var out []logical
	for k, v := range c.Link.Options {
		if !createOptions[k] {
			attrs = append(attrs, k)
			continue
		}
		out = append(out, logical{
			text: fmt.Sprintf("bridge-create-attr %s %s %s", name, k, v),
			fwd: with(c, func(x *config.Command) {
				x.Link = &config.LinkCmd{Op: "set", Name: name, Kind: "bridge", Options: map[string]string{k: v}}
			}),
			own:  []key{n.named(keyDev, name)},
			deps: []key{n.named(keyDev, name), n.named(keyBrports, name)},
			// Pulled too, so that moving port lines across it counts as a
			// change of order.
			pulls: []key{n.named(keyBrports, name)},
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].text < out[j].text })
	sort.Strings(attrs)
	return append(out, n.bridgeAttrLogicals(c, attrs)...)
}

// bridgeDev is the device a bridge line is on, and whether it says self.
func bridgeDev(op l2.Op) (dev string, self bool) {
	switch o := op.(type) {
	case l2.VLANAdd:
		return o.Dev, o.Self
	case l2.VLANDel:
		return o.Dev, o.Self
	case l2.FDBAdd:
		return o.Dev, false
	case l2.FDBDel:
		return o.Dev, false
	case l2.LinkSet:
		return o.Dev, false
	}
	return "", false // mdb lines name both; bridgeLogical handles them
}

// bridgeLogical: lines on a port belong to its brport unit (reset by
// `nomaster`; a line on a port enslaved at this point of the file also
// owns its bridge's brports key); lines on the bridge device (onBridge)
// re-create the bridge.
func (n *normaliser) bridgeLogical(c *config.Command, onBridge bool, masters map[string]string) logical {
	lg := logical{text: c.Bridge.Op.String(), fwd: *c}
	dev, _ := bridgeDev(c.Bridge.Op)
	var vids [2]uint16
	switch o := c.Bridge.Op.(type) {
	case l2.VLANAdd:
		vids = [2]uint16{o.VID, o.VIDEnd}
	case l2.VLANDel:
		vids = [2]uint16{o.VID, o.VIDEnd}
	case l2.FDBAdd:
		// The unit's reset (nomaster, bridge deletion) removes the entry,
		// but l2's validation view does not know that yet: delete it
		// explicitly first, so the re-add in the same batch validates.
		lg.inverse = []config.Command{with(c, func(x *config.Command) {
			x.Bridge = &config.BridgeCmd{Op: l2.FDBDel{MAC: o.MAC, Dev: o.Dev, VID: o.VID, HasVID: o.HasVID}}
		})}
	case l2.MDBAdd:
		lg.own, lg.deps = n.portUnit(o.Port, masters), []key{n.named(keyDev, o.Bridge)}
		lg.inverse = []config.Command{with(c, func(x *config.Command) { // as for FDBAdd
			x.Bridge = &config.BridgeCmd{Op: l2.MDBDel{Bridge: o.Bridge, Port: o.Port, Group: o.Group, VID: o.VID}}
		})}
		return lg
	case l2.MDBDel:
		lg.own, lg.deps = n.portUnit(o.Port, masters), []key{n.named(keyDev, o.Bridge)}
		return lg
	}
	if onBridge {
		lg.own = []key{n.named(keyDev, dev)}
		if vids[0] != 0 {
			forVIDs(vids[0], vids[1], func(v uint16) {
				lg.deps = append(lg.deps, key{kind: keyHostVLAN, a: n.id(dev), b: uint32(v)})
			})
		}
		return lg
	}
	lg.own = n.portUnit(dev, masters)
	return lg
}

// portUnit: the keys a line on port P owns: brport:P, and brports:B while
// P is a member of B.
func (n *normaliser) portUnit(port string, masters map[string]string) []key {
	own := []key{n.named(keyBrport, port)}
	if m := masters[port]; m != "" {
		own = append(own, n.named(keyBrports, m))
	}
	return own
}

// addrLogical: an address also owns the keys of the routes derived from it,
// so user routes sharing their (table, prefix) are re-done in order with
// them.
func (n *normaliser) addrLogical(c *config.Command) logical {
	a := c.Addr
	lg := logical{text: fmt.Sprintf("address %s %s dev %s", a.Op, a.Prefix, a.Dev), fwd: *c,
		own: []key{n.named(keyAddr, a.Dev)}, deps: []key{n.named(keyDev, a.Dev)}}
	if a.Op == "add" {
		lg.inverse = []config.Command{with(c, func(x *config.Command) {
			x.Addr = &config.AddrCmd{Op: "delete", Dev: a.Dev, Prefix: a.Prefix}
		})}
		p := a.Prefix
		lg.own = append(lg.own, n.routeKey(fib.TableLocal, netip.PrefixFrom(p.Addr(), 32)))
		if p.Bits() < 31 {
			lg.own = append(lg.own, n.routeKey(fib.TableLocal, netip.PrefixFrom(fib.LastAddr(p), 32)))
		}
		if p.Bits() < 32 {
			lg.own = append(lg.own, n.routeKey(fib.TableMain, p.Masked()))
		}
	}
	return lg
}

func routeTable(s *fib.RouteSpec) uint32 {
	if s.Table != 0 {
		return s.Table
	}
	if s.TypeSet && (s.Type == fib.Local || s.Type == fib.Broadcast) {
		return fib.TableLocal
	}
	return fib.TableMain
}

// routeLogical: a route owns its (table, prefix) key; see routeDeps for
// what it depends on and pulls.
func (n *normaliser) routeLogical(c *config.Command) logical {
	r := c.Route
	s := &r.Spec
	lg := logical{fwd: *c, own: []key{n.routeKey(n.routeTableOf(r), s.Prefix)}}
	lg.deps, lg.pulls = n.routeDeps(r, nil, nil)
	if r.Op != "delete" {
		inv := *s
		if inv.Proto == 0 {
			inv.Proto = fib.ProtoBoot
		}
		inv.TypeSet = true
		lg.inverse = []config.Command{with(c, func(x *config.Command) { x.Route = &config.RouteCmd{Op: "delete", Spec: inv, VRF: r.VRF} })}
	}
	return lg
}

// routeDeps appends a route's dependencies: its nexthop object, the
// addresses of its devices (a device losing its last address flushes its
// routes), every address when a gateway's device is not given or a source
// is, the VRF a `vrf NAME` line names (re-done when the VRF is: another
// table); and what it pulls: the link state of its devices (every
// device's for a gateway without a device).
func (n *normaliser) routeDeps(r *config.RouteCmd, deps, pulls []key) ([]key, []key) {
	s := &r.Spec
	if r.VRF != "" {
		deps = append(deps, n.named(keyDev, r.VRF))
	}
	if s.NhID != 0 {
		deps = append(deps, key{kind: keyNexthop, a: s.NhID})
	}
	anyAddr := s.Src.IsValid() || s.Gateway.IsValid() && s.Dev == ""
	if s.Dev != "" {
		deps = append(deps, n.named(keyAddr, s.Dev), n.named(keyDev, s.Dev))
		pulls = append(pulls, n.named(keyLinkstate, s.Dev))
	}
	for _, p := range s.Multipath {
		if p.Dev != "" {
			deps = append(deps, n.named(keyAddr, p.Dev))
			pulls = append(pulls, n.named(keyLinkstate, p.Dev))
		} else {
			anyAddr = true
		}
	}
	if anyAddr {
		deps = append(deps, key{kind: keyAddrAny})
	}
	if anyAddr || s.Gateway.IsValid() && s.Dev == "" {
		pulls = append(pulls, key{kind: keyLinkstateAny})
	}
	return deps, pulls
}

// routeRecord is a route line's record without a logical: its canonical
// sum, its own key and its interned dependencies (allocation-free once
// the dependency set is known).
func (n *normaliser) routeRecord(r *config.RouteCmd) (sum [2]uint64, own key, set uint32) {
	s := &r.Spec
	n.deps, n.pulls = n.routeDeps(r, n.deps[:0], n.pulls[:0])
	set = n.set(nil, n.deps, n.pulls)
	return n.routeSum(r), n.routeKey(n.routeTableOf(r), s.Prefix), set
}

// routeTableOf is the table a route line's key names: its VRF's as
// declared so far in the file being read, 0 for a VRF the file does not
// declare (one made by ctl: resolved when applied, keyed apart from every
// real table).
func (n *normaliser) routeTableOf(r *config.RouteCmd) uint32 {
	if r.VRF != "" {
		return n.vrfTables[n.side][r.VRF]
	}
	return routeTable(&r.Spec)
}

// routeSum hashes a route line's canonical form: every field of its
// operation and spec, in a binary encoding (TestRouteSumCoversSpec keeps
// it complete when RouteSpec grows).
func (n *normaliser) routeSum(r *config.RouteCmd) [2]uint64 {
	s := &r.Spec
	b := append(n.buf[:0], 0) // no text sum starts with a 0 byte
	b = appendString(b, r.Op)
	b = appendString(b, r.VRF)
	b, _ = s.Prefix.AppendBinary(b)
	b = binary.LittleEndian.AppendUint32(b, s.Table)
	b = append(b, byte(s.Owner), byte(s.Type), flag(s.TypeSet), byte(s.Proto), byte(s.Scope), flag(s.ScopeSet))
	b = binary.LittleEndian.AppendUint32(b, s.Metric)
	b = append(b, flag(s.MetricSet))
	b, _ = s.Src.AppendBinary(appendLen(b, s.Src))
	b = binary.LittleEndian.AppendUint32(b, s.NhID)
	b, _ = s.Gateway.AppendBinary(appendLen(b, s.Gateway))
	b = appendString(b, s.Dev)
	b = append(b, flag(s.OnLink))
	b = binary.AppendUvarint(b, uint64(len(s.Multipath)))
	for _, p := range s.Multipath {
		b, _ = p.Gateway.AppendBinary(appendLen(b, p.Gateway))
		b = appendString(b, p.Dev)
		b = append(b, flag(p.OnLink))
		b = binary.LittleEndian.AppendUint16(b, p.Weight)
	}
	n.buf = b
	return [2]uint64{maphash.Bytes(n.seeds[0], b), maphash.Bytes(n.seeds[1], b)}
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// appendLen prefixes an address with its encoded length (0, 4 or 16).
func appendLen(b []byte, a netip.Addr) []byte { return append(b, byte(a.BitLen()/8)) }

func flag(v bool) byte {
	if v {
		return 1
	}
	return 0
}

func (n *normaliser) nexthopLogical(c *config.Command) logical {
	x := c.Nexthop
	id := x.Spec.ID
	lg := logical{text: fmt.Sprintf("nexthop %s %+v", x.Op, x.Spec), fwd: *c, own: []key{{kind: keyNexthop, a: id}}}
	for _, m := range x.Spec.Group {
		lg.deps = append(lg.deps, key{kind: keyNexthop, a: m.ID})
	}
	if d := x.Spec.Single.Dev; d != "" {
		lg.pulls = append(lg.pulls, n.named(keyLinkstate, d)) // checked against it (see logical.pulls)
		lg.deps = append(lg.deps, n.named(keyDev, d))
	}
	if x.Op != "delete" {
		lg.inverse = []config.Command{with(c, func(y *config.Command) {
			y.Nexthop = &config.NexthopCmd{Op: "delete"}
			y.Nexthop.Spec.ID = id
		})}
	}
	return lg
}

// neighLogical: an entry goes when its interface is re-created or changes
// its MAC, and (unless permanent) when its link goes down.
func (n *normaliser) neighLogical(c *config.Command) logical {
	o := c.Neigh
	lg := logical{text: o.String(), fwd: *c, own: []key{n.neighKey(o.Dev, o.IP)},
		deps: []key{n.named(keyDev, o.Dev), n.named(keyIface, o.Dev), n.named(keyMAC, o.Dev)},
		// A MAC change flushes the entries before it, not those after it:
		// moving the entry across a `link set D address` line is a change.
		pulls: []key{n.named(keyMAC, o.Dev)}}
	if o.State != neigh.NUDPermanent {
		// A link-down line after it in the file flushes it: it follows the
		// link state lines, and re-doing it re-does them.
		lg.deps = append(lg.deps, n.named(keyLinkstate, o.Dev))
		lg.pulls = append(lg.pulls, n.named(keyLinkstate, o.Dev))
	}
	if o.Op != "delete" {
		lg.inverse = []config.Command{with(c, func(x *config.Command) {
			x.Neigh = &config.NeighCmd{Op: "delete", IP: o.IP, Dev: o.Dev}
		})}
	}
	return lg
}

// String names a key as diff.go's file comment does (debug output).
func (n *normaliser) keyString(k key) string {
	name := func(id uint32) string { return n.names[id] }
	addr := func() string {
		if k.bits == notIPv4 {
			return name(k.b)
		}
		return netip.AddrFrom4([4]byte{byte(k.b >> 24), byte(k.b >> 16), byte(k.b >> 8), byte(k.b)}).String()
	}
	switch k.kind {
	case keyDev:
		return "dev:" + name(k.a)
	case keyBrport:
		return "brport:" + name(k.a)
	case keyBrports:
		return "brports:" + name(k.a)
	case keyIface:
		return "iface:" + name(k.a)
	case keyBrattr:
		return "brattr:" + name(k.a) + ":" + name(k.b)
	case keyHostVLAN:
		return fmt.Sprintf("hostvlan:%s:%d", name(k.a), k.b)
	case keyAddr:
		return "addr:" + name(k.a)
	case keyAddrAny:
		return "addr:*"
	case keyRoute:
		if k.bits == notIPv4 {
			return fmt.Sprintf("route:%d:%s", k.a, name(k.b))
		}
		return fmt.Sprintf("route:%d:%s/%d", k.a, addr(), k.bits)
	case keyNexthop:
		return fmt.Sprintf("nh:%d", k.a)
	case keyLinkstate:
		return "linkstate:" + name(k.a)
	case keyLinkstateAny:
		return "linkstate:*"
	case keyMTU:
		return "mtu:" + name(k.a)
	case keyMAC:
		return "mac:" + name(k.a)
	case keyNeigh:
		return "neigh:" + name(k.a) + ":" + addr()
	case keyRule:
		return fmt.Sprintf("rule:%d", k.a)
	case keyRuleAll:
		return "rule:*"
	}
	return "?"
}
