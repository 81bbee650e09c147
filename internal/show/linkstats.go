package show

// `ip -s link` and `ip -br link|address`: the counters under each
// interface in iproute2's columns (print_stats64: a column is as wide as
// its header or its widest number) and its `stats64` JSON object, and the
// one-line brief forms (`%-16s %-14s ...`) with their JSON.
//
// The counters are the bridge domain's per-port counters (l2.PortStats:
// frames handed to the engine and queued for transmit); interfaces that are
// not ports (bridges, VLAN interfaces) show zeros, as the counters they
// would have are the ports'. RX missed is where `ip -s link` puts a NIC's
// ring overflows (rx_missed_errors): here the frames the port's receive
// rings lost (RingDropper, when the State has rings).

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/netfwd/netfwd/l2"
)

// Stats64 is `ip -j -s link`'s stats64 object.
type Stats64 struct {
	RX RxStats `json:"rx"`
	TX TxStats `json:"tx"`
}

// RxStats are the receive counters of Stats64.
type RxStats struct {
	Bytes      uint64 `json:"bytes"`
	Packets    uint64 `json:"packets"`
	Errors     uint64 `json:"errors"`
	Dropped    uint64 `json:"dropped"`
	OverErrors uint64 `json:"over_errors"`
	Multicast  uint64 `json:"multicast"`
	// MissedErrors is the text's "missed" column (rx_missed_errors, which
	// `ip -j -s -s link` names so): frames the receive ring had no room
	// for.
	MissedErrors uint64 `json:"missed_errors"`
}

// TxStats are the transmit counters of Stats64.
type TxStats struct {
	Bytes         uint64 `json:"bytes"`
	Packets       uint64 `json:"packets"`
	Errors        uint64 `json:"errors"`
	Dropped       uint64 `json:"dropped"`
	CarrierErrors uint64 `json:"carrier_errors"`
	Collisions    uint64 `json:"collisions"`
}

func statsOf(p l2.PortStats) *Stats64 {
	return &Stats64{
		RX: RxStats{Bytes: p.RxBytes, Packets: p.RxPackets, Dropped: p.RxDrops},
		TX: TxStats{Bytes: p.TxBytes, Packets: p.TxPackets, Dropped: p.TxDrops},
	}
}

// numWidth is iproute2's size_columns digit count (its loop counts 10 as
// one digit: kept, so columns line up with ip's).
func numWidth(v uint64) int {
	n := 1
	for p := uint64(10); p < v; p *= 10 {
		n++
		if p > ^uint64(0)/10 {
			break
		}
	}
	return n
}

// writeText prints the RX and TX blocks of `ip -s link`.
func (s *Stats64) writeText(bw *bufio.Writer) {
	cols := []int{len("*X errors:"), len("packets"), len("errors"), len("dropped"), len("heartbt"), len("overrun"), len("compressed")}
	rx := []uint64{s.RX.Bytes, s.RX.Packets, s.RX.Errors, s.RX.Dropped, s.RX.MissedErrors, s.RX.Multicast}
	tx := []uint64{s.TX.Bytes, s.TX.Packets, s.TX.Errors, s.TX.Dropped, s.TX.CarrierErrors, s.TX.Collisions}
	for _, vals := range [][]uint64{rx, tx} {
		for i, v := range vals {
			cols[i] = max(cols[i], numWidth(v))
		}
	}
	block := func(dir string, hdr []string, vals []uint64) {
		fmt.Fprintf(bw, "    %s: %*s", dir, cols[0]-4, hdr[0])
		for i := 1; i < len(hdr); i++ {
			fmt.Fprintf(bw, " %*s", cols[i], hdr[i])
		}
		fmt.Fprintf(bw, " %*s\n    ", cols[6], "")
		for i, v := range vals {
			fmt.Fprintf(bw, "%*d ", cols[i], v)
		}
		bw.WriteString("\n")
	}
	block("RX", []string{"bytes", "packets", "errors", "dropped", "missed", "mcast"}, rx)
	block("TX", []string{"bytes", "packets", "errors", "dropped", "carrier", "collsns"}, tx)
}

// linkBrief is `ip -j -br link`'s object.
type linkBrief struct {
	Ifname    string   `json:"ifname"`
	Operstate string   `json:"operstate"`
	Address   string   `json:"address,omitempty"`
	Flags     []string `json:"flags"`
}

// linksBrief answers `ip -br link`: `NAME OPERSTATE MAC <FLAGS> `.
func linksBrief(w io.Writer, list []Link, asJSON bool) error {
	if asJSON {
		out := make([]linkBrief, len(list))
		for i, l := range list {
			out[i] = linkBrief{Ifname: l.Ifname, Operstate: l.Operstate, Address: l.Address, Flags: l.Flags}
		}
		return writeJSONArray(w, out)
	}
	bw := bufio.NewWriter(w)
	for _, l := range list {
		fmt.Fprintf(bw, "%-16s %-14s %s <%s> \n", l.Ifname, l.Operstate, l.Address, strings.Join(l.Flags, ","))
	}
	return bw.Flush()
}

// addrBrief is `ip -j -br address`'s object.
type addrBrief struct {
	Ifname    string          `json:"ifname"`
	Operstate string          `json:"operstate"`
	AddrInfo  []addrInfoBrief `json:"addr_info"`
}

type addrInfoBrief struct {
	Local     string `json:"local"`
	Prefixlen int    `json:"prefixlen"`
}

// addressesBrief answers `ip -br address`: `NAME OPERSTATE A/L A/L ...`,
// one line per interface (those without addresses too, as ip prints them).
func addressesBrief(w io.Writer, links []Link, addrs []Address, asJSON bool) error {
	byName := map[string][]AddrInfo{}
	for _, a := range addrs {
		byName[a.Ifname] = a.AddrInfo
	}
	out := make([]addrBrief, 0, len(links))
	for _, l := range links {
		b := addrBrief{Ifname: l.Ifname, Operstate: l.Operstate, AddrInfo: []addrInfoBrief{}}
		for _, a := range byName[l.Ifname] {
			b.AddrInfo = append(b.AddrInfo, addrInfoBrief{Local: a.Local, Prefixlen: a.Prefixlen})
		}
		out = append(out, b)
	}
	if asJSON {
		return writeJSONArray(w, out)
	}
	bw := bufio.NewWriter(w)
	for _, b := range out {
		fmt.Fprintf(bw, "%-16s %-14s ", b.Ifname, b.Operstate)
		for _, a := range b.AddrInfo {
			fmt.Fprintf(bw, "%s/%d ", a.Local, a.Prefixlen)
		}
		bw.WriteString("\n")
	}
	return bw.Flush()
}
