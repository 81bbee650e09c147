package neigh

// Dumps: the entries as `ip neigh show` and `ip -j neigh show` print them.
//
//   10.0.0.2 dev eth0 lladdr 02:00:00:00:00:02 REACHABLE
//   10.0.0.3 dev eth0 INCOMPLETE
//   10.0.0.4 dev eth0 FAILED
//   [{"dst":"10.0.0.2","dev":"eth0","lladdr":"02:00:00:00:00:02","state":["REACHABLE"]}]
//
// As in the kernel, lladdr is shown for valid states only; as in iproute2,
// `show` hides NOARP and NONE entries unless asked (nud all, nud noarp), and
// omits "dev D" when filtering by device. Entries are sorted by interface
// and address (the kernel dumps in hash order).
//
// Locking: Dump takes Table.mu; the formatters work on the copy.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/netfwd/netfwd/wire"
)

// Info is one entry as dumped.
type Info struct {
	IfIndex   uint32
	IP        wire.Addr4
	LLAddr    wire.MAC
	HasLLAddr bool // valid states: the address is meaningful
	State     State
	Probes    int
	Queued    int // packets waiting
	// Ages, as `ip -s neigh` shows them (used/confirmed/updated).
	Used, Confirmed, Updated time.Duration
}

// Addr is the entry's address as a netip.Addr.
func (i Info) Addr() netip.Addr { return i.IP.Netip() }

func (t *Table) infoLocked(n *entry, now int64) Info {
	s := n.state()
	return Info{
		IfIndex: n.IfIndex(), IP: n.IP(), LLAddr: n.mac(), HasLLAddr: s.Valid(), State: s,
		Probes: n.probes, Queued: n.queue.n,
		Used:      time.Duration(now - n.used),
		Confirmed: time.Duration(now - n.confirmed),
		Updated:   time.Duration(now - n.updated),
	}
}

// Get returns one entry's dump.
func (t *Table) Get(ifindex uint32, ip wire.Addr4, now int64) (Info, bool) {
	t.lockAt(now)
	defer t.mu.Unlock()
	n := t.index.Get(entryKey(ifindex, ip))
	if n == nil {
		return Info{}, false
	}
	return t.infoLocked(n, now), true
}

// Dump returns all entries sorted by (ifindex, ip).
func (t *Table) Dump(now int64) []Info {
	t.lockAt(now)
	defer t.mu.Unlock()
	out := make([]Info, 0, t.entries)
	for n := range t.index.All() {
		out = append(out, t.infoLocked(n, now))
	}
	slices.SortFunc(out, func(a, b Info) int {
		return cmp.Or(cmp.Compare(a.IfIndex, b.IfIndex), cmp.Compare(a.IP, b.IP))
	})
	return out
}

// ShowFilter selects entries like `ip neigh show [dev D] [nud S...]`.
type ShowFilter struct {
	IfIndex uint32 // 0: all interfaces
	// States is a mask of State bits, plus ShowNone for NONE
	// entries; 0 means iproute2's default (everything but NOARP and NONE).
	States uint16
}

const (
	// ShowNone selects NONE entries (`nud none`).
	ShowNone = 0x100
	// ShowAll is `nud all`.
	ShowAll = 0x1ff
)

func (f ShowFilter) match(i Info) bool {
	if f.IfIndex != 0 && i.IfIndex != f.IfIndex {
		return false
	}
	states := f.States
	if states == 0 {
		states = 0xff &^ uint16(NUDNoARP)
	}
	if i.State == NUDNone {
		return states&ShowNone != 0
	}
	return states&uint16(i.State) != 0
}

// FormatShow writes `ip neigh show` lines; devName maps interface
// indexes to names.
func FormatShow(w io.Writer, infos []Info, f ShowFilter, devName func(uint32) string) error {
	var b strings.Builder
	for _, i := range infos {
		if !f.match(i) {
			continue
		}
		b.WriteString(i.IP.String())
		if f.IfIndex == 0 {
			fmt.Fprintf(&b, " dev %s", devName(i.IfIndex))
		}
		if i.HasLLAddr {
			fmt.Fprintf(&b, " lladdr %s", i.LLAddr)
		}
		if i.State != NUDNone {
			b.WriteString(" " + i.State.String())
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

type jsonEntry struct {
	Dst    string   `json:"dst"`
	Dev    string   `json:"dev,omitempty"`
	LLAddr string   `json:"lladdr,omitempty"`
	State  []string `json:"state,omitempty"`
}

// FormatJSON writes `ip -j neigh show`: one JSON array.
func FormatJSON(w io.Writer, infos []Info, f ShowFilter, devName func(uint32) string) error {
	list := []jsonEntry{}
	for _, i := range infos {
		if !f.match(i) {
			continue
		}
		j := jsonEntry{Dst: i.IP.String()}
		if f.IfIndex == 0 {
			j.Dev = devName(i.IfIndex)
		}
		if i.HasLLAddr {
			j.LLAddr = i.LLAddr.String()
		}
		if i.State != NUDNone {
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
