package show

// `stats`: the engine's main counters, as `name value` lines sorted by
// name, or one JSON object.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
)

// counters returns the counters `stats` prints, by name.
func counters(e *l3.Engine) map[string]uint64 {
	s := e.Stats()
	d := e.Domain().Stats()
	m := map[string]uint64{
		"forwarded": s.Forwarded, "fragmented": s.Fragmented, "local": s.Local, "arp_in": s.ARPIn,
		"fib_lookups": s.FIBLookups, "icmp_rate_limited": s.ICMPRateLimited,
		"arp_queued": s.Queued, "arp_released": s.Released, "arp_expired": s.Expired,
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
	return m
}

// stats answers `stats`.
func stats(w io.Writer, e *l3.Engine, asJSON bool) error {
	m := counters(e)
	if asJSON {
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
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
