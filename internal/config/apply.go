package config

// Applying parsed commands to the FIB inside one transaction, and the
// all-or-nothing loader built on it.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/netfwd/netfwd/fib"
)

// ApplyFIB applies the route, address, nexthop and link-state commands to tx
// and returns one positioned error per failing command. Commands for other
// subsystems (bridge, neighbours, link creation) are left to their owners.
func ApplyFIB(tx *fib.Txn, cmds []Command) []error {
	var errs []error
	for i := range cmds {
		c := &cmds[i]
		if err := ApplyFIBCommand(tx, c); err != nil {
			errs = append(errs, &Error{c.Pos, err})
		}
	}
	return errs
}

// ApplyFIBCommand applies one command (see ApplyFIB).
func ApplyFIBCommand(tx *fib.Txn, c *Command) error {
	switch {
	case c.Route != nil:
		r := c.Route
		switch r.Op {
		case "add":
			return tx.AddRoute(r.Spec)
		case "append":
			return tx.AppendRoute(r.Spec)
		case "replace":
			return tx.ReplaceRoute(r.Spec)
		case "change":
			return tx.ChangeRoute(r.Spec)
		case "delete":
			return tx.DelRoute(r.Spec)
		}
		return fmt.Errorf("route %s is a query, not configuration", r.Op)
	case c.Addr != nil:
		switch c.Addr.Op {
		case "add":
			return tx.AddAddress(c.Addr.Dev, c.Addr.Prefix)
		case "delete":
			return tx.DelAddress(c.Addr.Dev, c.Addr.Prefix)
		}
		return fmt.Errorf("address %s is a query, not configuration", c.Addr.Op)
	case c.Nexthop != nil:
		switch c.Nexthop.Op {
		case "add":
			return tx.AddNexthop(c.Nexthop.Spec)
		case "replace":
			return tx.ReplaceNexthop(c.Nexthop.Spec)
		case "delete":
			return tx.DelNexthop(c.Nexthop.Spec.ID)
		}
		return fmt.Errorf("nexthop %s is a query, not configuration", c.Nexthop.Op)
	case c.Link != nil:
		l := c.Link
		if l.Op == "set" && (l.Up || l.Down) {
			return tx.SetLinkUp(l.Name, l.Up)
		}
	}
	return nil
}

// LoadFIB reads a config text and applies it to f entirely or not at all.
// The error lists every problem, one FILE:LINE: reason per line. sizeHint
// is the expected number of lines (0: unknown, assume a bulk load).
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
	errs := Stream(name, r, func(c *Command) error { return ApplyFIBCommand(tx, c) })
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
