package show

// `ip neigh show [dev D] [nud STATE]`: the router's neighbour table, as
// `ip neigh show` and `ip -j neigh show` print it:
//
//   10.0.0.2 dev eth0 lladdr 02:00:00:00:00:02 REACHABLE
//   10.0.0.3 dev eth0 INCOMPLETE
//   [{"dst":"10.0.0.2","dev":"eth0","lladdr":"02:00:00:00:00:02","state":["REACHABLE"]}]
//
// As in the kernel, lladdr is shown for valid states only; as in iproute2,
// `show` hides NOARP and NONE entries unless asked (nud all, nud noarp), and
// omits "dev D" when filtering by device.

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/l3"
	"github.com/netfwd/netfwd/neigh"
)

// neighbours answers `ip neigh show`.
func neighbours(w io.Writer, e *l3.Engine, q config.NeighShow, asJSON bool) error {
	f := neighFilter{states: q.NUD}
	if q.Dev != "" {
		ifc := e.Router().Iface(q.Dev)
		if ifc == nil {
			return fmt.Errorf("Cannot find device %q", q.Dev)
		}
		f.ifIndex = ifc.Index
	}
	infos := e.Router().Neighbours().Dump(e.Domain().Clock().Now())
	if asJSON {
		return neighJSON(w, infos, f, devNames(e))
	}
	return neighText(w, infos, f, devNames(e))
}

// neighFilter selects entries like `ip neigh show [dev D] [nud S...]`.
type neighFilter struct {
	ifIndex uint32 // 0: all interfaces
	// states is a mask of neigh.State bits, plus config.NUDNone for NONE
	// entries; 0 means iproute2's default (everything but NOARP and NONE).
	states uint16
}

func (f neighFilter) match(i neigh.Info) bool {
	if f.ifIndex != 0 && i.IfIndex != f.ifIndex {
		return false
	}
	states := f.states
	if states == 0 {
		states = 0xff &^ uint16(neigh.NUDNoARP)
	}
	if i.State == neigh.NUDNone {
		return states&config.NUDNone != 0
	}
	return states&uint16(i.State) != 0
}

// neighText writes `ip neigh show` lines; devName maps interface indexes
// to names.
func neighText(w io.Writer, infos []neigh.Info, f neighFilter, devName func(uint32) string) error {
	var b strings.Builder
	for _, i := range infos {
		if !f.match(i) {
			continue
		}
		b.WriteString(i.IP.String())
		if f.ifIndex == 0 {
			fmt.Fprintf(&b, " dev %s", devName(i.IfIndex))
		}
		if i.HasLLAddr {
			fmt.Fprintf(&b, " lladdr %s", i.LLAddr)
		}
		if i.State != neigh.NUDNone {
			b.WriteString(" " + i.State.String())
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

type neighEntryJSON struct {
	Dst    string   `json:"dst"`
	Dev    string   `json:"dev,omitempty"`
	LLAddr string   `json:"lladdr,omitempty"`
	State  []string `json:"state,omitempty"`
}

// neighJSON writes `ip -j neigh show`: one JSON array.
func neighJSON(w io.Writer, infos []neigh.Info, f neighFilter, devName func(uint32) string) error {
	list := []neighEntryJSON{}
	for _, i := range infos {
		if !f.match(i) {
			continue
		}
		j := neighEntryJSON{Dst: i.IP.String()}
		if f.ifIndex == 0 {
			j.Dev = devName(i.IfIndex)
		}
		if i.HasLLAddr {
			j.LLAddr = i.LLAddr.String()
		}
		if i.State != neigh.NUDNone {
			j.State = []string{i.State.String()}
		}
		list = append(list, j)
	}
	b, err := json.Marshal(list)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
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
