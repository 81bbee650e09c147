package pktio

// stats: the counters a Port exposes, summed over its queues and Tx handles
// at read time (the datapath adds to per-queue/per-handle atomics once per
// batch, so no cache line is shared between workers).
//
// Locking: Port.Stats takes Port.mu to read the kernel's clear-on-read ring
// statistics and the handle list; the counters themselves are atomics.

// RxStats are receive counters.
type RxStats struct {
	Packets, Bytes uint64
	// RingDrops are frames the kernel could not put in the ring because the
	// owner was behind (tp_drops of PACKET_STATISTICS).
	RingDrops uint64
	// RingFreezes counts how often the ring filled up (tp_freeze_q_cnt).
	RingFreezes uint64
	// Truncated frames did not fit a block (BlockSize too small); dropped.
	Truncated uint64
	// Outgoing frames were our own or the host's transmissions; dropped.
	Outgoing uint64
	// VLANRestored, ChecksumCompleted and GSO count fix-ups and super-frames.
	VLANRestored, ChecksumCompleted, GSO uint64
	// ChecksumUnfixed are partial-checksum frames Recv could not complete
	// (not IPv4 TCP/UDP without a vnet header); delivered as they are.
	ChecksumUnfixed uint64
	// Errors are frames dropped because the ring's metadata was inconsistent.
	Errors uint64
}

// TxStats are transmit counters.
type TxStats struct {
	Packets, Bytes uint64
	// Refused are frames the kernel rejected one by one (too big, malformed,
	// no buffer); BadOffload frames whose Offload did not fit the bytes;
	// Errors frames dropped because the device went away or the port shut
	// down mid-batch.
	Refused, BadOffload, Errors uint64
}

func (s *TxStats) add(o TxStats) {
	s.Packets += o.Packets
	s.Bytes += o.Bytes
	s.Refused += o.Refused
	s.BadOffload += o.BadOffload
	s.Errors += o.Errors
}

// Stats are a Port's counters.
type Stats struct {
	Rx RxStats
	Tx TxStats
}

// Stats returns the counters of queue q.
func (q *Queue) Stats() RxStats {
	c := &q.stats
	return RxStats{
		Packets: c.packets.Load(), Bytes: c.bytes.Load(),
		RingDrops: c.ringDrops.Load(), RingFreezes: c.freezes.Load(),
		Truncated: c.truncated.Load(), Outgoing: c.outgoing.Load(),
		VLANRestored: c.vlanRestored.Load(), ChecksumCompleted: c.csumCompleted.Load(),
		GSO: c.gso.Load(), ChecksumUnfixed: c.csumUnfixed.Load(), Errors: c.errors.Load(),
	}
}

// Stats returns the counters of the handle.
func (t *Tx) Stats() TxStats {
	c := &t.stats
	return TxStats{Packets: c.packets.Load(), Bytes: c.bytes.Load(), Refused: c.refused.Load(),
		BadOffload: c.badOffload.Load(), Errors: c.errors.Load()}
}

// Stats sums the counters of all queues and Tx handles, after collecting
// the kernel's ring drop counters.
func (p *Port) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	var s Stats
	for _, q := range p.queues {
		if !p.shutdown {
			if st, err := q.sock.ringStats(); err == nil {
				q.stats.ringDrops.Add(uint64(st.Drops))
				q.stats.freezes.Add(uint64(st.Freeze_q_cnt))
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
		s.Tx.add(t.Stats())
	}
	return s
}
