package show

// `ip link show`: the router's interfaces and the bridge ports (which have
// no router interface while they are in a bridge), as one block per
// interface in text, as `ip -j link show` objects in JSON.

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/l3"
)

// Link is an interface in `ip -j link show` form.
type Link struct {
	Ifindex   uint32   `json:"ifindex,omitempty"` // 0: a bridge port (no router interface)
	Ifname    string   `json:"ifname"`
	Flags     []string `json:"flags"`
	MTU       int      `json:"mtu,omitempty"`
	Operstate string   `json:"operstate"`
	LinkType  string   `json:"link_type"`
	Address   string   `json:"address,omitempty"`
	Kind      string   `json:"kind"`
	Master    string   `json:"master,omitempty"`
	Stats64   *Stats64 `json:"stats64,omitempty"` // `-s`
}

// mastersOf maps each enslaved device to its master: the VRF of a router
// interface, the bridge of a bridge port.
func mastersOf(e *l3.Engine) map[string]string {
	m := e.FIB().DevVRFs()
	if m == nil {
		m = map[string]string{}
	}
	for _, p := range e.Domain().Ports() {
		if b := p.Bridge(); b != nil {
			m[p.Name] = b.Name
		}
	}
	return m
}

// checkMaster refuses a `master DEV` naming no device and a `vrf NAME`
// naming no VRF, in iproute2's words.
func checkMaster(e *l3.Engine, f config.ListFilter) error {
	if f.Master == "" {
		return nil
	}
	if _, ok := e.FIB().VRFTable(f.Master); ok {
		return nil
	}
	if f.VRF {
		return fmt.Errorf("Not a valid VRF name: %s", f.Master)
	}
	if e.Router().Iface(f.Master) == nil && e.Domain().Bridge(f.Master) == nil {
		return fmt.Errorf("Device %q does not exist.", f.Master)
	}
	return nil
}

// vrfMTU is the MTU Linux gives a vrf device (drivers/net/vrf.c: 64 KiB
// + an IPv6 header).
const vrfMTU = 65575

// linkList returns the interfaces a `link show` query selects; an unknown
// device is an error, as iproute2's.
func linkList(st State, q config.LinkShow) ([]Link, error) {
	e := st.Engine()
	var list []Link
	seen := map[string]bool{}
	for _, i := range e.Router().Ifaces() {
		seen[i.Name] = true
		j := Link{Ifindex: i.Index, Ifname: i.Name, MTU: i.MTU, LinkType: "ether", Address: i.MAC.String(), Kind: i.Kind.String(),
			Master: i.VRF}
		j.Operstate, j.Flags = linkState(st, i.Name, i.Up())
		list = append(list, j)
	}
	// The VRF devices, as Linux shows a vrf link: a master without ARP,
	// up, of the vrf driver's MTU. netfwd gives them no index of their
	// own in `link show` (their flows' VRF index is internal).
	for _, v := range e.FIB().VRFs() {
		if seen[v.Name] {
			continue
		}
		seen[v.Name] = true
		list = append(list, Link{Ifname: v.Name, Flags: []string{"NOARP", "MASTER", "UP", "LOWER_UP"}, MTU: vrfMTU,
			Operstate: "UP", LinkType: "ether", Kind: "vrf"})
	}
	for _, p := range e.Domain().Ports() {
		if seen[p.Name] || p.Bridge() == nil {
			continue
		}
		j := Link{Ifname: p.Name, LinkType: "ether", Kind: "bridge_slave", Master: p.Bridge().Name}
		j.Operstate, j.Flags = linkState(st, p.Name, !st.AdminDown(p.Name) && !st.CarrierDown(p.Name))
		if !p.MAC.IsZero() {
			j.Address = p.MAC.String()
		}
		list = append(list, j)
	}
	if err := checkMaster(e, q.ListFilter); err != nil {
		return nil, err
	}
	out := list[:0]
	found := false
	for _, l := range list {
		if q.Dev != "" && l.Ifname != q.Dev {
			continue
		}
		if q.Master != "" && l.Master != q.Master {
			found = true // the device exists; it is not the master's
			continue
		}
		found = true
		if q.Up && st.AdminDown(l.Ifname) {
			continue
		}
		out = append(out, l)
	}
	if q.Dev != "" && !found {
		return nil, fmt.Errorf("Device %q does not exist.", q.Dev) // iproute2's words
	}
	return out, nil
}

// linkState is the operstate and the flags iproute2 prints: UP for the
// admin state, LOWER_UP or NO-CARRIER for the carrier.
func linkState(st State, name string, up bool) (string, []string) {
	flags := []string{"BROADCAST", "MULTICAST"}
	if !st.AdminDown(name) {
		flags = append(flags, "UP")
	}
	if !st.CarrierDown(name) {
		flags = append(flags, "LOWER_UP")
	} else {
		flags = append(flags, "NO-CARRIER")
	}
	if up {
		return "UP", flags
	}
	return "DOWN", flags
}

// links answers `ip link show`.
func links(w io.Writer, st State, q config.LinkShow, asJSON bool) error {
	list, err := linkList(st, q)
	if err != nil {
		return err
	}
	if q.Stats {
		ports := st.Engine().Domain().Stats().Ports
		rings, _ := st.(RingDropper)
		for i := range list {
			list[i].Stats64 = statsOf(ports[list[i].Ifname])
			if rings != nil {
				list[i].Stats64.RX.MissedErrors = rings.RingDrops(list[i].Ifname)
			}
		}
	}
	if q.Brief {
		return linksBrief(w, list, asJSON)
	}
	if asJSON {
		return writeJSONArray(w, list)
	}
	bw := bufio.NewWriter(w)
	for _, l := range list {
		l.writeText(bw)
		if l.Stats64 != nil {
			l.Stats64.writeText(bw)
		}
	}
	return bw.Flush()
}

// writeText prints `IDX: NAME: <FLAGS> mtu M state S kind K [master BR]`
// and `    link/ether MAC` (IDX "-" for a bridge port).
func (l *Link) writeText(bw *bufio.Writer) {
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
	addr := l.Address
	if addr == "" {
		addr = "00:00:00:00:00:00"
	}
	fmt.Fprintf(bw, "\n    link/ether %s\n", addr)
}
