package l3

// TEMPORARY neighbour glue: a locked map standing in for the neighbour
// table (l3/neigh*.go) until it lands. Replaced before merge.

import (
	"encoding/binary"
	"net/netip"
	"sync"

	"github.com/netfwd/netfwd/l2"
)

type tmpNeigh struct {
	mu sync.RWMutex
	m  map[[2]uint32]l2.MAC
}

var tmpNeighs = map[*Router]*tmpNeigh{}
var tmpMu sync.Mutex

func (r *Router) tmp() *tmpNeigh {
	tmpMu.Lock()
	defer tmpMu.Unlock()
	n := tmpNeighs[r]
	if n == nil {
		n = &tmpNeigh{m: map[[2]uint32]l2.MAC{}}
		tmpNeighs[r] = n
	}
	return n
}

// SetNeighbor (temporary) installs a resolved neighbour.
func (r *Router) SetNeighbor(dev string, ip netip.Addr, mac l2.MAC) {
	n := r.tmp()
	n.mu.Lock()
	n.m[[2]uint32{r.IfIndex(dev), ipv4Addr(ip)}] = mac
	n.mu.Unlock()
}

func (w *Worker) neighHeader(out *Iface, next uint32) ([etherHeaderLen]byte, bool) {
	n := w.r.tmp()
	n.mu.RLock()
	mac, ok := n.m[[2]uint32{out.Index, next}]
	n.mu.RUnlock()
	var h [etherHeaderLen]byte
	copy(h[0:6], mac[:])
	copy(h[6:12], out.MAC[:])
	binary.BigEndian.PutUint16(h[12:], etherTypeIPv4)
	return h, ok
}

func (w *Worker) neighMiss(out *Iface, next uint32, pkt []byte) {
	w.drop(DropNeighQueue)
}

func (w *Worker) arpInput(t *ifaceTable, in *Iface, f []byte, l3 int) {
	w.c.arpIn++
	w.drop(DropARP)
}
