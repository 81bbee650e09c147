package l2

// Pending: what a Tx has counted since its last flush, for the daemon's
// packet trace (internal/daemon trace.go), which receives one traced frame
// as a batch of its own and reads the counts before flushing: they are
// what that frame did in the bridge. Never on the forwarding path.
//
// Locking: the Tx's worker only (the counts are its plain deltas).

// PendingCounts are a Tx's unpublished counts.
type PendingCounts struct {
	Drops         map[string]uint64 // by reason name, non-zero only
	FloodInline   uint64
	FloodDeferred uint64
	HostDelivered uint64 // handed to the router (l3)
	ProxyReplies  uint64 // ARP replies by neighbour suppression
	LearnSkipped  uint64
}

// Pending returns the counts of the frames received since the last flush.
func (t *Tx) Pending() PendingCounts {
	c := PendingCounts{FloodInline: t.delta.floodInline, FloodDeferred: t.delta.floodDeferred,
		HostDelivered: t.delta.hostDelivered, ProxyReplies: t.delta.proxyRep, LearnSkipped: t.delta.learnSkipped}
	for r, n := range t.delta.drops {
		if n != 0 {
			if c.Drops == nil {
				c.Drops = map[string]uint64{}
			}
			c.Drops[DropReason(r).String()] += n
		}
	}
	return c
}
