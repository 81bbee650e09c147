package config

// `link add NAME type bridge [OPTION VALUE]...`,
// `link add link PARENT name NAME type vlan id VID`,
// `link set [dev] NAME [up|down] [master M|nomaster] [mtu N] [address MAC]`.
// Interfaces named but never created with `link add` are ports.

import (
	"errors"
	"fmt"
	"net"
	"strconv"
)

// LinkCmd is a parsed link line.
type LinkCmd struct {
	Op   string // add, set, delete, show
	Name string
	// add
	Kind    string            // bridge, vlan
	Parent  string            // vlan: the bridge it sits on
	VID     uint16            // vlan
	Options map[string]string // bridge options, e.g. vlan_filtering 1
	// set
	Up, Down bool
	Master   string
	NoMaster bool
	MTU      int
	Address  net.HardwareAddr
}

func parseLink(args []string) (*LinkCmd, error) {
	op, err := command("link", args, "add", "set", "delete", "del", "show", "list")
	if err != nil {
		return nil, err
	}
	c := &LinkCmd{Op: op, Options: map[string]string{}}
	args = args[1:]
	for w := NewWords(args); w.More(); {
		a := w.Next()
		var v string
		switch {
		case a == "dev" || a == "name":
			if v, err = w.Value(a); err != nil {
				return nil, err
			}
			c.Name = v
		case a == "link" && op == "add":
			if v, err = w.Value(a); err != nil {
				return nil, err
			}
			c.Parent = v
		case a == "type" && op == "add":
			if v, err = w.Value(a); err != nil {
				return nil, err
			}
			if v != "bridge" && v != "vlan" {
				return nil, fmt.Errorf("unsupported link type %q (want bridge or vlan)", v)
			}
			c.Kind = v
		case a == "id" && c.Kind == "vlan":
			if v, err = w.Value(a); err != nil {
				return nil, err
			}
			id, err := strconv.ParseUint(v, 10, 16)
			if err != nil || id == 0 || id > 4094 {
				return nil, fmt.Errorf("invalid VLAN id %q (1-4094)", v)
			}
			c.VID = uint16(id)
		case a == "address" && (op == "set" || op == "add"):
			if v, err = w.Value(a); err != nil {
				return nil, err
			}
			mac, err := net.ParseMAC(v)
			if err != nil || len(mac) != 6 {
				return nil, fmt.Errorf("invalid MAC address %q", v)
			}
			c.Address = mac
		case c.Kind == "bridge":
			if v, err = w.Value(a); err != nil {
				return nil, err
			}
			c.Options[a] = v
		case op == "set" && a == "up":
			c.Up = true
		case op == "set" && a == "down":
			c.Down = true
		case op == "set" && a == "master":
			if v, err = w.Value(a); err != nil {
				return nil, err
			}
			c.Master = v
		case op == "set" && a == "nomaster":
			c.NoMaster = true
		case op == "set" && a == "mtu":
			if v, err = w.Value(a); err != nil {
				return nil, err
			}
			m, err := strconv.Atoi(v)
			if err != nil || m < 68 || m > 65535 {
				return nil, fmt.Errorf("invalid mtu %q (68-65535)", v)
			}
			c.MTU = m
		case c.Name == "" && op != "add":
			c.Name = a
		case c.Name == "" && op == "add" && c.Kind == "":
			c.Name = a
		default:
			return nil, fmt.Errorf("unexpected %q", a)
		}
	}
	if c.Name == "" && op != "show" {
		return nil, errors.New("missing interface name")
	}
	if c.Up && c.Down {
		return nil, errors.New("both up and down")
	}
	if op == "add" {
		if c.Kind == "bridge" {
			if _, err := BridgeAttrs(c.Options, c.Address); err != nil {
				return nil, err
			}
		}
		switch c.Kind {
		case "":
			return nil, errors.New("missing \"type bridge|vlan\"")
		case "vlan":
			if c.Parent == "" || c.VID == 0 {
				return nil, errors.New("a vlan needs \"link PARENT\" and \"id VID\"")
			}
		}
	}
	return c, nil
}
