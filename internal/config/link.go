package config

// `link add NAME [address MAC] type bridge [OPTION VALUE]...`,
// `link add link PARENT name NAME type vlan id VID`,
// `link add NAME type vrf table TABLE`, `link set DEV vrf NAME`,
// `link set [dev] NAME [up|down] [master M|nomaster] [mtu N] [address MAC]
//  [type bridge OPTION VALUE...]`, `link del NAME`, and the `link show`
// query, with iplink.c's keyword tables: `type` ends the common arguments
// and the rest belongs to the link type (iplink_bridge.c, iplink_vlan.c).
// Interfaces named but never created with `link add` are ports.

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// LinkCmd is a parsed link line.
type LinkCmd struct {
	Op   string // add, set, delete
	Name string
	// add; set with Kind "bridge" changes the bridge's attributes
	Kind    string            // bridge, vlan, vrf
	Parent  string            // vlan: the bridge it sits on
	VID     uint16            // vlan
	Table   uint32            // vrf: the VRF's routing table
	Options map[string]string // bridge options by their full name, e.g. vlan_filtering: 1
	// set
	Up, Down bool
	Master   string
	// VRFOnly is `vrf NAME` rather than `master NAME`: iplink.c refuses a
	// master that is not a VRF then.
	VRFOnly  bool
	NoMaster bool
	MTU      int
	Address  net.HardwareAddr
}

// linkCommands is do_iplink's chain.
var linkCommands = table("link command",
	kw("add"), kw("set"), kw("change", "set"), unsupported(kw("replace")), kw("delete"), kw("show"),
	kw("lst", "show"), kw("list", "show"), unsupported(kw("xstats"), kw("afstats"), kw("property"), kw("help")),
)

// linkArgs is iplink_parse's chain (the default branch is `[dev] NAME`).
var linkArgs = table("link argument",
	exact("up"), exact("down"), exact("name"), unsupported(exact("index")), kw("link"), kw("address"),
	unsupported(kw("broadcast"), exact("brd"), kw("txqueuelen"), exact("qlen"), kw("txqlen")), exact("mtu"),
	unsupported(exact("inet"), exact("xdpgeneric"), exact("xdpdrv"), exact("xdpoffload"), exact("xdp"),
		exact("netns"), exact("multicast"), exact("allmulticast"), exact("promisc"), exact("trailers"),
		exact("arp"), exact("carrier"), exact("vf")),
	kw("master"), exact("vrf"), kw("nomaster"), unsupported(kw("dynamic")), kw("type"),
	unsupported(kw("alias"), exact("group"), exact("mode"), exact("state"), kw("numtxqueues"),
		kw("numrxqueues"), kw("addrgenmode"), kw("link-netns"), kw("link-netnsid"), exact("protodown"),
		exact("protodown_reason"), exact("gso_max_size"), exact("gso_max_segs"), exact("gro_max_size"),
		exact("gso_ipv4_max_size"), exact("gro_ipv4_max_size"), exact("parentdev")),
	exact("dev"),
)

// bridgeLinkOptions is bridge_parse_opt's chain (iplink_bridge.c), then
// netfwd's own options.
var bridgeLinkOptions = table("bridge option",
	unsupported(kw("forward_delay"), kw("hello_time"), kw("max_age")), kw("ageing_time"),
	unsupported(kw("stp_state"), exact("stp_mode"), kw("priority")), kw("vlan_filtering"),
	unsupported(kw("vlan_protocol"), kw("group_fwd_mask"), kw("group_address"), exact("no_linklocal_learn"),
		exact("mst_enabled")),
	exact("fdb_max_learned"), unsupported(kw("fdb_flush")), kw("vlan_default_pvid"),
	unsupported(kw("vlan_stats_enabled"), kw("vlan_stats_per_port"), kw("mcast_router"), kw("mcast_snooping"),
		exact("mcast_vlan_snooping"), kw("mcast_query_use_ifaddr"), kw("mcast_querier"),
		kw("mcast_hash_elasticity"), kw("mcast_hash_max"), kw("mcast_last_member_count"),
		kw("mcast_startup_query_count"), kw("mcast_last_member_interval"), kw("mcast_membership_interval"),
		kw("mcast_querier_interval"), kw("mcast_query_interval"), kw("mcast_query_response_interval"),
		kw("mcast_startup_query_interval"), kw("mcast_stats_enabled"), kw("mcast_igmp_version"),
		kw("mcast_mld_version"), kw("nf_call_iptables"), kw("nf_call_ip6tables"), kw("nf_call_arptables"),
		exact("mdb_offload_fail_notification"), exact("fdb_local_vlan_0"), kw("help")),
	// netfwd
	exact("flood_defer"), exact("mcast_prefilter"),
)

