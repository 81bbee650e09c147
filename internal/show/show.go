// Package show renders the engine's state as iproute2 prints it: the text
// of `ip route show`, `ip address show`, `ip link show`, `ip nexthop show`,
// `ip neigh show`, `bridge fdb show` and `bridge vlan show`, and their `-j`
// JSON, plus netfwd's counters (`stats`) and `route get` answers. One value
// type per object (Route, Link, Address, Nexthop, FDBEntry, DevVLANs) is both
// the JSON object and the source of the text line, so the two forms cannot
// drift apart.
//
// Flow: Answer takes a query parsed by internal/config and writes its
// answer to w as it goes: JSON arrays element by element, text line by
// line, so a 32 MB FDB listing goes out through the caller's bounded
// buffer (internal/ctlsock) instead of being built in memory first.
//
// Locking: reads published state (FIB snapshots, interface tables) and
// takes the short dump locks of the tables it lists (the FDB, the
// neighbour table, the bridge configuration) to copy them first; nothing
// is held while writing.
package show

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/l3"
)

// State is what answers read: the engine, and the link state of the
// configuration (the applier, internal/apply.Controller).
type State interface {
	Engine() *l3.Engine
	// AdminDown reports whether the configuration sets the device down.
	AdminDown(dev string) bool
	// CarrierDown reports whether the device has no carrier.
	CarrierDown(dev string) bool
}

// RingDropper is a State whose ports read receive rings (the daemon's):
// RingDrops are the frames port dev's rings lost because they were full
// (pktio's Rx.RingDrops: AF_PACKET's tp_drops; AF_XDP's rx_dropped and
// rx_ring_full, which in copy mode include the frames the fill ring had
// no buffer for),
// 0 for a device that is not an opened port. `-s link` shows them as RX
// missed, where `ip -s link` shows a NIC's ring overflows.
type RingDropper interface {
	RingDrops(dev string) uint64
}

// Answer writes the answer to one query: iproute2's text, or its JSON
// (one value per query, then a newline) when asJSON. A query answered
// with a failure (`route get` of an unreachable destination) returns a
// *Failed after writing its answer.
func Answer(w io.Writer, st State, q config.Query, asJSON bool) error {
	e := st.Engine()
	switch q := q.(type) {
	case config.RouteGet:
		for _, dev := range []string{q.IIf, q.OIf} {
			if dev != "" && e.Router().Iface(dev) == nil {
				return fmt.Errorf("Cannot find device %q", dev)
			}
		}
		if q.VRF != "" {
			if _, ok := e.FIB().VRFTable(q.VRF); !ok {
				return errInvalidVRF(q.VRF)
			}
		}
		b, status := appendRouteGet(nil, e.FIB(), q, asJSON)
		if _, err := w.Write(b); err != nil {
			return err
		}
		if status != 0 {
			return &Failed{Query: q.Name(), Status: status}
		}
		return nil
	case config.RouteShow:
		f := q.RouteFilter
		if f.VRF != "" {
			t, ok := e.FIB().VRFTable(f.VRF)
			if !ok {
				return errInvalidVRF(f.VRF)
			}
			f = f.InVRF(t)
		}
		return RoutesFiltered(w, e.FIB(), f, asJSON)
	case config.VRFShow:
		return vrfs(w, e.FIB(), q, asJSON)
	case config.RuleShow:
		return Rules(w, e.FIB(), q.RuleFilter, asJSON)
	case config.Help:
		_, err := io.WriteString(w, q.Text)
		return err
	case config.FDBShow:
		return fdb(w, e.Domain(), q, asJSON)
	case config.VLANShow:
		return vlans(w, e.Domain(), q, asJSON)
	case config.NeighShow:
		return neighbours(w, e, q, asJSON)
	case config.LinkShow:
		return links(w, st, q, asJSON)
	case config.AddrShow:
		return addresses(w, st, q, asJSON)
	case config.NexthopShow:
		return nexthops(w, e.FIB(), q, asJSON)
	case config.Stats:
		return stats(w, e, asJSON)
	}
	return fmt.Errorf("%s: not answered here", q.Name())
}

// jsonArray writes a JSON array one element at a time.
// writeJSONArray writes list as one JSON array.
func writeJSONArray[T any](w io.Writer, list []T) error {
	a := jsonArray{w: w}
	for _, v := range list {
		a.add(v)
	}
	return a.close()
}

type jsonArray struct {
	w   io.Writer
	n   int
	err error
}

func (a *jsonArray) add(v any) {
	if a.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		a.err = err
		return
	}
	sep := byte(',')
	if a.n == 0 {
		sep = '['
	}
	a.n++
	_, a.err = a.w.Write(append([]byte{sep}, b...))
}

func (a *jsonArray) close() error {
	if a.err != nil {
		return a.err
	}
	end := "]\n"
	if a.n == 0 {
		end = "[]\n"
	}
	_, err := io.WriteString(a.w, end)
	return err
}
