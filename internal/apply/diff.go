package apply

// Reload diffs: the steps that take an engine configured by file A to the
// state file B gives a fresh engine, touching only what changed.
//
// Flow: both files are normalised into logical commands (diff_logical.go:
// one per effect: `link set eth1 up mtu 9000 master br0` is three, `link
// add br0 type bridge ageing_time 100` is a creation plus an attribute),
// matched by their canonical form (the i-th occurrence in A with the i-th
// in B). Unmatched ones are removed (A) or added (B). Each logical command
// owns keys (the objects it sets) and depends on keys (objects whose
// re-creation undoes or changes its effect). The keys of removed and added
// commands are dirty; any command owning or depending on a dirty key is
// re-done and dirties all it owns, until nothing changes. The result is:
// the inverses of the re-done A commands in reverse A order (lenient: an
// inverse of something already gone is skipped), then the re-done B
// commands in B order, for one all-or-nothing Apply.
//
// Memory: a file is read as a stream of commands (twice: once whole, then
// the few lines that are re-done) and kept as one fixed-size record per
// logical command: a 128-bit hash of its canonical form, its line, its key
// set (interned: the route lines through one device share one) and a route
// line's own key. So a 900,000-route file costs ~40 bytes a line, sorted
// (not hashed into maps) to match them; the commands that apply and undo
// a logical command are rebuilt only for those re-done.
//
// Keys and rules (why each is needed is in the comments of diff_logical.go):
//
//	dev:N        a bridge or VLAN interface N exists (re-creating it resets all on it)
//	brport:P     P's bridge membership and everything on it (vlan, fdb, link flags, mdb):
//	             redone as a unit; its inverse is `nomaster`, which resets all of it
//	brports:B    the memberships of bridge B and the lines on its ports (what
//	             `link set B type bridge` lines changing vlan_filtering or
//	             vlan_default_pvid depend on: they change what those lines do)
//	iface:P      the router interface of port P (it exists while P is not bridged)
//	brattr:B:O   bridge attribute O (ageing_time, fdb_max_learned)
//	hostvlan:B:V the host membership a VLAN interface brings
//	addr:D       D's addresses (redone as a unit: order makes primaries/secondaries,
//	             and removing the last one flushes D's routes); addr:* is any of them
//	route:T:P    the routes of table T at prefix P (order among equal metrics matters)
//	nh:I         nexthop I (deleting it deletes its routes and shrinks its groups)
//	linkstate:D, mtu:D, mac:D  link settings (down and MAC changes flush neighbours)
//	neigh:D:A    the neighbour entry
//	rule:P       the rules of priority P (their order matters); rule:* all rules
//	             where a file deletes or flushes rules (diff_rule.go)
//
// The bridge device's own VLANs and FDB entries (`dev BR`) have no reset, so
// changing any of them re-creates the bridge (dev:BR).
//
// Locking: pure functions.

import (
	"bytes"
	"cmp"
	"fmt"
	"math/bits"
	"net"
	"os"
	"slices"

	"github.com/netfwd/netfwd/internal/config"
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
	s, st, _ := diff(cmdList(old), cmdList(new), opts, false, nil)
	return s, st
}

// FullRedo is the diff that re-does everything: every inverse of old, then
// all of new (the fallback when a diff cannot be trusted).
func FullRedo(old, new []config.Command, opts DiffOptions) []Step {
	s, _, _ := diff(cmdList(old), cmdList(new), opts, true, nil)
	return s
}

// File is the text of a config file: what a daemon keeps of the
// configuration it applied (a tenth of the size of its parsed commands)
// and what DiffFiles reads.
type File struct {
	Name string
	Text []byte
}

// Commands parses the whole file; errs lists the lines that do not parse
// (bounded as config.ErrorList is).
func (f *File) Commands() (cmds []config.Command, errs []error) {
	return config.Parse(f.Name, bytes.NewReader(f.Text))
}

// FileDiff is the result of DiffFiles.
type FileDiff struct {
	Steps []Step
	Stats DiffStats
	// Ports are the interfaces new names as ports (PortNamer).
	Ports []string
	// Errs are new's lines that do not parse (FILE:LINE); Steps then take
	// old to the lines that do.
	Errs []error
}