// vlanLinkOptions is vlan_parse_opt's chain (iplink_vlan.c).
var vlanLinkOptions = table("vlan option",
	unsupported(kw("protocol")), kw("id"),
	unsupported(kw("reorder_hdr"), kw("gvrp"), kw("mvrp"), kw("loose_binding"), kw("bridge_binding"),
		kw("ingress-qos-map"), kw("egress-qos-map"), kw("help")),
)

func parseLink(cmd *Command, w *words) error {
	op, err := verb(w, linkCommands, "show")
	if err != nil {
		return err
	}
	if op == "show" {
		f, err := parseListFilter(w)
		if err != nil {
			return err
		}
		cmd.Query = LinkShow{ListFilter: f}
		return nil
	}
	c := &LinkCmd{Op: op, Options: map[string]string{}}
	setName := func(v string) error {
		if c.Name != "" && c.Name != v {
			return fmt.Errorf("either \"dev\" is duplicate, or %s is garbage", Quote(v))
		}
		if err := setDev(&c.Name, v); err != nil {
			return err
		}
		return nil
	}
	for w.More() && c.Kind == "" {
		a := w.Next()
		means, ok, err := linkArgs.lookup(a)
		if err != nil {
			return err
		}
		if !ok || means == "dev" {
			if ok {
				if a, err = w.Value(a); err != nil {
					return err
				}
			}
			if err := setName(a); err != nil {
				return err
			}
			continue
		}
		switch means {
		case "up", "down", "nomaster":
			if op != "set" {
				return fmt.Errorf("link %s: %s is only for link set", op, Quote(a))
			}
			switch means {
			case "up":
				c.Up = true
			case "down":
				c.Down = true
			default:
				c.NoMaster = true
			}
			continue
		}
		v, err := w.Value(a)
		if err != nil {
			return err
		}
		switch means {
		case "name":
			err = setName(v)
		case "link":
			if op != "add" {
				return fmt.Errorf("link %s: %s is only for link add", op, Quote(a))
			}
			err = setDev(&c.Parent, v)
		case "address":
			c.Address, err = parseLinkAddress(v)
		case "mtu":
			m, perr := strconv.Atoi(v)
			if perr != nil || m < 68 || m > 65535 {
				return fmt.Errorf("invalid mtu %s (68-65535)", Quote(v))
			}
			c.MTU = m
		case "master":
			err = setDev(&c.Master, v)
		case "vrf":
			if op != "set" {
				return fmt.Errorf("link %s: %s is only for link set", op, Quote(a))
			}
			err = setDev(&c.Master, v)
			c.VRFOnly = true
		case "type":
			err = parseLinkType(c, w, v)
		}
		if err != nil {
			return err
		}
	}
	if c.Name == "" {
		return errors.New("missing interface name")
	}
	if c.Up && c.Down {
		return errors.New("both up and down")
	}
	if op == "add" {
		switch c.Kind {
		case "":
			return errors.New("missing \"type bridge|vlan|vrf\"")
		case "vrf":
			if c.Table == 0 {
				return errors.New("VRF table id is missing") // the vrf driver's extack
			}
		case "bridge":
			if _, err := BridgeAttrs(c.Options, c.Address); err != nil {
				return err
			}
		case "vlan":
			if c.Parent == "" || c.VID == 0 {
				return errors.New("a vlan needs \"link PARENT\" and \"id VID\"")
			}
		}
	}
	if op == "set" && c.Kind == "bridge" {
		if c.MTU != 0 || c.Master != "" || c.NoMaster || c.Up || c.Down || len(c.Address) != 0 {
			return errors.New("link set ... type bridge: give the bridge options in a line of their own")
		}
		if len(c.Options) == 0 {
			return errors.New("link set ... type bridge: missing bridge options")
		}
		if _, err := BridgeAttrs(c.Options, nil); err != nil {
			return err
		}
	}
	if op == "delete" && (c.MTU != 0 || c.Master != "" || len(c.Address) != 0) {
		return errors.New("link del takes only the interface name")
	}
	cmd.Link = c
	return nil
}

