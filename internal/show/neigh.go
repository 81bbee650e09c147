package show

// `ip neigh show [dev D] [nud STATE]`: the router's neighbour table, printed
// by the table's own formatter (l3), filtered as iproute2 filters.

import (
	"fmt"
	"io"

	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/l3"
)

// neighbours answers `ip neigh show`.
func neighbours(w io.Writer, e *l3.Engine, q config.NeighShow, asJSON bool) error {
	f := l3.NeighShowFilter{States: q.NUD}
	if q.Dev != "" {
		ifc := e.Router().Iface(q.Dev)
		if ifc == nil {
			return fmt.Errorf("cannot find device %q", q.Dev)
		}
		f.IfIndex = ifc.Index
	}
	infos := e.Router().Neighbours().Dump(e.Domain().Clock().Now())
	if asJSON {
		return l3.FormatNeighJSON(w, infos, f, devNames(e))
	}
	return l3.FormatNeighShow(w, infos, f, devNames(e))
}

// devNames maps router interface indexes to names ("ifN" for a gone one).
func devNames(e *l3.Engine) func(uint32) string {
	names := map[uint32]string{}
	for _, i := range e.Router().Ifaces() {
		names[i.Index] = i.Name
	}
	return func(i uint32) string {
		if n, ok := names[i]; ok {
			return n
		}
		return fmt.Sprintf("if%d", i)
	}
}
