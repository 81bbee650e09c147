package l3

// Pending: what a Worker has counted since its last flush, and the flow
// key multipath hashing takes from a packet, for the daemon's packet trace
// (internal/daemon trace.go): a traced frame is received as a batch of its
// own, so the counts before the flush are what that frame did in the
// router. Never on the forwarding path.
//
// Locking: the Worker's goroutine only.

import (
	"github.com/netfwd/netfwd/nexthop"
	"github.com/netfwd/netfwd/wire"
)

// PendingCounts are a Worker's unpublished counts.
type PendingCounts struct {
	In, Forwarded, Local, Punted, Queued, Released, Fragmented, ARPIn uint64
	Drops                                                             map[string]uint64 // by reason name, non-zero only
	ICMPSent                                                          map[string]uint64 // by message, non-zero only
	ICMPRateLimited                                                   uint64
}

// Pending returns the counts of the frames received since the last flush.
func (w *Worker) Pending() PendingCounts {
	c := &w.c
	p := PendingCounts{In: c.in, Forwarded: c.forwarded, Local: c.local, Punted: c.punted, Queued: c.queued,
		Released: c.released, Fragmented: c.fragmented, ARPIn: c.arpIn, ICMPRateLimited: c.icmpLimited}
	for r, n := range c.drops {
		if n != 0 {
			if p.Drops == nil {
				p.Drops = map[string]uint64{}
			}
			p.Drops[DropReason(r).String()] += n
		}
	}
	for i, n := range c.icmpSent {
		if n != 0 {
			if p.ICMPSent == nil {
				p.ICMPSent = map[string]uint64{}
			}
			p.ICMPSent[icmpKinds[i]] += n
		}
	}
	return p
}

// FlowKey is the multipath flow key of an IPv4 packet (the header first),
// as the forwarding path hashes it; ok is false for a packet that is not a
// valid IPv4 header.
func FlowKey(pkt []byte) (k nexthop.FlowKey, ok bool) {
	h, err := wire.ParseIPv4(pkt)
	if err != 0 {
		return k, false
	}
	return flowKey(h), true
}
