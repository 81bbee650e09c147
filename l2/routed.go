package l2

// Counting for routed ports: their frames never enter a bridge, but their
// rx counters live with every other port's, in the worker's Tx.

// CountRx counts a frame of n bytes received on a port outside any bridge
// (the router counts its own ports' input here).
func (tx *Tx) CountRx(p *Port, n int) { tx.countRx(p, n) }

// CountRxDrop counts a frame received on p and dropped by the router.
func (tx *Tx) CountRxDrop(p *Port) { tx.touch(p.ID).rxDrops++ }

// CountRxBatch counts n frames totalling bytes received on a port outside
// any bridge, in one update.
func (tx *Tx) CountRxBatch(p *Port, n, bytes int) {
	pd := tx.touch(p.ID)
	pd.rxPackets += uint64(n)
	pd.rxBytes += uint64(bytes)
}
