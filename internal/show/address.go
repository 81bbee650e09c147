package show

// `ip address show`: per interface, its addresses in their order (primary
// first), as `IDX: DEV` and `    inet A/L [brd B] scope global [secondary]
// DEV` lines, or `ip -j address show` objects.

import (
	"bufio"
	"fmt"
	"io"
	"sort"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/config"
)

// Address is one interface's addresses in `ip -j address show` form.
type Address struct {
	Ifindex  uint32     `json:"-"`
	Ifname   string     `json:"ifname"`
	AddrInfo []AddrInfo `json:"addr_info"`
}

// AddrInfo is one address.
type AddrInfo struct {
	Family    string `json:"family"`
	Local     string `json:"local"`
	Prefixlen int    `json:"prefixlen"`
	Broadcast string `json:"broadcast,omitempty"`
	Scope     string `json:"scope"`
	Secondary bool   `json:"secondary,omitempty"`
}

// addressList returns the addresses an `address show` query selects, by
// interface index.
func addressList(st State, q config.AddrShow) ([]Address, error) {
	if err := checkMaster(st.Engine(), q.ListFilter); err != nil {
		return nil, err
	}
	e := st.Engine()
	byDev := map[string][]fib.Address{}
	var order []string
	masters := mastersOf(e)
	for _, a := range e.FIB().Addresses() {
		if q.Dev != "" && a.Dev != q.Dev || q.Up && st.AdminDown(a.Dev) || q.Master != "" && masters[a.Dev] != q.Master {
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
	var list []Address
	for _, d := range order {
		j := Address{Ifindex: index[d], Ifname: d}
		for _, a := range byDev[d] {
			ai := AddrInfo{Family: "inet", Local: a.Prefix.Addr().String(), Prefixlen: a.Prefix.Bits(), Scope: "global", Secondary: a.Secondary}
			if a.Prefix.Bits() < 31 {
				ai.Broadcast = fib.LastAddr(a.Prefix).String()
			}
			j.AddrInfo = append(j.AddrInfo, ai)
		}
		list = append(list, j)
	}
	return list, nil
}

// addresses answers `ip address show`.
func addresses(w io.Writer, st State, q config.AddrShow, asJSON bool) error {
	list, err := addressList(st, q)
	if err != nil {
		return err
	}
	if q.Brief {
		links, err := linkList(st, config.LinkShow{ListFilter: q.ListFilter})
		if err != nil {
			return err
		}
		return addressesBrief(w, links, list, asJSON)
	}
	if asJSON {
		return writeJSONArray(w, list)
	}
	bw := bufio.NewWriter(w)
	for _, j := range list {
		fmt.Fprintf(bw, "%d: %s\n", j.Ifindex, j.Ifname)
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
