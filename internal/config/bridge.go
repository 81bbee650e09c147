package config

// `bridge vlan|fdb|link|mdb ...` lines. The bridge (package l2) interprets
// them; this reader only keeps them with their position.

import "errors"

// BridgeCmd is a bridge line, kept as words.
type BridgeCmd struct {
	Args []string
}

func parseBridge(args []string) (*BridgeCmd, error) {
	if len(args) < 2 {
		return nil, errors.New("bridge: want \"bridge OBJECT COMMAND ...\"")
	}
	switch args[0] {
	case "vlan", "fdb", "link", "mdb":
	default:
		return nil, errors.New("bridge: unknown object " + args[0] + " (want vlan, fdb, link or mdb)")
	}
	return &BridgeCmd{Args: args}, nil
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
