package pktio

// stats: the counters a port of either backend exposes (afpacket.Port.Stats,
// afxdp.Port.Stats), summed over its queues and transmit handles at read
// time.
//
// Locking: none; values.

// RxStats are receive counters.
type RxStats struct {
	Packets, Bytes uint64
	// RingDrops are frames the kernel could not put in the ring because the
	// owner was behind (tp_drops of PACKET_STATISTICS).
	RingDrops uint64
	// RingFreezes counts how often the ring filled up (tp_freeze_q_cnt).
	RingFreezes uint64
	// Rollover are frames whose own queue was full and that the kernel put
	// in a sibling queue of the port with room (AF_PACKET fanout rollover):
	// not lost, possibly reordered within their flow. RolloverFailed are
	// rollovers that found no sibling with room (the frame went to its
	// own full queue: a ring drop).
	Rollover, RolloverFailed uint64
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

// Add adds o to s.
func (s *TxStats) Add(o TxStats) {
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
