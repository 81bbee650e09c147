package neigh

// Dumps: the entries as data, sorted by interface and address (the kernel
// dumps in hash order); internal/show prints them as `ip neigh show` does.
//
// Locking: Dump and Get take Table.mu and return copies.

import (
	"cmp"
	"net/netip"
	"slices"
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
