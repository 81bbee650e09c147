package fib

// Interface indices for a FIB without an owner's index function (`route
// get --config`, tests): names get indices in order of first use, from 2
// (1 is lo), as Router.IfIndex does for the daemon. Rules and flows compare
// indices, so both sides must come from the same function (FIB.DevIndex).
//
// Locking: mu; a name's index never changes.

import "sync"

type devNames struct {
	mu    sync.Mutex
	names map[string]uint32 // guarded by mu
}

func (d *devNames) index(name string) uint32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.names == nil {
		d.names = map[string]uint32{}
	}
	if i, ok := d.names[name]; ok {
		return i
	}
	i := uint32(len(d.names) + 2)
	d.names[name] = i
	return i
}

// DevIndex returns the interface index rules and flows use for a device
// name (lo is 1).
func (f *FIB) DevIndex(name string) uint32 {
	switch name {
	case "":
		return 0
	case "lo":
		return 1
	}
	return f.devIndex(name)
}
