package lab

// LinuxRouter makes the Linux kernel of the router namespace do netfwd's
// job on the same network: one plain bridge per VLAN (named after the VLAN
// interface, so config lines naming "dev vlan10" work), the router's
// addresses on the bridges and routed ports, ip_forward on, and the extra
// config lines run as `ip` commands (netfwd's config syntax is
// iproute2's). It is the reference the end-to-end tests hold netfwd
// against, and the baseline of `netfwd-bench`. Trunks cannot be built:
// this kernel has neither 802.1Q devices nor bridge VLAN filtering.
//
// Locking: none.

import (
	"fmt"
	"strings"
)

// LinuxRouter configures the router namespace of n as a Linux router.
func (n *Net) LinuxRouter() error {
	if len(n.Spec.Trunks) > 0 {
		return fmt.Errorf("lab: a Linux router cannot have trunk ports on this kernel (no 802.1Q)")
	}
	r := n.Router
	if err := n.Lab.Sysctl(r, "net.ipv4.ip_forward", "1"); err != nil {
		return err
	}
	for _, v := range n.Spec.VLANs {
		steps := [][]string{{"link", "add", v.Iface, "address", n.Spec.BridgeMAC.String(), "type", "bridge"}}
		for _, h := range n.Spec.Hosts {
			if h.VLAN == v.VID {
				steps = append(steps, []string{"link", "set", h.Port, "master", v.Iface})
			}
		}
		steps = append(steps, []string{"link", "set", v.Iface, "up"}, []string{"addr", "add", v.Addr.String(), "dev", v.Iface})
		for _, s := range steps {
			if err := n.IP(r, s...); err != nil {
				return err
			}
		}
	}
	for _, h := range n.Spec.Hosts {
		if h.VLAN == 0 {
			if err := n.IP(r, "addr", "add", h.RouterAddr.String(), "dev", h.Port); err != nil {
				return err
			}
		}
	}
	for _, line := range n.Spec.RouterConfig {
		if err := n.IP(r, strings.Fields(line)...); err != nil {
			return err
		}
	}
	return nil
}
