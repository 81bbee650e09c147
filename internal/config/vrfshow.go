package config

// `vrf [show|list [NAME]]`: iproute2 6.1's ipvrf.c as a query. Without a
// name it lists every VRF with its table; with one it prints `NAME TABLE`
// (scripts read the table id this way) or fails with "Invalid VRF".
// identify, pids and exec are about processes bound to a kernel VRF, which
// netfwd's VRFs are not: refused by name.
//
// Locking: none (values and read-only tables).

import "fmt"

// VRFShow is `ip vrf show [NAME]`.
type VRFShow struct {
	VRF string // "": every VRF
}

// Name implements Query.
func (VRFShow) Name() string { return "vrf show" }

// vrfCommands is do_ipvrf's chain.
var vrfCommands = table("vrf command",
	unsupported(kw("identify"), kw("pids"), kw("exec")), kw("show"), kw("lst", "show"), kw("list", "show"),
	kw("help"),
)

func parseVRF(cmd *Command, w *words) error {
	op, err := verb(w, vrfCommands, "show")
	if err != nil {
		return err
	}
	if op == "help" {
		return errHelp
	}
	var q VRFShow
	if w.More() {
		if err := setDev(&q.VRF, w.Next()); err != nil {
			return err
		}
	}
	if w.More() { // ipvrf_show: argc > 1 is usage()
		return fmt.Errorf("vrf show: unexpected %s", Quote(w.Next()))
	}
	cmd.Query = q
	return nil
}
