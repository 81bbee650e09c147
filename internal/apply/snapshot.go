package apply

// Snapshot: the whole configured state of an engine as text (routes of all
// tables, addresses, nexthops, VRFs, policy rules, link states, router interfaces (with
// their VRF), bridges with
// their attributes, members, VLANs, FDB and mdb, neighbours). Reloads
// compare the snapshot of "old file + diff" with "new file on a fresh
// engine"; the differential tests do the same.
//
// Bridge MACs that nobody configured are random: they are printed as the
// bridge's name so two engines compare equal. Router interface indexes
// depend on the order names were first seen and are left out. Addresses are
// listed per device in their order on the device.
//
// Locking: reads published state; takes Controller.mu for its own fields.

import (
	"fmt"
	"sort"
	"strings"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/show"
	"github.com/netfwd/netfwd/l3"
)

// Snapshot renders the engine's configured state. ports, if non-nil,
// limits the ports listed to those names (ports are never deleted, so an
// engine that went through a reload keeps ports the new file no longer
// names).
func (c *Controller) Snapshot(ports map[string]bool) string {
	var b strings.Builder
	e := c.e
	f := e.FIB()
	for _, r := range f.Routes(fib.TableAll) {
		j := show.RouteOf(r, true)
		fmt.Fprintf(&b, "route %s\n", j.Text())
	}
	addrs := f.Addresses()
	sort.SliceStable(addrs, func(i, j int) bool { return addrs[i].Dev < addrs[j].Dev })
	for _, a := range addrs {
		fmt.Fprintf(&b, "address %s dev %s secondary=%v\n", a.Prefix, a.Dev, a.Secondary)
	}
	for _, id := range f.NexthopIDs() {
		if nh, ok := f.Nexthop(id); ok {
			fmt.Fprintf(&b, "nexthop id %d %s\n", id, nh)
		}
	}
	for _, v := range f.VRFs() {
		fmt.Fprintf(&b, "vrf %s table %d\n", v.Name, v.Table)
	}
	rules := f.Rules()
	for i := range rules {
		j := show.RuleOf(rules, &rules[i])
		b.WriteString("rule " + j.Text())
	}
	macs := map[string]string{}
	for _, br := range e.Domain().Bridges() {
		macs[br.MAC.String()] = "mac-of-" + br.Name
	}
	mac := func(m string) string {
		if n, ok := macs[m]; ok {
			return n
		}
		return m
	}
	skipPort := func(name string) bool { return ports != nil && !ports[name] && e.Domain().Bridge(name) == nil }
	ifaces := e.Router().Ifaces()
	sort.Slice(ifaces, func(i, j int) bool { return ifaces[i].Name < ifaces[j].Name })
	for _, i := range ifaces {
		if i.Kind == l3.IfacePort && skipPort(i.Name) {
			continue
		}
		vrf, _ := f.DevVRF(i.Name)
		fmt.Fprintf(&b, "iface %s kind %s mac %s mtu %d up %v fiblink %v vrf %q table %d\n", i.Name, i.Kind, mac(i.MAC.String()), i.MTU, i.Up(), f.LinkUp(i.Name),
			vrf, i.VRFTable)
	}
	for _, br := range e.Domain().Bridges() {
		ml, _ := c.FDBMaxLearned(br.Name)
		fmt.Fprintf(&b, "bridge %s filtering %v ageing %v max_learned %d host_pvid %d\n",
			br.Name, br.VLANFiltering(), br.AgeingTime(), ml, br.HostPVID())
		// FDB entries sorted by text: the order of ports is the order their
		// names were first seen, not configuration.
		now := e.Domain().Clock().Now()
		entries := br.FDB().Entries()
		var fdb []string
		for i := range entries {
			j := show.FDBEntryOf(br, &entries[i], now)
			line := strings.TrimSpace(string(j.AppendText(nil)))
			for m, n := range macs {
				line = strings.ReplaceAll(line, m, n)
			}
			fdb = append(fdb, "fdb "+line+"\n")
		}
		sort.Strings(fdb)
		b.WriteString(strings.Join(fdb, ""))
		// Ports are listed in the order they joined the bridge: a reload
		// that re-enslaves ports may change it (flooding order only).
		vl := br.VLANMemberships()
		sort.Slice(vl, func(i, j int) bool { return vl[i].Dev < vl[j].Dev })
		for _, m := range vl {
			fmt.Fprintf(&b, "vlans %s %v\n", m.Dev, m.VLANs)
		}
		for _, m := range br.MDB() {
			fmt.Fprintf(&b, "mdb %s port %s grp %s vid %d\n", br.Name, m.Port, m.Group, m.VID)
		}
	}
	dports := e.Domain().Ports()
	sort.Slice(dports, func(i, j int) bool { return dports[i].Name < dports[j].Name })
	for _, p := range dports {
		if skipPort(p.Name) {
			continue
		}
		master := ""
		if br := p.Bridge(); br != nil {
			master = br.Name
		}
		fmt.Fprintf(&b, "port %s master %q state %v flags %v pvid %d\n", p.Name, master, p.State(), p.Flags(), p.PVID())
	}
	names := map[uint32]string{}
	for _, i := range e.Router().Ifaces() {
		names[i.Index] = i.Name
	}
	var neighs []string
	for _, n := range e.Router().Neighbours().Dump(e.Domain().Clock().Now()) {
		neighs = append(neighs, fmt.Sprintf("neigh %s dev %s lladdr %s %s", n.Addr(), names[n.IfIndex], n.LLAddr.String(), n.State))
	}
	sort.Strings(neighs)
	for _, n := range neighs {
		b.WriteString(n + "\n")
	}
	return b.String()
}
