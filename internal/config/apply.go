package config

// Applying parsed commands to the FIB inside one transaction, and the
// all-or-nothing loader built on it.

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/netfwd/netfwd/fib"
)

// ApplyFIB applies the route, address, nexthop and link-state commands to tx
// and returns one positioned error per failing command. Commands for other
// subsystems (bridge, neighbours, link creation) are left to their owners.
func ApplyFIB(tx *fib.Txn, cmds []Command) []error {
	var errs []error
	for i := range cmds {
		c := &cmds[i]
		if err := applyFIB(tx, c); err != nil {
			errs = append(errs, &Error{c.Pos, err})
		}
	}
	return errs
}

func applyFIB(tx *fib.Txn, c *Command) error {
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

// LoadFIB reads a config file and applies it to f entirely or not at all.
// The error lists every problem, one FILE:LINE: reason per line.
func LoadFIB(f *fib.FIB, name string, r io.Reader) error {
	cmds, errs := Parse(name, r)
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	tx := f.Begin(len(cmds))
	if errs := ApplyFIB(tx, cmds); len(errs) > 0 {
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
	return LoadFIB(f, name, fd)
}
