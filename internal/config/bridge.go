package config

// `bridge vlan|fdb|link|mdb ...` lines, parsed into the bridge's typed
// operations (package l2), and the bridge options of `link add ... type
// bridge`. Syntax errors are found here; semantic ones (no such port, VLAN
// not on the port) when the bridge validates the whole file.

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
	// Show: `bridge fdb show` / `bridge vlan show` (control socket queries).
	Show string
}

// NeighCmd is a neighbour line, kept as words for the router (package l3).
type NeighCmd struct {
	Args []string
}

func parseNeigh(args []string) (*NeighCmd, error) {
	if len(args) < 1 {
		return nil, errors.New("neigh: missing command")
	}
	return &NeighCmd{Args: args}, nil
}

func parseBridge(args []string) (*BridgeCmd, error) {
	if len(args) < 2 {
		return nil, errors.New("bridge: want \"bridge OBJECT COMMAND ...\"")
	}
	obj, verbArg, rest := args[0], args[1], args[2:]
	if verbArg == "show" || verbArg == "list" {
		return &BridgeCmd{Show: obj}, nil
	}
	var err error
	var op l2.Op
	switch obj {
	case "vlan":
		op, err = parseBridgeVLAN(verbArg, rest)
	case "fdb":
		op, err = parseBridgeFDB(verbArg, rest)
	case "link":
		if verbArg != "set" {
			return nil, fmt.Errorf("bridge link: unknown command %q (want set)", verbArg)
		}
		op, err = parseBridgeLink(rest)
	case "mdb":
		op, err = parseBridgeMDB(verbArg, rest)
	default:
		return nil, fmt.Errorf("bridge: unknown object %q (want vlan, fdb, link or mdb)", obj)
	}
	if err != nil {
		return nil, err
	}
	return &BridgeCmd{Op: op}, nil
}

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
		return 0, 0, fmt.Errorf("invalid VLAN range %q", s)
	}
	return lo, hi, nil
}

func parseVID(s string) (uint16, error) {
	v, err := strconv.ParseUint(s, 10, 16)
	if err != nil || v < 1 || v > 4094 {
		return 0, fmt.Errorf("invalid VLAN id %q (1-4094)", s)
	}
	return uint16(v), nil
}

func parseBridgeVLAN(verb string, args []string) (l2.Op, error) {
	if verb != "add" && verb != "del" && verb != "delete" {
		return nil, fmt.Errorf("bridge vlan: unknown command %q (want add or del)", verb)
	}
	var dev string
	var vid, end uint16
	var pvid, untagged, self bool
	w := NewWords(args)
	for w.More() {
		switch k := w.Next(); k {
		case "dev":
			v, err := w.Value(k)
			if err != nil {
				return nil, err
			}
			dev = v
		case "vid":
			v, err := w.Value(k)
			if err != nil {
				return nil, err
			}
			if vid, end, err = parseVIDRange(v); err != nil {
				return nil, err
			}
		case "pvid":
			pvid = true
		case "untagged":
			untagged = true
		case "self":
			self = true
		case "master":
		default:
			return nil, fmt.Errorf("bridge vlan: unexpected %q", k)
		}
	}
	if dev == "" || vid == 0 {
		return nil, errors.New("bridge vlan: need \"dev DEV vid VID\"")
	}
	if verb == "add" {
		return l2.VLANAdd{Dev: dev, VID: vid, VIDEnd: end, PVID: pvid, Untagged: untagged, Self: self}, nil
	}
	if pvid || untagged {
		return nil, errors.New("bridge vlan del takes no pvid/untagged")
	}
	return l2.VLANDel{Dev: dev, VID: vid, VIDEnd: end, Self: self}, nil
}