// DiffFiles is Diff for two config texts, read line by line without
// keeping their commands.
func DiffFiles(old, new *File, opts DiffOptions) FileDiff {
	var ports PortNamer
	s, st, errs := diff(old, new, opts, false, ports.Add)
	return FileDiff{Steps: s, Stats: st, Ports: ports.Names(), Errs: errs}
}

// commands is one side of a diff, read in order as a whole and then again
// for the commands of some refs (ascending). A ref names a command: its
// index in a list, its line in a file.
type commands interface {
	each(fn func(ref uint32, c *config.Command)) []error
	pick(refs []uint32, fn func(ref uint32, c *config.Command))
	// size is about the number of commands (to size the records).
	size() int
}

type cmdList []config.Command

func (l cmdList) each(fn func(uint32, *config.Command)) []error {
	for i := range l {
		fn(uint32(i), &l[i])
	}
	return nil
}

func (l cmdList) size() int { return len(l) }

func (l cmdList) pick(refs []uint32, fn func(uint32, *config.Command)) {
	for _, r := range refs {
		fn(r, &l[r])
	}
}

func (f *File) size() int { return bytes.Count(f.Text, []byte("\n")) + 1 }

func (f *File) each(fn func(uint32, *config.Command)) []error {
	return config.Stream(f.Name, bytes.NewReader(f.Text), func(c *config.Command) error {
		fn(uint32(c.Pos.Line), c)
		return nil
	})
}

// pick parses only the lines asked for; lines are split as config.Stream
// splits them (bufio.ScanLines: "\n", an optional "\r" before it dropped).
func (f *File) pick(refs []uint32, fn func(uint32, *config.Command)) {
	text, line := f.Text, uint32(0)
	for len(refs) > 0 && len(text) > 0 {
		line++
		l := text
		if i := bytes.IndexByte(text, '\n'); i >= 0 {
			l, text = text[:i], text[i+1:]
		} else {
			text = nil
		}
		if line != refs[0] {
			continue
		}
		refs = refs[1:]
		l = bytes.TrimSuffix(l, []byte("\r"))
		if c, ok, err := config.ParseLine(config.Pos{File: f.Name, Line: int(line)}, string(l)); ok && err == nil {
			fn(line, &c)
		}
	}
}

// rec is one logical command of a file as the diff keeps it.
type rec struct {
	sum   [2]uint64 // hash of its canonical form
	route key       // a route line's own key (kind 0 for other commands: their keys are all in set)
	ref   uint32    // its command
	set   uint32    // its keys (normaliser.sets)
}

// bridgeAlt: a bridge line whose keys depend on whether its device is a
// bridge in either file, which is known when both are read.
type bridgeAlt struct {
	rec      int
	dev      string
	onBridge uint32 // the key set if it is
}

// read normalises one file into records; onCmd (optional) sees every
// command.
func (n *normaliser) read(src commands, onCmd func(*config.Command)) (recs []rec, alts []bridgeAlt, errs []error) {
	masters := map[string]string{} // each port's bridge at this point of the file
	recs = make([]rec, 0, src.size())
	errs = src.each(func(ref uint32, c *config.Command) {
		if onCmd != nil {
			onCmd(c)
		}
		switch {
		case c.Route != nil: // the bulk of a large file: no logical built
			sum, own, set := n.routeRecord(c.Route)
			recs = append(recs, rec{sum: sum, route: own, ref: ref, set: set})
			return
		case c.Rule != nil:
			recs = append(recs, n.ruleRecord(n.side, ref, c, len(recs)))
			return
		case c.Bridge != nil:
			if dev, self := bridgeDev(c.Bridge.Op); dev != "" && !self {
				on := n.bridgeLogical(c, true, masters)
				alts = append(alts, bridgeAlt{rec: len(recs), dev: dev, onBridge: n.set(on.own, on.deps, on.pulls)})
				lg := n.bridgeLogical(c, false, masters)
				recs = append(recs, rec{sum: n.textSum(lg.text), ref: ref, set: n.set(lg.own, lg.deps, lg.pulls)})
				return
			}
		case c.Link != nil:
			l := c.Link
			if l.Op == "add" && l.Kind == "bridge" {
				n.bridges[l.Name] = true
			}
			if l.Op == "add" && l.Kind == "vrf" {
				n.vrfTables[n.side][l.Name] = l.Table
			}
			if l.Op == "delete" {
				delete(n.vrfTables[n.side], l.Name)
			}
			defer func() {
				if l.Op == "set" && (l.Master != "" || l.NoMaster) {
					masters[l.Name] = l.Master
				}
				if l.Op == "delete" {
					for p, m := range masters {
						if m == l.Name {
							delete(masters, p)
						}
					}
				}
			}()
		}
		for _, lg := range n.logicalOf(c, masters) {
			recs = append(recs, rec{sum: n.textSum(lg.text), ref: ref, set: n.set(lg.own, lg.deps, lg.pulls)})
		}
	})
	return recs, alts, errs
}

