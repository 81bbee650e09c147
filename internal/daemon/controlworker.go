package daemon

// The control worker: with a host path, every AF_PACKET port has a second,
// small receive ring that takes only control-plane frames (ARP, BGP, OSPF,
// BFD, VRRP, ...: afpacket.ControlFilter) while the data rings take the rest
// (afpacket.DataFilter). One more ioWorker, marked control, reads those rings
// and runs their frames through the same engine, with sendmmsg transmit
// handles of its own. A flood that fills the data rings then never drops a
// BGP keepalive or an ARP reply at the ring, and the control frames do not
// wait behind data batches.
//
// AF_XDP ports have no control ring: their XDP program steers by RX queue
// only (a known limit, docs/hostpath.md).
//
// Locking: as any ioWorker (worker.go).

// controlRingBlocks is the control ring's size in blocks (128 KiB each by
// default; 64 frame slots each on the V2 ring, 256 in all): control
// traffic is small and read at once.
const controlRingBlocks = 4

// newControlWorker is the worker of the control rings.
func newControlWorker(d *Daemon) (*ioWorker, error) {
	iw, err := newIOWorker(d, d.opts.Workers)
	if err != nil {
		return nil, err
	}
	iw.control = true
	iw.txs.mode = txLight
	return iw, nil
}

// bindControl binds a port's control ring (if it has one and it is not
// bound yet).
func (iw *ioWorker) bindControl(p *port) {
	if p.ctl == nil || iw.hasQueue(p, 0) {
		return
	}
	q := p.ctl.Queue(0)
	b := rxBinding{p: p, qi: 0, q: q, w: q}
	if err := iw.watch(&b); err != nil {
		iw.d.log.Error("control ring", "dev", p.name, "err", err)
		return
	}
	iw.rx = append(iw.rx, b)
}
