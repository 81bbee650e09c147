// Package lab builds small networks of real Linux hosts around netfwd: one
// network namespace per host, veth pairs to a router namespace, and the
// netfwd configuration that makes the router namespace's ends its ports.
// `netfwd-lab`, the end-to-end tests and `netfwd-bench veth` build on it.
//
// Flow: a Spec names the bridge's VLANs (each with its VLAN interface and
// address), the hosts (access hosts on a VLAN, uplink hosts on a routed
// port, trunk ends for emulated tagged hosts) and extra router config.
// Build creates the namespaces and veth pairs with iproute2 (through
// vethlab.Lab, which gives every namespace a random per-run prefix and sweeps
// the namespaces of dead runs), configures the hosts as a person would
// (`ip addr add`, `ip route add default via`), and Spec.Config writes the
// router's config file. The router namespace gets no addresses: netfwd
// owns its interfaces through AF_PACKET.
//
// Locking: none; a Net is built and closed by one goroutine, and its
// methods that run commands may be called from any goroutine.
package lab

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/netfwd/netfwd/internal/vethlab"
)

// VLAN is one VLAN of the router's bridge with its VLAN interface.
type VLAN struct {
	VID   uint16
	Iface string       // router VLAN interface, "vlan10"
	Addr  netip.Prefix // router address on it, 10.0.10.1/24
}

// HostSpec is one host namespace connected to one router port.
type HostSpec struct {
	Name string // short name, "h1"; the namespace is the lab prefix + "-" + Name
	Port string // router-side interface, "eth1"
	// VLAN is the access VLAN of Port (untagged, pvid); 0 makes Port a
	// routed port with address RouterAddr (an uplink).
	VLAN       uint16
	MAC        net.HardwareAddr // host interface MAC (fixed: readable output)
	Addr       netip.Prefix     // host address, 10.0.10.11/24
	Gateway    netip.Addr       // default route; zero: none
	RouterAddr netip.Prefix     // VLAN 0 only: the router's address on Port
	RouterMAC  net.HardwareAddr // VLAN 0 only: the router's MAC on Port
	// Routes are extra `ip route add` argument lists for the host, e.g.
	// "10.0.0.0/8 via 203.0.113.2" on an uplink host.
	Routes []string
	// Loopback addresses (host routes on lo), e.g. 198.51.100.1/32: an
	// address "on the Internet" behind an uplink host.
	Loopback []netip.Prefix
	// Sysctls set in the host namespace (key dotted), e.g.
	// net.ipv4.conf.all.arp_notify=1.
	Sysctls map[string]string
}

// TrunkSpec is a trunk port of the bridge whose far end sits, without
// addresses, in its own namespace: tests send and receive crafted tagged
// frames there (this kernel has no 802.1Q devices to make a real tagged
// host).
type TrunkSpec struct {
	Name  string // namespace suffix, "t1"
	Port  string // router-side interface
	VLANs []uint16
	MAC   net.HardwareAddr // MAC of the far end
}

// Spec is a whole lab network.
type Spec struct {
	Bridge    string           // "br0"
	BridgeMAC net.HardwareAddr // the bridge's (and its VLAN interfaces') MAC
	VLANs     []VLAN
	Hosts     []HostSpec
	Trunks    []TrunkSpec
	// RouterConfig are extra router config lines (routes), appended.
	RouterConfig []string
	// HostIface is the name of every host's interface (default "eth0").
	HostIface string
	// HostTxChecksumOff turns transmit checksum offload off on the hosts'
	// interfaces (and with it TSO): a veth hands a frame whose checksum
	// the sender left to the NIC to an XDP program unfinished, with nothing
	// to say so, so AF_XDP (--io afxdp) needs senders that finish their
	// own (docs/pktio.md).
	HostTxChecksumOff bool
}

// Host is a built host.
type Host struct {
	HostSpec
	NS    string // its namespace
	Iface string // its interface in NS
}

// Trunk is a built trunk end.
type Trunk struct {
	TrunkSpec
	NS    string
	Iface string // the far end, in NS
}

// Net is a built lab network.
type Net struct {
	Spec   Spec
	Lab    *vethlab.Lab
	Router string // the router's namespace
	Hosts  []*Host
	Trunks []*Trunk
}