func (n *normaliser) settle(recs []rec, alts []bridgeAlt) {
	for _, a := range alts {
		if n.bridges[a.dev] {
			recs[a.rec].set = a.onBridge
		}
	}
}

func diff(oldSrc, newSrc commands, opts DiffOptions, all bool, onNew func(*config.Command)) ([]Step, DiffStats, []error) {
	n := newNormaliser()
	a, altA, _ := n.read(oldSrc, nil)
	n.side = 1
	b, altB, errs := n.read(newSrc, onNew)
	n.settle(a, altA)
	n.settle(b, altB)
	n.settleRules(a, b)
	aPair, bPair := match(a, b)
	aRedo, bRedo := make([]bool, len(a)), make([]bool, len(b))
	var st DiffStats
	for j := range b {
		if bPair[j] < 0 || all {
			if bPair[j] >= 0 {
				aPair[bPair[j]], bPair[j] = -1, -1
			}
			bRedo[j] = true
			st.Added++
		}
	}
	ks := newKeyState(n)
	for i := range a {
		if aPair[i] < 0 {
			if debugDiff {
				fmt.Println("removed", n.describe(&a[i]))
			}
			aRedo[i] = true
			st.Removed++
			ks.mark(&a[i])
		}
	}
	for j := range b {
		if bRedo[j] {
			ks.mark(&b[j])
		}
	}
	ks.dirtyReordered(a, aPair)
	for changed := true; changed; {
		changed = false
		for j := range b {
			if bRedo[j] || !ks.touched(&b[j]) && (bPair[j] < 0 || !ks.touched(&a[bPair[j]])) {
				continue
			}
			bRedo[j] = true
			if debugDiff {
				fmt.Println("redo B", n.describe(&b[j]))
			}
			ks.mark(&b[j])
			if i := bPair[j]; i >= 0 {
				aRedo[i] = true
				ks.mark(&a[i])
			}
			st.Redone++
			changed = true
		}
		for i := range a {
			if aRedo[i] || !ks.touched(&a[i]) {
				continue
			}
			aRedo[i] = true // a common command: its B twin follows on the next round
			if debugDiff {
				fmt.Println("redo A", n.describe(&a[i]))
			}
			ks.mark(&a[i])
			changed = true
		}
	}
	return n.steps(oldSrc, newSrc, a, b, aRedo, bRedo, opts), st, errs
}

// match pairs equal canonical forms, the i-th occurrence in a with the
// i-th in b (-1: unpaired), by sorting both by (sum, position).
func match(a, b []rec) (aPair, bPair []int32) {
	ia, ib := bySum(a), bySum(b)
	aPair, bPair = make([]int32, len(a)), make([]int32, len(b))
	for i := range aPair {
		aPair[i] = -1
	}
	for j := range bPair {
		bPair[j] = -1
	}
	for x, y := 0, 0; x < len(ia) && y < len(ib); {
		switch c := cmpSum(a[ia[x]].sum, b[ib[y]].sum); {
		case c < 0:
			x++
		case c > 0:
			y++
		default:
			aPair[ia[x]], bPair[ib[y]] = ib[y], ia[x]
			x++
			y++
		}
	}
	return aPair, bPair
}

