package show

// `vrf show [NAME]` as iproute2 6.1's ipvrf_show prints it: a header, a
// rule, a row `%-16s %5u` per VRF (JSON: [{"name","table"}]), or "No VRF
// has been configured"; with a name only `NAME TABLE`, or "Invalid VRF".
// Linux lists VRFs in ifindex order; netfwd's VRFs have none of their own,
// so they are listed by name (a deliberate difference, docs/fib.md).
//
// Locking: none; reads the FIB's published state.

import (
	"fmt"
	"io"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/config"
)

// errInvalidVRF is iproute2's invarg("Invalid VRF\n", name), for `route
// show vrf` and `route get ... vrf` naming no VRF.
func errInvalidVRF(name string) error {
	return fmt.Errorf("argument %q is wrong: Invalid VRF", name)
}

// vrfJSON is one VRF in ipvrf_print's JSON.
type vrfJSON struct {
	Name  string `json:"name"`
	Table uint32 `json:"table"`
}

func vrfs(w io.Writer, f *fib.FIB, q config.VRFShow, asJSON bool) error {
	if q.VRF != "" {
		t, ok := f.VRFTable(q.VRF)
		if !ok {
			return fmt.Errorf("Invalid VRF")
		}
		_, err := fmt.Fprintf(w, "%s %d\n", q.VRF, t) // text even with -j, as ipvrf_show
		return err
	}
	list := f.VRFs()
	if asJSON {
		a := jsonArray{w: w}
		for _, v := range list {
			a.add(vrfJSON{v.Name, v.Table})
		}
		return a.close()
	}
	b := fmt.Appendf(nil, "%-16s  %5s\n%s\n", "Name", "Table", "-----------------------")
	for _, v := range list {
		b = fmt.Appendf(b, "%-16s %5d\n", v.Name, v.Table)
	}
	if len(list) == 0 {
		b = append(b, "No VRF has been configured\n"...)
	}
	_, err := w.Write(b)
	return err
}
