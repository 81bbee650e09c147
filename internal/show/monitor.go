package show

// Snapshots for `monitor`: what routes, neighbours, links and FDB entries
// look like at one moment, as the text and JSON `show` prints, so that the
// difference of two snapshots is the stream `ip monitor` prints: a line per
// new or changed object, `Deleted ` before a line that went away.
//
// Why snapshots and not hooks: the changes come from everywhere (the
// applier, the FPM and kernel route sources, the carrier monitor, and the
// datapath itself, which learns FDB entries and resolves neighbours on
// every worker); comparing published state from one poller is the one
// place that sees all of them and costs the datapath nothing. Routes are
// only re-read when the FIB's version moved.
//
// Locking: takes the dump locks of the neighbour table and the FDB, as the
// show queries do; a Snapshot belongs to its poller.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/neigh"
)

// Event is one line of a monitor stream.
type Event struct {
	Object  config.MonitorObjects
	Deleted bool
	Text    string // iproute2's line(s), without `Deleted ` or prefix, no final newline
	JSON    []byte // the show object, with "deleted":true for a removal
}

// Prefix is the [ROUTE]-style banner of `ip monitor all`.
func (e Event) Prefix() string {
	switch e.Object {
	case config.MonitorRoute:
		return "[ROUTE]"
	case config.MonitorNeigh:
		return "[NEIGH]"
	case config.MonitorLink:
		return "[LINK]"
	}
	return "[FDB]"
}

// AppendLine appends the event as `monitor` prints it (text or JSON), with
// a final newline.
func (e Event) AppendLine(b []byte, asJSON, banner bool) []byte {
	if asJSON {
		return append(append(b, e.JSON...), '\n')
	}
	if banner {
		b = append(b, e.Prefix()...)
	}
	if e.Deleted {
		b = append(b, "Deleted "...)
	}
	return append(append(b, e.Text...), '\n')
}

// item is one object of a snapshot.
type item struct {
	text string
	obj  any
}

// Snapshot is the state of the monitored objects at one moment.
type Snapshot struct {
	objects    config.MonitorObjects
	fibVersion uint64
	routes     map[routeKey]item                         // nil unless routes are followed
	sets       map[config.MonitorObjects]map[string]item // the other objects, by key
}

// routeKey is a published route and whether its nexthop is dead (the one
// thing about it that changes in place: the link state of its device).
type routeKey struct {
	r    *fib.Route
	dead bool
}

// Objects returns the objects the snapshot holds.
func (s *Snapshot) Objects() config.MonitorObjects { return s.objects }