// parseLinkType reads `type KIND [KIND OPTIONS]`, the rest of the line.
func parseLinkType(c *LinkCmd, w *words, kind string) error {
	switch {
	case kind == "bridge":
		c.Kind = kind
		for w.More() {
			a := w.Next()
			means, err := bridgeLinkOptions.must(a)
			if err != nil {
				return err
			}
			v, err := w.Value(a)
			if err != nil {
				return err
			}
			c.Options[means] = v
		}
		return nil
	case kind == "vlan" && c.Op == "add":
		c.Kind = kind
		for w.More() {
			a := w.Next()
			if _, err := vlanLinkOptions.must(a); err != nil {
				return err
			}
			v, err := w.Value(a)
			if err != nil {
				return err
			}
			id, err := strconv.ParseUint(v, 10, 16)
			if err != nil || id == 0 || id > 4094 {
				return fmt.Errorf("invalid VLAN id %s (1-4094)", Quote(v))
			}
			c.VID = uint16(id)
		}
		return nil
	case kind == "vlan":
		return fmt.Errorf("link %s ... type vlan: a VLAN interface's id is set when it is created", c.Op)
	case kind == "vrf" && c.Op == "add":
		c.Kind = kind
		for w.More() {
			a := w.Next()
			if _, err := vrfLinkOptions.must(a); err != nil {
				return err
			}
			v, err := w.Value(a)
			if err != nil {
				return err
			}
			t, err := parseTable(v)
			if err != nil {
				return fmt.Errorf("invalid table ID %s", Quote(v)) // iplink_vrf.c's invarg
			}
			if t == 0 {
				return errors.New("Invalid VRF table id") // the vrf driver's extack (RT_TABLE_UNSPEC)
			}
			c.Table = t
		}
		return nil
	case kind == "vrf":
		return fmt.Errorf("link %s ... type vrf: a VRF's table is set when it is created", c.Op)
	}
	return fmt.Errorf("unsupported link type %s (want bridge, vlan or vrf)", Quote(kind))
}

// vrfLinkOptions is vrf_parse_opt's chain (iplink_vrf.c).
var vrfLinkOptions = table("vrf option", kw("table"))

// parseLinkAddress reads a MAC for `address`: the kernel refuses
// multicast (including broadcast) and all-zero addresses for an interface
// (is_valid_ether_addr: EADDRNOTAVAIL), and so does netfwd, where such an
// address would make the port unreachable.
func parseLinkAddress(v string) (net.HardwareAddr, error) {
	mac, err := net.ParseMAC(v)
	if err != nil || len(mac) != 6 {
		return nil, fmt.Errorf("invalid MAC address %s", Quote(v))
	}
	if mac[0]&1 != 0 || string(mac) == "\x00\x00\x00\x00\x00\x00" {
		return nil, fmt.Errorf("address %s: cannot assign requested address (multicast, broadcast and all-zero addresses are refused)", mac)
	}
	return mac, nil
}

// setDev stores an interface name after checking it (checkDevName).
func setDev(dst *string, name string) error {
	if err := checkDevName(name); err != nil {
		return err
	}
	*dst = name
	return nil
}

// checkDevName applies the kernel's rule for interface names
// (dev_valid_name): 1-15 bytes, not "." or "..", no "/", ":" or white space.
func checkDevName(s string) error {
	if s == "" || len(s) > 15 || s == "." || s == ".." || strings.ContainsAny(s, "/: \t\n") {
		return fmt.Errorf("invalid device name %s (1-15 characters, no \"/\" or \":\")", Quote(s))
	}
	return nil
}
