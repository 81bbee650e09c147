package apply

// Route, address, nexthop and link-state commands applied to a FIB
// transaction, and the all-or-nothing loader of a bare FIB built on it
// (`netfwd route get --config`, the benchmarks' full tables): the same
// code the Controller runs for these commands, without an engine around.
//
// Locking: runs inside the caller's FIB transaction (one writer).

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/config"
)

// FIBCommand applies one route, address, nexthop, rule or link-state command to
// tx. Commands for other subsystems (bridge, neighbours, link creation) are
// left to the Controller; a query is an error.
func FIBCommand(tx *fib.Txn, c *config.Command) error {
	switch {
	case c.Route != nil:
		r := c.Route
		spec := r.Spec
		if r.VRF != "" { // `vrf NAME`: its table now (iproute2 asks the kernel at the same point)
			t, ok := tx.VRFTable(r.VRF)
			if !ok {
				return fmt.Errorf("invalid VRF %q: no VRF of that name", r.VRF)
			}
			spec.Table = t
		}
		switch r.Op {
		case "add":
			return tx.AddRoute(spec)
		case "append":
			return tx.AppendRoute(spec)
		case "replace":
			return tx.ReplaceRoute(spec)
		case "change":
			return tx.ChangeRoute(spec)
		case "delete":
			return tx.DelRoute(spec)
		}
		return fmt.Errorf("route %s: unknown operation", r.Op)
	case c.Addr != nil:
		switch c.Addr.Op {
		case "add":
			return tx.AddAddress(c.Addr.Dev, c.Addr.Prefix)
		case "delete":
			return tx.DelAddress(c.Addr.Dev, c.Addr.Prefix)
		}
		return fmt.Errorf("address %s: unknown operation", c.Addr.Op)
	case c.Nexthop != nil:
		switch c.Nexthop.Op {
		case "add":
			return tx.AddNexthop(c.Nexthop.Spec)
		case "replace":
			return tx.ReplaceNexthop(c.Nexthop.Spec)
		case "delete":
			return tx.DelNexthop(c.Nexthop.Spec.ID)
		}
		return fmt.Errorf("nexthop %s: unknown operation", c.Nexthop.Op)
	case c.Rule != nil:
		return ruleCommand(tx, c.Rule)
	case c.Link != nil:
		l := c.Link
		if l.Op == "set" && (l.Up || l.Down) {
			return tx.SetLinkUp(l.Name, l.Up)
		}
	case c.Query != nil:
		return errQuery(c.Query)
	}
	return nil
}

func errQuery(q config.Query) error {
	return fmt.Errorf("%s is a query, not configuration", q.Name())
}

// LoadFIB reads a config text and applies its route, address, nexthop and
// link-state lines to f entirely or not at all. The error lists every
// problem, one FILE:LINE: reason per line (bounded: config.ErrorList).
// sizeHint is the expected number of lines (0: unknown, assume a bulk
// load).
func LoadFIB(f *fib.FIB, name string, r io.Reader, sizeHint int) error {
	if sizeHint <= 0 {
		sizeHint = 1 << 30
	}
	if sizeHint > 10000 {
		// A bulk load allocates a few small objects per route that all stay
		// live: collecting while they pile up is wasted work (it was a third
		// of the load time of the full table). Collect less often meanwhile.
		defer debug.SetGCPercent(debug.SetGCPercent(400))
	}
	tx := f.Begin(sizeHint)
	errs := config.Stream(name, r, func(c *config.Command) error { return FIBCommand(tx, c) })
	if len(errs) > 0 {
		tx.Abort()
		return errors.Join(errs...)
	}
	tx.Commit()
	return nil
}

// LoadFIBFile is LoadFIB on a file by name.
func LoadFIBFile(f *fib.FIB, name string) error {
	fd, err := os.Open(name)
	if err != nil {
		return err
	}
	defer fd.Close()
	hint := 0
	if st, err := fd.Stat(); err == nil {
		hint = int(st.Size() / 40) // about 40 bytes per route line
	}
	return LoadFIB(f, name, fd, hint)
}