// bySum returns the records' indexes sorted by (sum, index): a stable
// counting sort by the sum's top bits (sums are uniform: about one record
// per bucket), then each bucket sorted.
func bySum(rs []rec) []int32 {
	shift := 64 - min(bits.Len(uint(len(rs))), 24)
	count := make([]int32, 1<<(64-shift)+1)
	for i := range rs {
		count[rs[i].sum[0]>>shift+1]++
	}
	for b := 1; b < len(count); b++ {
		count[b] += count[b-1]
	}
	idx := make([]int32, len(rs))
	for i := range rs {
		b := rs[i].sum[0] >> shift
		idx[count[b]] = int32(i)
		count[b]++
	}
	start := int32(0)
	for _, end := range count[:len(count)-1] {
		if end-start > 1 {
			slices.SortFunc(idx[start:end], func(x, y int32) int {
				if c := cmpSum(rs[x].sum, rs[y].sum); c != 0 {
					return c
				}
				return cmp.Compare(x, y)
			})
		}
		start = end
	}
	return idx
}

func cmpSum(x, y [2]uint64) int {
	if c := cmp.Compare(x[0], y[0]); c != 0 {
		return c
	}
	return cmp.Compare(x[1], y[1])
}

// keyState is the diff's dirty and pulled keys. Whether a key set is
// touched is cached until a key is added (a million route lines share a
// few sets, and few keys change).
type keyState struct {
	n       *normaliser
	dirty   map[key]bool
	pulled  map[key]bool // keys whose owners are re-done (see logical.pulls)
	version uint32       // bumped when a key is added
	clean   []uint32     // per key set: the version it was last found untouched at
}

func newKeyState(n *normaliser) *keyState {
	return &keyState{n: n, dirty: map[key]bool{}, pulled: map[key]bool{}, version: 1, clean: make([]uint32, len(n.sets))}
}

func (ks *keyState) add(m map[key]bool, k key) {
	if !m[k] {
		m[k] = true
		ks.version++
	}
}

func (ks *keyState) mark(r *rec) {
	if r.route.kind != 0 {
		ks.add(ks.dirty, r.route)
	}
	s := &ks.n.sets[r.set]
	for _, k := range s.own {
		ks.add(ks.dirty, k)
		if k.kind == keyAddr {
			ks.add(ks.dirty, key{kind: keyAddrAny})
		}
	}
	for _, k := range s.pulls {
		ks.add(ks.pulled, k)
	}
}

func (ks *keyState) touched(r *rec) bool {
	if r.route.kind != 0 && (ks.dirty[r.route] || ks.pulled[r.route]) {
		return true
	}
	if ks.clean[r.set] == ks.version {
		return false
	}
	s := &ks.n.sets[r.set]
	for _, k := range s.own {
		if ks.dirty[k] || ks.pulled[k] || k.kind == keyLinkstate && ks.pulled[key{kind: keyLinkstateAny}] {
			return true
		}
	}
	for _, k := range s.deps {
		if ks.dirty[k] {
			return true
		}
	}
	ks.clean[r.set] = ks.version
	return false
}

// dirtyReordered: order within a key matters (primary and secondary
// addresses, equal metric routes, the last of several settings wins), so a
// key whose common commands come in another order in B is dirty (pulls
// too: a neighbour or route moved across a link-down line). Route keys,
// one per route line, are checked by sorting, the few others with a map.
func (ks *keyState) dirtyReordered(a []rec, aPair []int32) {
	type use struct {
		k key
		i int32
	}
	routes := make([]use, 0, len(a))
	lastB := map[key]int32{}
	check := func(k key, i int) {
		if k.kind == keyRoute {
			routes = append(routes, use{k, int32(i)})
			return
		}
		j := aPair[i]
		if prev, ok := lastB[k]; ok && prev > j {
			ks.add(ks.dirty, k)
		}
		lastB[k] = j
	}
	for i := range a {
		if aPair[i] < 0 {
			continue
		}
		if a[i].route.kind != 0 {
			routes = append(routes, use{a[i].route, int32(i)})
		}
		s := &ks.n.sets[a[i].set]
		for _, k := range s.own {
			check(k, i)
		}
		for _, k := range s.pulls {
			check(k, i)
		}
	}
	slices.SortFunc(routes, func(x, y use) int {
		if c := cmpKey(x.k, y.k); c != 0 {
			return c
		}
		return cmp.Compare(x.i, y.i)
	})
	for u := 1; u < len(routes); u++ {
		if routes[u].k == routes[u-1].k && aPair[routes[u-1].i] > aPair[routes[u].i] {
			ks.add(ks.dirty, routes[u].k)
		}
	}
}

