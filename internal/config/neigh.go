package config

// `neigh add|replace|change|del A [lladdr M] dev D [nud permanent|reachable|
// stale|noarp]` (iproute2's default state is permanent), and the `neigh
// show` query, with ipneigh.c's keyword tables. Whether the entry exists,
// and the device, are checked by the applier against the table and the
// interfaces the batch leaves (internal/apply).

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/netfwd/netfwd/neigh"
)

// Filter bits of `neigh show nud STATE` beyond the states themselves
// (neigh.State bits): NONE, whose state value is 0 (iproute2 names it with
// this bit), and `nud all`.
const (
	NUDNone uint16 = 0x100
	NUDAll  uint16 = 0x1ff
)

// NeighCmd is a parsed neighbour line.
type NeighCmd struct {
	Op        string // add, replace, change, delete
	IP        netip.Addr
	Dev       string
	LLAddr    [6]byte
	HasLLAddr bool
	State     neigh.State // one state; permanent unless `nud` says otherwise
}

// neighCommands is do_ipneigh's chain.
var neighCommands = table("neigh command",
	kw("add"), kw("change"), exact("chg", "change"), kw("replace"), kw("delete"), unsupported(kw("get")),
	kw("show"), kw("lst", "show"), kw("list", "show"), kw("flush"), kw("help"),
)

// neighArgs is ipneigh_modify's chain (the default branch is `[to] ADDR`).
var neighArgs = table("neigh argument",
	kw("lladdr"), exact("nud"),
	unsupported(kw("proxy"), exact("router"), exact("use"), exact("managed"), kw("extern_learn"),
		exact("extern_valid")),
	exact("dev"), unsupported(kw("protocol")),
)

// nudStates is nud_state_a2n's chain.
var nudStates = table("nud state",
	kw("permanent"), kw("reachable"), exact("noarp"), exact("none"), exact("stale"), exact("incomplete"),
	exact("delay"), exact("probe"), kw("failed"),
)

// nudBits are the filter bits of `nud` words.
var nudBits = map[string]uint16{
	"permanent": uint16(neigh.NUDPermanent), "reachable": uint16(neigh.NUDReachable), "noarp": uint16(neigh.NUDNoARP),
	"none": NUDNone, "stale": uint16(neigh.NUDStale), "incomplete": uint16(neigh.NUDIncomplete),
	"delay": uint16(neigh.NUDDelay), "probe": uint16(neigh.NUDProbe), "failed": uint16(neigh.NUDFailed),
}

// nudWord is a state as `nud` names it.
func nudWord(s neigh.State) string {
	for n, b := range nudBits {
		if b == uint16(s) {
			return n
		}
	}
	return fmt.Sprintf("nud(%#x)", uint8(s))
}

// parseNUDFilter reads the value of `neigh show nud STATE` ("all" too).
func parseNUDFilter(v string) (uint16, error) {
	if v == "all" {
		return NUDAll, nil
	}
	means, err := nudStates.must(v)
	if err != nil {
		return 0, err
	}
	return nudBits[means], nil
}

func parseNeigh(cmd *Command, w *words) error {
	op, err := verb(w, neighCommands, "show")
	if err != nil {
		return err
	}
	switch op {
	case "show":
		cmd.Query, err = parseNeighShow(w)
		return err
	case "flush":
		q, err := parseNeighShow(w)
		if err != nil {
			return err
		}
		s := q.(NeighShow)
		cmd.Query = NeighFlush{Dev: s.Dev, NUD: s.NUD}
		return nil
	}
	c := &NeighCmd{Op: op, State: neigh.NUDPermanent}
	for w.More() {
		a := w.Next()
		means, ok, err := neighArgs.lookup(a)
		if err != nil {
			return err
		}
		if !ok { // [to] ADDR
			if a == "to" {
				if a, err = w.Value(a); err != nil {
					return err
				}
			}
			if !prefixLike(a) && (c.IP.IsValid() || suggest(a, w.cfg, neighArgs) != "") {
				return errUnknownKeyword(a, w.cfg, neighArgs)
			}
			if c.IP.IsValid() {
				return fmt.Errorf("the address is given twice (%s, then %s)", c.IP, Quote(a))
			}
			if c.IP, err = addr4(a); err != nil {
				return err
			}
			continue
		}
		v, err := w.Value(a)
		if err != nil {
			return err
		}
		switch means {
		case "lladdr":
			mac, err := net.ParseMAC(v)
			if err != nil || len(mac) != 6 {
				return fmt.Errorf("invalid link layer address %s", Quote(v))
			}
			c.LLAddr, c.HasLLAddr = [6]byte(mac), true
		case "dev":
			if err := setDev(&c.Dev, v); err != nil {
				return err
			}
		case "nud":
			st, err := nudStates.must(v)
			if err != nil {
				return err
			}
			switch st {
			case "permanent", "reachable", "stale", "noarp":
			default:
				return fmt.Errorf("nud state %s not supported (want permanent, reachable, stale or noarp)", Quote(v))
			}
			c.State = neigh.State(nudBits[st])
		}
	}
	if err := c.Check(); err != nil {
		return err
	}
	cmd.Neigh = c
	return nil
}

// Check applies the parser's rules to a command built in code (the kernel
// mirror's neighbours): an IPv4 unicast address, a valid device name, a
// supported state, no lladdr on delete. A parsed command has passed it.
func (c *NeighCmd) Check() error {
	switch {
	case !c.IP.IsValid():
		return errors.New("missing neighbour address")
	case c.Dev == "":
		return errors.New("device not specified")
	case c.Op == "delete" && c.HasLLAddr:
		return errors.New("neigh del takes no lladdr")
	}
	if !c.IP.Is4() {
		return fmt.Errorf("invalid IPv4 address %s", c.IP)
	}
	if err := checkDevName(c.Dev); err != nil {
		return err
	}
	switch c.Op {
	case "add", "replace", "change", "delete":
	default:
		return fmt.Errorf("unknown neigh operation %s", Quote(c.Op))
	}
	switch c.State {
	case neigh.NUDPermanent, neigh.NUDReachable, neigh.NUDStale, neigh.NUDNoARP:
	default:
		return fmt.Errorf("nud state %s not supported (want permanent, reachable, stale or noarp)", c.State)
	}
	if b := c.IP.As4(); b[0] == 0 || b[0]>>4 == 0xe || c.IP == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return fmt.Errorf("invalid neighbour address %s", c.IP)
	}
	return nil
}

// String renders the command as a config line.
func (c *NeighCmd) String() string {
	s := "neigh " + c.Op + " " + c.IP.String()
	if c.HasLLAddr {
		s += " lladdr " + net.HardwareAddr(c.LLAddr[:]).String()
	}
	s += " dev " + c.Dev
	if c.Op != "delete" {
		s += " nud " + nudWord(c.State)
	}
	return s
}
