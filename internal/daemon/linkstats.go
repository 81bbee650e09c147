package daemon

// linkstats: what `netfwd ctl -s link` adds from the ports' packet I/O to
// the engine's counters: the frames each port's receive rings lost, its RX
// missed (show.RingDropper), the very counter /metrics exports as
// netfwd_pktio_ring_drops_total.
//
// Locking: none; reads the published port table and the sockets' counters.

// portRingDrops are the frames the receive rings of port dev lost because they
// were full (0: not an opened port).
func (d *Daemon) portRingDrops(dev string) uint64 {
	if p := d.ports.Load().byName(dev); p != nil {
		return p.stats().Rx.RingDrops
	}
	return 0
}