func cmpKey(x, y key) int {
	if c := cmp.Compare(x.kind, y.kind); c != 0 {
		return c
	}
	if c := cmp.Compare(x.a, y.a); c != 0 {
		return c
	}
	if c := cmp.Compare(x.b, y.b); c != 0 {
		return c
	}
	return cmp.Compare(x.bits, y.bits)
}

// steps rebuilds the logical commands of the re-done records and orders
// them: inverses in reverse order, FDB and mdb deletions first of all (no
// other inverse depends on them, and they must precede the `nomaster` or
// bridge deletion that resets their unit: see bridgeLogical), then the new
// commands in file order.
func (n *normaliser) steps(oldSrc, newSrc commands, a, b []rec, aRedo, bRedo []bool, opts DiffOptions) []Step {
	la := n.logicalsOf(0, oldSrc, a, aRedo)
	lb := n.logicalsOf(1, newSrc, b, bRedo)
	var steps, late []Step
	reset, skipA := n.ruleReset(aRedo, bRedo)
	for i := len(a) - 1; i >= 0; i-- {
		if !aRedo[i] || skipA[i] {
			continue
		}
		for _, inv := range n.logicalAt(la, a, i).inverse {
			st := Step{Command: inv, Lenient: true}
			if inv.Bridge != nil {
				steps = append(steps, st)
			} else {
				late = append(late, st)
			}
		}
	}
	if reset != nil {
		late = append(late, *reset)
	}
	steps = append(steps, late...)
	for j := range b {
		if !bRedo[j] {
			continue
		}
		fwd := n.logicalAt(lb, b, j).fwd
		if l := fwd.Link; l != nil && l.Op == "add" && l.Kind == "bridge" && len(l.Address) == 0 && opts.BridgeMAC != nil {
			if mac, ok := opts.BridgeMAC(l.Name); ok {
				c := *l
				c.Address = net.HardwareAddr(mac[:])
				fwd.Link = &c
			}
		}
		steps = append(steps, Step{Command: fwd})
	}
	return steps
}

// logicalsOf reads the commands of the re-done records again and
// normalises them (their keys are not needed: no masters).
func (n *normaliser) logicalsOf(side int, src commands, recs []rec, redo []bool) map[uint32][]logical {
	var refs []uint32
	for i := range recs {
		if redo[i] && (len(refs) == 0 || refs[len(refs)-1] != recs[i].ref) {
			refs = append(refs, recs[i].ref)
		}
	}
	out := make(map[uint32][]logical, len(refs))
	src.pick(refs, func(ref uint32, c *config.Command) {
		if c.Rule != nil {
			out[ref] = []logical{n.ruleLogical(side, ref, c)}
			return
		}
		out[ref] = n.logicalOf(c, nil)
	})
	return out
}

// logicalAt is the logical command of record i: records of one command
// are consecutive, in the order logicalOf returns them.
func (n *normaliser) logicalAt(ls map[uint32][]logical, recs []rec, i int) logical {
	first := i
	for first > 0 && recs[first-1].ref == recs[i].ref {
		first--
	}
	return ls[recs[i].ref][i-first]
}

// describe names a record (debug output).
func (n *normaliser) describe(r *rec) string {
	s := &n.sets[r.set]
	names := func(ks []key) []string {
		var out []string
		for _, k := range ks {
			out = append(out, n.keyString(k))
		}
		return out
	}
	own := names(s.own)
	if r.route.kind != 0 {
		own = append([]string{n.keyString(r.route)}, own...)
	}
	return fmt.Sprintf("ref %d own %v deps %v pulls %v", r.ref, own, names(s.deps), names(s.pulls))
}

var debugDiff = os.Getenv("NETFWD_DEBUG_DIFF") != ""
