package ctlsock

// `route flush SELECTOR` and `neigh flush [dev D] [nud S]`: the entries
// the selector names, deleted in one all-or-nothing batch through the
// applier, as if their `route del` / `neigh del` lines had been sent. The
// steps are lenient: an entry that went away between the listing and the
// batch (a neighbour that expired, a route the FPM withdrew) is skipped.
//
// Flow: the server hands a flush line to Handler.Flush; the daemon's
// (internal/daemon journal.go) runs FlushSteps and applies the steps as a
// ctl change: refused while a hot restart holds the daemon, and journaled
// as the flush line itself, so a hot restart's successor runs the same
// selection again at that point of its replay (the flushed routes and
// permanent neighbours stay flushed). Without Flush (tests, a bare
// controller) the steps are applied through Ctl.ApplySteps.
//
// Routes from routing sources (FPM, the kernel mirror) are not flushed:
// they belong to their source, which would install them again; they are
// flushed where they come from (`ip route flush proto bgp` in the source's
// namespace, zebra). Neighbours: iproute2's flush default, everything but
// permanent and noarp entries unless `nud` says otherwise.
//
// Locking: none here; the controller serialises the apply, the daemon's
// Flush holds its ctl lock around listing, apply and journal.

import (
	"errors"
	"fmt"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/apply"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/neigh"
)

// ErrFlushNoDevice is FlushSteps' error for a `neigh flush dev D` whose
// D does not exist (a journal replay skips such a flush: D's entries are
// gone with it).
var ErrFlushNoDevice = errors.New("Cannot find device")

// IsFlush reports whether cmd is a flush line (route flush, neigh flush).
func IsFlush(cmd *config.Command) bool {
	switch cmd.Query.(type) {
	case config.RouteFlush, config.NeighFlush:
		return true
	}
	return false
}

// flush runs one flush line of a request.
func (h Handler) flush(cmd config.Command) error {
	if h.Flush != nil {
		return h.Flush(cmd)
	}
	steps, err := FlushSteps(h.Ctl, cmd)
	if err != nil || len(steps) == 0 {
		return err
	}
	return h.Ctl.ApplySteps(steps)
}

// FlushSteps lists the lenient delete steps of flush line cmd (IsFlush)
// on c's current state; none when nothing matches. The steps carry cmd's
// position and text, for messages.
func FlushSteps(c *apply.Controller, cmd config.Command) ([]apply.Step, error) {
	var steps []apply.Step
	e := c.Engine()
	switch q := cmd.Query.(type) {
	case config.RouteFlush:
		if q.VRF != "" { // the VRF's table now, as at the line's place in a replay
			t, ok := e.FIB().VRFTable(q.VRF)
			if !ok {
				return nil, fmt.Errorf("%s: %w %q (no such VRF)", cmd.Pos, ErrFlushNoDevice, q.VRF)
			}
			q.RouteFilter = q.RouteFilter.InVRF(t)
		}
		for _, r := range e.FIB().Routes(q.Table) {
			if r.Owner != fib.OwnerConfig || !q.Selects(r) {
				continue
			}
			spec := fib.RouteSpec{Prefix: r.Prefix, Table: r.Table, Type: r.Type, TypeSet: true, Proto: r.Proto,
				Metric: r.Metric, MetricSet: true}
			steps = append(steps, apply.Step{Lenient: true, Command: config.Command{Pos: cmd.Pos, Text: cmd.Text,
				Route: &config.RouteCmd{Op: "delete", Spec: spec}}})
		}
	case config.NeighFlush:
		var ifindex uint32
		if q.Dev != "" {
			ifc := e.Router().Iface(q.Dev)
			if ifc == nil {
				return nil, fmt.Errorf("%s: %w %q", cmd.Pos, ErrFlushNoDevice, q.Dev)
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
			steps = append(steps, apply.Step{Lenient: true, Command: config.Command{Pos: cmd.Pos, Text: cmd.Text,
				Neigh: &config.NeighCmd{Op: "delete", IP: i.Addr(), Dev: names[i.IfIndex]}}})
		}
	default:
		return nil, fmt.Errorf("%s: %s: not a flush", cmd.Pos, cmd.Text)
	}
	return steps, nil
}