// Host returns the host with a name, or nil.
func (n *Net) Host(name string) *Host {
	for _, h := range n.Hosts {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// Trunk returns the trunk end with a name, or nil.
func (n *Net) Trunk(name string) *Trunk {
	for _, t := range n.Trunks {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Build creates the namespaces and links of spec and configures the hosts.
// On error everything created so far is removed.
func Build(spec Spec) (*Net, error) {
	if spec.HostIface == "" {
		spec.HostIface = "eth0"
	}
	l, err := vethlab.NewLab()
	if err != nil {
		return nil, err
	}
	n := &Net{Spec: spec, Lab: l}
	if err := n.build(); err != nil {
		l.Close()
		return nil, err
	}
	return n, nil
}

// Close removes every namespace of the network (and so every veth).
func (n *Net) Close() error { return n.Lab.Close() }

func (n *Net) build() error {
	l := n.Lab
	var err error
	if n.Router, err = l.AddNetns("-r"); err != nil {
		return err
	}
	for _, hs := range n.Spec.Hosts {
		h := &Host{HostSpec: hs, Iface: n.Spec.HostIface}
		if h.NS, err = l.AddNetns("-" + hs.Name); err != nil {
			return err
		}
		routerMAC := hs.RouterMAC
		if hs.VLAN != 0 {
			routerMAC = nil // a bridge port: its own MAC does not matter
		}
		if err := n.Veth(n.Router, hs.Port, routerMAC, h.NS, h.Iface, hs.MAC); err != nil {
			return err
		}
		for k, v := range hs.Sysctls {
			if err := l.Sysctl(h.NS, k, v); err != nil {
				return err
			}
		}
		if n.Spec.HostTxChecksumOff {
			if err := vethlab.TxChecksumOff(h.NS, h.Iface); err != nil {
				return err
			}
		}
		steps := [][]string{{"addr", "add", hs.Addr.String(), "dev", h.Iface}}
		for _, lo := range hs.Loopback {
			steps = append(steps, []string{"addr", "add", lo.String(), "dev", "lo"})
		}
		if hs.Gateway.IsValid() {
			steps = append(steps, []string{"route", "add", "default", "via", hs.Gateway.String()})
		}
		for _, r := range hs.Routes {
			steps = append(steps, append([]string{"route", "add"}, strings.Fields(r)...))
		}
		for _, s := range steps {
			if err := l.IP(h.NS, s...); err != nil {
				return err
			}
		}
		n.Hosts = append(n.Hosts, h)
	}
	for _, ts := range n.Spec.Trunks {
		t := &Trunk{TrunkSpec: ts, Iface: n.Spec.HostIface}
		if t.NS, err = l.AddNetns("-" + ts.Name); err != nil {
			return err
		}
		if err := n.Veth(n.Router, ts.Port, nil, t.NS, t.Iface, ts.MAC); err != nil {
			return err
		}
		n.Trunks = append(n.Trunks, t)
	}
	return nil
}

// Veth creates a veth pair ifA (in nsA) <-> ifB (in nsB), with the given
// MACs (nil: random), both up. Interface names need not be unique across
// namespaces, so hosts all have "eth0" and the router "eth1".. as on real
// machines; only the namespaces carry the lab prefix.
func (n *Net) Veth(nsA, ifA string, macA net.HardwareAddr, nsB, ifB string, macB net.HardwareAddr) error {
	args := []string{"link", "add", ifA}
	if macA != nil {
		args = append(args, "address", macA.String())
	}
	args = append(args, "type", "veth", "peer", "name", ifB)
	if macB != nil {
		args = append(args, "address", macB.String())
	}
	args = append(args, "netns", nsB)
	if err := n.Lab.IP(nsA, args...); err != nil {
		return err
	}
	if err := n.Lab.IP(nsA, "link", "set", ifA, "up"); err != nil {
		return err
	}
	return n.Lab.IP(nsB, "link", "set", ifB, "up")
}

// Config returns the router's netfwd configuration for spec: the bridge
// with its access and trunk ports, the VLAN interfaces and their
// addresses, the routed ports, then RouterConfig.
func (s Spec) Config() string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	w("# netfwd lab router (generated)")
	if len(s.VLANs) > 0 {
		// vlan_default_pvid 0: ports carry only the VLANs given below.
		w("link add %s address %s type bridge vlan_filtering 1 vlan_default_pvid 0", s.Bridge, s.BridgeMAC)
		for _, h := range s.Hosts {
			if h.VLAN != 0 {
				w("link set %s master %s", h.Port, s.Bridge)
				w("bridge vlan add dev %s vid %d pvid untagged", h.Port, h.VLAN)
			}
		}
		for _, t := range s.Trunks {
			w("link set %s master %s", t.Port, s.Bridge)
			for _, vid := range t.VLANs {
				w("bridge vlan add dev %s vid %d", t.Port, vid)
			}
		}
		for _, v := range s.VLANs {
			w("link add link %s name %s type vlan id %d", s.Bridge, v.Iface, v.VID)
			w("address add %s dev %s", v.Addr, v.Iface)
		}
	}
	for _, h := range s.Hosts {
		if h.VLAN == 0 {
			if h.RouterMAC != nil {
				w("link set %s address %s", h.Port, h.RouterMAC)
			}
			w("address add %s dev %s", h.RouterAddr, h.Port)
		}
	}
	for _, line := range s.RouterConfig {
		w("%s", line)
	}
	return b.String()
}

// RouterPorts lists the router's interfaces that are real ports (in spec
// order), the ones the daemon attaches to.
func (s Spec) RouterPorts() []string {
	var p []string
	for _, h := range s.Hosts {
		p = append(p, h.Port)
	}
	for _, t := range s.Trunks {
		p = append(p, t.Port)
	}
	return p
}

// VLANByID returns the VLAN with a VID.
func (s Spec) VLANByID(vid uint16) (VLAN, bool) {
	for _, v := range s.VLANs {
		if v.VID == vid {
			return v, true
		}
	}
	return VLAN{}, false
}

// Exec runs a command in a namespace and returns its combined output.
func (n *Net) Exec(ns, cmd string, args ...string) (string, error) {
	out, err := n.Lab.Exec(ns, cmd, args...)
	return string(out), err
}

// IP runs `ip -n NS ARGS...`.
func (n *Net) IP(ns string, args ...string) error { return n.Lab.IP(ns, args...) }