// TakeSnapshot reads the objects in objs. prev (may be nil) lends its
// routes when the FIB did not change since.
func TakeSnapshot(st State, objs config.MonitorObjects, prev *Snapshot) *Snapshot {
	e := st.Engine()
	s := &Snapshot{objects: objs, sets: map[config.MonitorObjects]map[string]item{}}
	if objs&config.MonitorRoute != 0 {
		s.fibVersion = e.FIB().Version()
		var old map[routeKey]item
		if prev != nil && prev.routes != nil {
			old = prev.routes
		}
		if old != nil && prev.fibVersion == s.fibVersion {
			s.routes = old
		} else {
			// Published routes are not changed in place (a change is a new
			// object), so a route seen before keeps its rendered line: a
			// snapshot costs a map lookup per route, a rendering per change.
			s.routes = make(map[routeKey]item, len(old))
			for _, r := range e.FIB().Routes(fib.TableAll) {
				k := routeKey{r, r.NH != nil && r.NH.Dead()}
				if it, ok := old[k]; ok {
					s.routes[k] = it
					continue
				}
				j := RouteOf(r, true)
				s.routes[k] = item{j.Text(), j}
			}
		}
	}
	if objs&config.MonitorNeigh != 0 {
		m := map[string]item{}
		names := devNames(e)
		for _, i := range e.Router().Neighbours().Dump(e.Domain().Clock().Now()) {
			j := neighEntryJSON{Dst: i.IP.String(), Dev: names(i.IfIndex)}
			t := j.Dst + " dev " + j.Dev
			if i.HasLLAddr {
				j.LLAddr = i.LLAddr.String()
				t += " lladdr " + j.LLAddr
			}
			if i.State != neigh.NUDNone {
				j.State = []string{i.State.String()}
				t += " " + i.State.String()
			}
			m[j.Dev+" "+j.Dst] = item{t, j}
		}
		s.sets[config.MonitorNeigh] = m
	}
	if objs&config.MonitorLink != 0 {
		m := map[string]item{}
		links, _ := linkList(st, config.LinkShow{})
		for _, l := range links {
			var b bytes.Buffer
			bw := bufio.NewWriter(&b)
			l.writeText(bw)
			bw.Flush()
			m[l.Ifname] = item{strings.TrimSuffix(b.String(), "\n"), l}
		}
		s.sets[config.MonitorLink] = m
	}
	if objs&config.MonitorFDB != 0 {
		m := map[string]item{}
		d := e.Domain()
		now := d.Clock().Now()
		for _, b := range d.Bridges() {
			entries := b.FDB().Entries()
			for i := range entries {
				j := FDBEntryOf(b, &entries[i], now)
				if j.State == "stale" {
					j.State = "" // the kernel sends nothing when an entry goes stale
				}
				t := strings.TrimSuffix(string(j.AppendText(nil)), "\n")
				m[b.Name+" "+j.MAC+" "+strconv.Itoa(int(j.VLAN))] = item{strings.TrimRight(t, " "), j}
			}
		}
		s.sets[config.MonitorFDB] = m
	}
	return s
}

// Diff calls fn for every difference from old to s, in the order routes,
// neighbours, links, FDB: removals first (`Deleted `), then additions
// and changes (the new line), each sorted. A changed route is its old line
// deleted and its new one added (routes have no identity beyond their
// fields); the FIB is only compared when its version moved.
func (s *Snapshot) Diff(old *Snapshot, fn func(Event)) {
	if s.routes != nil && old != nil && old.routes != nil && s.fibVersion != old.fibVersion {
		var gone, added []item
		for k, it := range old.routes {
			if _, ok := s.routes[k]; !ok {
				gone = append(gone, it)
			}
		}
		for k, it := range s.routes {
			if _, ok := old.routes[k]; !ok {
				added = append(added, it)
			}
		}
		byText := func(l []item) {
			sort.Slice(l, func(i, j int) bool { return l[i].text < l[j].text })
		}
		byText(gone)
		byText(added)
		for _, it := range gone {
			fn(event(config.MonitorRoute, it, true))
		}
		for _, it := range added {
			fn(event(config.MonitorRoute, it, false))
		}
	}
	for _, obj := range []config.MonitorObjects{config.MonitorNeigh, config.MonitorLink, config.MonitorFDB} {
		cur, ok := s.sets[obj]
		if !ok || old == nil {
			continue
		}
		prev, ok := old.sets[obj]
		if !ok {
			continue
		}
		var gone, changed []string
		for k, it := range prev {
			if n, ok := cur[k]; !ok {
				gone = append(gone, k)
			} else if n.text != it.text {
				changed = append(changed, k)
			}
		}
		for k := range cur {
			if _, ok := prev[k]; !ok {
				changed = append(changed, k)
			}
		}
		sort.Strings(gone)
		sort.Strings(changed)
		for _, k := range gone {
			fn(event(obj, prev[k], true))
		}
		for _, k := range changed {
			fn(event(obj, cur[k], false))
		}
	}
}

func event(obj config.MonitorObjects, it item, deleted bool) Event {
	b, _ := json.Marshal(it.obj)
	if deleted && len(b) > 1 && b[0] == '{' {
		b = append([]byte(`{"deleted":true,`), b[1:]...)
		if bytes.HasSuffix(b, []byte(",}")) { // an object with no fields
			b = append(b[:len(b)-2], '}')
		}
	}
	return Event{Object: obj, Deleted: deleted, Text: it.text, JSON: b}
}
