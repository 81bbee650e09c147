package config

// `bridge vlan|fdb|link|mdb ...` lines, parsed into the bridge's typed
// operations (package l2) with the keyword tables of iproute2's bridge/*.c,
// the `bridge fdb show` and `bridge vlan show` queries, and the bridge
// options of `link add|set ... type bridge`. Syntax errors are found here;
// semantic ones (no such port, VLAN not on the port) when the bridge
// validates the whole batch.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/wire"
)

// BridgeCmd is a parsed bridge line.
type BridgeCmd struct {
	Op l2.Op
}

// bridgeVLANCommands is do_vlan's chain (bridge/vlan.c).
var bridgeVLANCommands = table("bridge vlan command",
	kw("add"), kw("delete"), kw("show"), kw("lst", "show"), kw("list", "show"),
	unsupported(kw("tunnelshow"), kw("set"), exact("global"), kw("help")),
)

// bridgeVLANArgs is vlan_modify's chain.
var bridgeVLANArgs = table("bridge vlan argument",
	exact("dev"), exact("vid"), exact("self"), exact("master"), exact("pvid"), exact("untagged"),
	unsupported(exact("tunnel_info")),
)

// bridgeVLANShowArgs is vlan_show's chain.
var bridgeVLANShowArgs = table("bridge vlan show argument", exact("dev"), unsupported(exact("vid")))

// bridgeFDBCommands is do_fdb's chain (bridge/fdb.c).
var bridgeFDBCommands = table("bridge fdb command",
	kw("add"), kw("append", "add"), kw("replace"), kw("delete"), unsupported(kw("get")), kw("show"),
	kw("lst", "show"), kw("list", "show"), unsupported(exact("flush"), kw("help")),
)

// bridgeFDBArgs is fdb_modify's chain (the default branch is `[to] MAC`).
var bridgeFDBArgs = table("bridge fdb argument",
	exact("dev"), unsupported(exact("dst"), exact("nhid"), exact("port"), exact("vni"), exact("src_vni"),
		exact("via")),
	exact("self"), kw("master"), unsupported(kw("router")), kw("local", "permanent"), kw("permanent"),
	kw("temp", "static"), kw("static"), kw("dynamic"), kw("vlan"), unsupported(kw("use"), kw("extern_learn")),
	kw("sticky"), unsupported(exact("activity_notify"), exact("inactive"), exact("norefresh")),
)

// bridgeFDBShowArgs is fdb_show's chain.
var bridgeFDBShowArgs = table("bridge fdb show argument",
	exact("brport", "dev"), exact("dev"), exact("br"),
	unsupported(exact("vlan"), exact("state"), exact("dynamic")),
)

// bridgeLinkCommands is do_link's chain (bridge/link.c).
var bridgeLinkCommands = table("bridge link command",
	kw("set"), kw("change", "set"), unsupported(kw("show"), kw("lst"), kw("list"), kw("help")),
)

// bridgeLinkArgs is brlink_modify's chain, then netfwd's per-port
// fdb_max_learned.
var bridgeLinkArgs = table("bridge link argument",
	exact("dev"), unsupported(exact("guard"), exact("hairpin"), exact("fastleave"), exact("root_block")),
	exact("learning"), unsupported(exact("learning_sync")), exact("flood"), unsupported(exact("mcast_router")),
	exact("mcast_flood"), exact("bcast_flood"),
	unsupported(exact("mcast_to_unicast"), exact("mcast_max_groups"), exact("cost"), exact("priority")),
	exact("state"), unsupported(exact("hwmode")), exact("self"), exact("master"), exact("neigh_suppress"),
	unsupported(exact("neigh_vlan_suppress"), exact("neigh_forward_grat"), exact("vlan_tunnel")),
	exact("isolated"),
	unsupported(exact("locked"), exact("mab"), exact("backup_port"), exact("nobackup_port"), exact("backup_nhid")),
	exact("fdb_max_learned"),
)

// bridgeMDBCommands is do_mdb's chain (bridge/mdb.c).
var bridgeMDBCommands = table("bridge mdb command",
	kw("add"), unsupported(exact("replace")), kw("delete"),
	unsupported(kw("show"), kw("lst"), kw("list"), exact("get"), exact("flush"), kw("help")),
)

// bridgeMDBArgs is mdb_modify's chain.
var bridgeMDBArgs = table("bridge mdb argument",
	exact("dev"), exact("grp"), exact("port"), exact("permanent"), exact("temp"), exact("vid"),
	unsupported(exact("src"), exact("filter_mode"), exact("source_list"), exact("proto"), exact("dst"),
		exact("dst_port"), exact("vni"), exact("src_vni"), exact("via")),
)

// stpStates are bridge/link.c's state names, by number.
var stpStates = []string{"disabled", "listening", "learning", "forwarding", "blocking"}

