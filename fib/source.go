package fib

// Source address selection, the kernel's inet_select_addr: a primary address
// of the egress device whose subnet contains the target (the gateway; an
// invalid target matches the first), else the device's first primary
// address, else the first primary address of any other device.

import "net/netip"

func selectSource(addrs []Address, dev string, target netip.Addr) netip.Addr {
	var first netip.Addr
	for _, a := range addrs {
		if a.Dev != dev || a.Secondary {
			continue
		}
		if !target.IsValid() || a.Prefix.Contains(target) {
			return a.Prefix.Addr()
		}
		if !first.IsValid() {
			first = a.Prefix.Addr()
		}
	}
	if first.IsValid() {
		return first
	}
	for _, a := range addrs {
		if !a.Secondary {
			return a.Prefix.Addr()
		}
	}
	return netip.Addr{}
}

// SelectSource returns the source address the router uses towards target
// through dev (for ICMP errors and ARP requests).
func (f *FIB) SelectSource(dev string, target netip.Addr) netip.Addr {
	return selectSource(f.cur.Load().addrs, dev, target)
}
