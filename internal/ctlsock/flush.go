package ctlsock

// `route flush SELECTOR` and `neigh flush [dev D] [nud S]`: the entries
// the selector names, deleted in one all-or-nothing batch through the
// applier, as if their `route del` / `neigh del` lines had been sent. The
// steps are lenient: an entry that went away between the listing and the
// batch (a neighbour that expired, a route the FPM withdrew) is skipped.
//
// Routes from routing sources (FPM, the kernel mirror) are not flushed:
// they belong to their source, which would install them again; they are
// flushed where they come from (`ip route flush proto bgp` in the source's
// namespace, zebra). Neighbours: iproute2's flush default, everything but
// permanent and noarp entries unless `nud` says otherwise.

import (
	"fmt"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/apply"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/neigh"
)

// flush runs one flush query of request line `line`.
func (h Handler) flush(line int, q config.Query) error {
	pos := config.Pos{File: "ctl", Line: line}
	var steps []apply.Step
	e := h.Ctl.Engine()
	switch q := q.(type) {
	case config.RouteFlush:
		for _, r := range e.FIB().Routes(q.Table) {
			if r.Owner != fib.OwnerConfig || !q.Selects(r) {
				continue
			}
			spec := fib.RouteSpec{Prefix: r.Prefix, Table: r.Table, Type: r.Type, TypeSet: true, Proto: r.Proto,
				Metric: r.Metric, MetricSet: true}
			steps = append(steps, apply.Step{Lenient: true, Command: config.Command{Pos: pos, Text: "route flush",
				Route: &config.RouteCmd{Op: "delete", Spec: spec}}})
		}
	case config.NeighFlush:
		var ifindex uint32
		if q.Dev != "" {
			ifc := e.Router().Iface(q.Dev)
			if ifc == nil {
				return fmt.Errorf("ctl:%d: Cannot find device %q", line, q.Dev)
			}
			ifindex = ifc.Index
		}
		states := q.NUD
		if states == 0 {
			states = 0xff &^ uint16(neigh.NUDPermanent|neigh.NUDNoARP) // neigh flush's default
		}
		names := map[uint32]string{}
		for _, i := range e.Router().Ifaces() {
			names[i.Index] = i.Name
		}
		for _, i := range e.Router().Neighbours().Dump(e.Domain().Clock().Now()) {
			bit := uint16(i.State)
			if i.State == neigh.NUDNone {
				bit = config.NUDNone
			}
			if ifindex != 0 && i.IfIndex != ifindex || states&bit == 0 || names[i.IfIndex] == "" {
				continue
			}
			steps = append(steps, apply.Step{Lenient: true, Command: config.Command{Pos: pos, Text: "neigh flush",
				Neigh: &config.NeighCmd{Op: "delete", IP: i.Addr(), Dev: names[i.IfIndex]}}})
		}
	}
	if len(steps) == 0 {
		return nil
	}
	return h.Ctl.ApplySteps(steps)
}