func parseVIDRange(s string) (uint16, uint16, error) {
	a, b, isRange := strings.Cut(s, "-")
	lo, err := parseVID(a)
	if err != nil {
		return 0, 0, err
	}
	if !isRange {
		return lo, 0, nil
	}
	hi, err := parseVID(b)
	if err != nil || hi < lo {
		return 0, 0, fmt.Errorf("invalid VLAN range %s", Quote(s))
	}
	return lo, hi, nil
}

func parseVID(s string) (uint16, error) {
	v, err := strconv.ParseUint(s, 10, 16)
	if err != nil || v < 1 || v > 4094 {
		return 0, fmt.Errorf("invalid VLAN id %s (1-4094)", Quote(s))
	}
	return uint16(v), nil
}

func parseBridgeVLAN(cmd *Command, w *words, compress bool) error {
	op, err := verb(w, bridgeVLANCommands, "show")
	if err != nil {
		return err
	}
	if op == "show" {
		q := VLANShow{Compress: compress}
		for w.More() {
			a := w.Next()
			if _, err := bridgeVLANShowArgs.must(a); err != nil {
				return err
			}
			if q.Dev, err = w.Value(a); err != nil {
				return err
			}
		}
		cmd.Query = q
		return nil
	}
	var dev string
	var vid, end uint16
	var pvid, untagged, self bool
	for w.More() {
		a := w.Next()
		means, err := bridgeVLANArgs.must(a)
		if err != nil {
			return err
		}
		switch means {
		case "dev", "vid":
			v, err := w.Value(a)
			if err != nil {
				return err
			}
			if means == "dev" {
				if err := setDev(&dev, v); err != nil {
					return err
				}
			} else if vid, end, err = parseVIDRange(v); err != nil {
				return err
			}
		case "pvid":
			pvid = true
		case "untagged":
			untagged = true
		case "self":
			self = true
		}
	}
	if dev == "" || vid == 0 {
		return errors.New("bridge vlan: need \"dev DEV vid VID\"")
	}
	if op == "add" {
		cmd.Bridge = &BridgeCmd{Op: l2.VLANAdd{Dev: dev, VID: vid, VIDEnd: end, PVID: pvid, Untagged: untagged, Self: self}}
		return nil
	}
	if pvid || untagged {
		return errors.New("bridge vlan del takes no pvid/untagged")
	}
	cmd.Bridge = &BridgeCmd{Op: l2.VLANDel{Dev: dev, VID: vid, VIDEnd: end, Self: self}}
	return nil
}

func parseBridgeFDB(cmd *Command, w *words) error {
	op, err := verb(w, bridgeFDBCommands, "show")
	if err != nil {
		return err
	}
	if op == "show" {
		var q FDBShow
		for w.More() {
			a := w.Next()
			means, err := bridgeFDBShowArgs.must(a)
			if err != nil {
				return err
			}
			v, err := w.Value(a)
			if err != nil {
				return err
			}
			if err := checkDevName(v); err != nil {
				return err
			}
			if means == "br" {
				q.Bridge = v
			} else {
				q.Port = v
			}
		}
		cmd.Query = q
		return nil
	}
	add := l2.FDBAdd{Kind: l2.FDBPermanent, Replace: op == "replace"}
	haveMAC := false
	for w.More() {
		a := w.Next()
		means, ok, err := bridgeFDBArgs.lookup(a)
		if err != nil {
			return err
		}
		if !ok { // the default branch: [to] MAC
			if a == "to" {
				if a, err = w.Value(a); err != nil {
					return err
				}
			}
			if haveMAC {
				return fmt.Errorf("bridge fdb: unexpected %s (the address is given twice)", Quote(a))
			}
			if add.MAC, err = wire.ParseMAC(a); err != nil {
				return fmt.Errorf("bridge fdb: invalid MAC address %s", Quote(a))
			}
			haveMAC = true
			continue
		}
		switch means {
		case "dev", "vlan":
			v, err := w.Value(a)
			if err != nil {
				return err
			}
			if means == "dev" {
				if err := setDev(&add.Dev, v); err != nil {
					return err
				}
			} else {
				if add.VID, err = parseVID(v); err != nil {
					return err
				}
				add.HasVID = true
			}
		case "permanent":
			add.Kind = l2.FDBPermanent
		case "static":
			add.Kind = l2.FDBStatic
		case "dynamic":
			add.Kind = l2.FDBDynamic
		case "sticky":
			add.Sticky = true
		}
	}
	if !haveMAC {
		return errors.New("bridge fdb: missing MAC address")
	}
	if add.Dev == "" {
		return errors.New("bridge fdb: need \"dev DEV\"")
	}
	if op == "delete" {
		cmd.Bridge = &BridgeCmd{Op: l2.FDBDel{MAC: add.MAC, Dev: add.Dev, VID: add.VID, HasVID: add.HasVID}}
		return nil
	}
	cmd.Bridge = &BridgeCmd{Op: add}
	return nil
}

