package apply

// The ports a config names, read from its lines alone: what Apply declares
// as ports when it applies the config to a fresh engine (devices named by
// address, route, nexthop and link lines that are not bridges or VLAN
// interfaces where they stand and at the end of the file). A daemon opens
// them before it applies a large file, without building a scratch engine
// for it; TestPortNamerMatchesApply holds the two to the same answer.
//
// Locking: none; a PortNamer belongs to one reader.

import (
	"slices"

	"github.com/netfwd/netfwd/internal/config"
)

// PortNamer collects the ports of the commands added to it, in file order.
type PortNamer struct {
	bridges, vlans, vrfs map[string]bool
	named                map[string]bool
}

// Add reads one command.
func (p *PortNamer) Add(c *config.Command) {
	if p.named == nil {
		p.bridges, p.vlans, p.vrfs, p.named = map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	}
	switch {
	case c.Link != nil:
		l := c.Link
		switch l.Op {
		case "add":
			if p.bridges[l.Name] || p.vlans[l.Name] || p.vrfs[l.Name] {
				return // refused by Apply
			}
			switch l.Kind {
			case "vrf":
				p.vrfs[l.Name] = true
			case "bridge":
				p.bridges[l.Name] = true
			case "vlan":
				p.vlans[l.Name] = true
			}
		case "delete":
			if p.vrfs[l.Name] {
				delete(p.vrfs, l.Name)
			} else if p.vlans[l.Name] {
				delete(p.vlans, l.Name)
			} else {
				delete(p.bridges, l.Name)
			}
		case "set":
			if l.Kind != "bridge" && !p.bridges[l.Name] && !p.vlans[l.Name] && !p.vrfs[l.Name] {
				p.named[l.Name] = true
			}
		}
	default:
		namedDevs(c, func(dev string) { p.named[dev] = true })
	}
}

// namedDevs calls fn for every device an address, route (its multipath
// paths too) or nexthop line names: the names Apply and PortNamer declare
// as ports (with the link set lines).
func namedDevs(c *config.Command, fn func(dev string)) {
	switch {
	case c.Addr != nil:
		fn(c.Addr.Dev)
	case c.Route != nil:
		if d := c.Route.Spec.Dev; d != "" {
			fn(d)
		}
		for _, path := range c.Route.Spec.Multipath {
			if path.Dev != "" {
				fn(path.Dev)
			}
		}
	case c.Nexthop != nil:
		if d := c.Nexthop.Spec.Single.Dev; d != "" {
			fn(d)
		}
	}
}

// Names returns the ports, sorted.
func (p *PortNamer) Names() []string {
	var out []string
	for n := range p.named {
		if !p.bridges[n] && !p.vlans[n] && !p.vrfs[n] {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