func parseBridgeFDB(verb string, args []string) (l2.Op, error) {
	if verb != "add" && verb != "replace" && verb != "del" && verb != "delete" && verb != "append" {
		return nil, fmt.Errorf("bridge fdb: unknown command %q (want add, replace or del)", verb)
	}
	if len(args) == 0 {
		return nil, errors.New("bridge fdb: missing MAC address")
	}
	mac, err := wire.ParseMAC(args[0])
	if err != nil {
		return nil, fmt.Errorf("bridge fdb: invalid MAC address %q", args[0])
	}
	add := l2.FDBAdd{MAC: mac, Kind: l2.FDBPermanent, Replace: verb == "replace"}
	w := NewWords(args[1:])
	for w.More() {
		switch k := w.Next(); k {
		case "dev":
			v, err := w.Value(k)
			if err != nil {
				return nil, err
			}
			add.Dev = v
		case "vlan":
			v, err := w.Value(k)
			if err != nil {
				return nil, err
			}
			if add.VID, err = parseVID(v); err != nil {
				return nil, err
			}
			add.HasVID = true
		case "local", "permanent":
			add.Kind = l2.FDBPermanent
		case "static":
			add.Kind = l2.FDBStatic
		case "dynamic":
			add.Kind = l2.FDBDynamic
		case "sticky":
			add.Sticky = true
		case "self", "master":
		default:
			return nil, fmt.Errorf("bridge fdb: unexpected %q", k)
		}
	}
	if add.Dev == "" {
		return nil, errors.New("bridge fdb: need \"dev DEV\"")
	}
	if verb == "del" || verb == "delete" {
		return l2.FDBDel{MAC: add.MAC, Dev: add.Dev, VID: add.VID, HasVID: add.HasVID}, nil
	}
	return add, nil
}

func parseOnOff(k, v string) (bool, error) {
	switch v {
	case "on":
		return true, nil
	case "off":
		return false, nil
	}
	return false, fmt.Errorf("%s: want on or off, got %q", k, v)
}

func parseBridgeLink(args []string) (l2.Op, error) {
	op := l2.LinkSet{}
	w := NewWords(args)
	for w.More() {
		k := w.Next()
		v, err := w.Value(k)
		if err != nil {
			return nil, err
		}
		switch k {
		case "dev":
			op.Dev = v
		case "state":
			s, err := strconv.ParseUint(v, 10, 8)
			if err != nil || s > 4 {
				return nil, fmt.Errorf("invalid state %q (0-4)", v)
			}
			st := l2.PortState(s)
			op.State = &st
		case "fdb_max_learned":
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("invalid fdb_max_learned %q", v)
			}
			m := uint32(n)
			op.MaxLearned = &m
		default:
			f, ok := l2.ParsePortFlag(k)
			if !ok {
				return nil, fmt.Errorf("bridge link set: unknown option %q", k)
			}
			on, err := parseOnOff(k, v)
			if err != nil {
				return nil, err
			}
			if on {
				op.Set |= f
			} else {
				op.Clear |= f
			}
		}
	}
	if op.Dev == "" {
		return nil, errors.New("bridge link set: need \"dev DEV\"")
	}
	return op, nil
}

func parseBridgeMDB(verb string, args []string) (l2.Op, error) {
	if verb != "add" && verb != "del" && verb != "delete" {
		return nil, fmt.Errorf("bridge mdb: unknown command %q (want add or del)", verb)
	}
	var br, port string
	var grp wire.MAC
	var vid uint16
	haveGrp := false
	w := NewWords(args)
	for w.More() {
		k := w.Next()
		if k == "permanent" || k == "temp" {
			continue
		}
		v, err := w.Value(k)
		if err != nil {
			return nil, err
		}
		switch k {
		case "dev":
			br = v
		case "port":
			port = v
		case "grp":
			if grp, err = wire.ParseMAC(v); err != nil || grp[0]&1 == 0 {
				return nil, fmt.Errorf("invalid group %q (a multicast MAC address)", v)
			}
			haveGrp = true
		case "vid":
			if vid, err = parseVID(v); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("bridge mdb: unexpected %q", k)
		}
	}
	if br == "" || port == "" || !haveGrp {
		return nil, errors.New("bridge mdb: need \"dev BRIDGE port PORT grp GROUP\"")
	}
	if verb == "add" {
		return l2.MDBAdd{Bridge: br, Port: port, Group: grp, VID: vid}, nil
	}
	return l2.MDBDel{Bridge: br, Port: port, Group: grp, VID: vid}, nil
}

// BridgeAttrs turns the options of `link add NAME type bridge ...` into the
// bridge's attributes.
func BridgeAttrs(opts map[string]string, mac []byte) (l2.BridgeAttrs, error) {
	var a l2.BridgeAttrs
	for k, v := range opts {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return a, fmt.Errorf("bridge option %s: invalid value %q", k, v)
		}
		switch k {
		case "vlan_filtering":
			if n > 1 {
				return a, fmt.Errorf("vlan_filtering: want 0 or 1")
			}
			a.VLANFiltering = new(n == 1)
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
			return a, fmt.Errorf("unsupported bridge option %q (want vlan_filtering, ageing_time, fdb_max_learned, vlan_default_pvid)", k)
		}
	}
	if len(mac) == 6 {
		m := wire.MAC(mac)
		a.MAC = &m
	}
	return a, nil
}