func parseBridgeLink(cmd *Command, w *words) error {
	if _, err := verb(w, bridgeLinkCommands, "show"); err != nil {
		return err
	}
	op := l2.LinkSet{}
	for w.More() {
		a := w.Next()
		means, err := bridgeLinkArgs.must(a)
		if err != nil {
			return err
		}
		if means == "self" || means == "master" {
			continue
		}
		v, err := w.Value(a)
		if err != nil {
			return err
		}
		switch means {
		case "dev":
			if err := setDev(&op.Dev, v); err != nil {
				return err
			}
		case "state":
			s, err := strconv.ParseUint(v, 10, 8)
			if err != nil {
				s = uint64(len(stpStates))
				for i, n := range stpStates {
					if v == n {
						s = uint64(i)
					}
				}
			}
			if s >= uint64(len(stpStates)) {
				return fmt.Errorf("invalid STP port state %s (0-4 or %s)", Quote(v), strings.Join(stpStates, ", "))
			}
			st := l2.PortState(s)
			op.State = &st
		case "fdb_max_learned":
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil {
				return fmt.Errorf("invalid fdb_max_learned %s", Quote(v))
			}
			op.MaxLearned = new(uint32(n))
		default:
			f, _ := l2.ParsePortFlag(means)
			on, err := onOff(means, v)
			if err != nil {
				return err
			}
			if on {
				op.Set |= f
			} else {
				op.Clear |= f
			}
		}
	}
	if op.Dev == "" {
		return errors.New("bridge link set: need \"dev DEV\"")
	}
	cmd.Bridge = &BridgeCmd{Op: op}
	return nil
}

func parseBridgeMDB(cmd *Command, w *words) error {
	op, err := verb(w, bridgeMDBCommands, "")
	if err != nil {
		return err
	}
	var br, port string
	var grp wire.MAC
	var vid uint16
	haveGrp := false
	for w.More() {
		a := w.Next()
		means, err := bridgeMDBArgs.must(a)
		if err != nil {
			return err
		}
		if means == "permanent" || means == "temp" {
			continue
		}
		v, err := w.Value(a)
		if err != nil {
			return err
		}
		switch means {
		case "dev", "port":
			if err := checkDevName(v); err != nil {
				return err
			}
			if means == "dev" {
				br = v
			} else {
				port = v
			}
		case "grp":
			if grp, err = wire.ParseMAC(v); err != nil || grp[0]&1 == 0 {
				return fmt.Errorf("invalid group %s (a multicast MAC address)", Quote(v))
			}
			haveGrp = true
		case "vid":
			if vid, err = parseVID(v); err != nil {
				return err
			}
		}
	}
	if br == "" || port == "" || !haveGrp {
		return errors.New("bridge mdb: need \"dev BRIDGE port PORT grp GROUP\"")
	}
	if op == "add" {
		cmd.Bridge = &BridgeCmd{Op: l2.MDBAdd{Bridge: br, Port: port, Group: grp, VID: vid}}
	} else {
		cmd.Bridge = &BridgeCmd{Op: l2.MDBDel{Bridge: br, Port: port, Group: grp, VID: vid}}
	}
	return nil
}

// BridgeAttrs turns the options of `link add|set NAME type bridge ...`
// (keyed by their full names) into the bridge's attributes.
func BridgeAttrs(opts map[string]string, mac []byte) (l2.BridgeAttrs, error) {
	var a l2.BridgeAttrs
	for k, v := range opts {
		if k == "flood_defer" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return a, fmt.Errorf("bridge option %s: invalid value %s", k, Quote(v))
			}
			a.FloodDeferThreshold = new(n)
			continue
		}
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return a, fmt.Errorf("bridge option %s: invalid value %s", k, Quote(v))
		}
		switch k {
		case "vlan_filtering", "mcast_prefilter":
			if n > 1 {
				return a, fmt.Errorf("%s: want 0 or 1", k)
			}
			if k == "vlan_filtering" {
				a.VLANFiltering = new(n == 1)
			} else {
				a.McastPrefilter = new(n == 1)
			}
		case "ageing_time":
			a.AgeingTime = new(time.Duration(n) * 10 * time.Millisecond) // centiseconds
		case "fdb_max_learned":
			a.FDBMaxLearned = new(uint32(n))
		case "vlan_default_pvid":
			if n > 4094 {
				return a, fmt.Errorf("vlan_default_pvid: want 0-4094")
			}
			a.DefaultPVID = new(uint16(n))
		default:
			return a, fmt.Errorf("unsupported bridge option %s", Quote(k))
		}
	}
	if len(mac) == 6 {
		m := wire.MAC(mac)
		a.MAC = &m
	}
	return a, nil
}
