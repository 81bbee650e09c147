package afpacket

import "github.com/netfwd/netfwd/internal/pktio"

// stats: the counters a Port exposes (pktio.Stats), summed over its queues
// and Tx handles at read time (the datapath adds to per-queue/per-handle
// atomics once per batch, so no cache line is shared between workers).
//
// Locking: Port.Stats takes Port.mu to read the kernel's clear-on-read ring
// statistics and the handle list; the counters themselves are atomics.

// Stats returns the counters of queue q.
func (q *Queue) Stats() pktio.RxStats {
	c := &q.stats
	return pktio.RxStats{
		Packets: c.packets.Load(), Bytes: c.bytes.Load(),
		RingDrops: c.ringDrops.Load(), RingFreezes: c.freezes.Load(),
		Truncated: c.truncated.Load(), Outgoing: c.outgoing.Load(),
		VLANRestored: c.vlanRestored.Load(), ChecksumCompleted: c.csumCompleted.Load(),
		GSO: c.gso.Load(), ChecksumUnfixed: c.csumUnfixed.Load(), Errors: c.errors.Load(),
	}
}

// Stats returns the counters of the handle.
func (t *Tx) Stats() pktio.TxStats {
	c := &t.stats
	return pktio.TxStats{Packets: c.packets.Load(), Bytes: c.bytes.Load(), Refused: c.refused.Load(),
		BadOffload: c.badOffload.Load(), Errors: c.errors.Load()}
}

// Stats sums the counters of all queues and Tx handles, after collecting
// the kernel's ring drop counters.
func (p *Port) Stats() pktio.Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	var s pktio.Stats
	for _, q := range p.queues {
		if !p.shutdown {
			if st, err := q.sock.ringStats(); err == nil {
				q.stats.ringDrops.Add(uint64(st.Drops))
				q.stats.freezes.Add(uint64(st.Freeze_q_cnt))
			}
		}
		if p.fanoutID >= 0 && !p.cfg.NoRollover && !p.shutdown {
			if all, _, failed, err := q.sock.rolloverStats(); err == nil {
				// Totals since the socket joined (not clear-on-read).
				s.Rx.Rollover += all
				s.Rx.RolloverFailed += failed
			}
		}
		r := q.Stats()
		s.Rx.Packets += r.Packets
		s.Rx.Bytes += r.Bytes
		s.Rx.RingDrops += r.RingDrops
		s.Rx.RingFreezes += r.RingFreezes
		s.Rx.Truncated += r.Truncated
		s.Rx.Outgoing += r.Outgoing
		s.Rx.VLANRestored += r.VLANRestored
		s.Rx.ChecksumCompleted += r.ChecksumCompleted
		s.Rx.GSO += r.GSO
		s.Rx.ChecksumUnfixed += r.ChecksumUnfixed
		s.Rx.Errors += r.Errors
	}
	s.Tx = p.retiredTx
	for _, t := range p.txs {
		s.Tx.Add(t.Stats())
	}
	return s
}
