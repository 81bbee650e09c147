package daemon

// Housekeeping: one goroutine runs the timers of the engine (neighbour
// state machine, FDB ageing) every TickInterval and sends what they produce
// (ARP requests and probes, packets released by a resolution, ICMP host
// unreachable for failed ones) through transmit handles of its own. They
// are sendmmsg handles without ring memory: it sends little. Like the
// workers, it follows the port table and acknowledges each generation, so
// a retired port's rings are unmapped only after it let go of them.
//
// Locking: the goroutine owns its l3.Worker and handles; the port table is
// an atomic snapshot.

import (
	"sync/atomic"
	"time"

	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
)

type housekeeper struct {
	d     *Daemon
	w     *l3.Worker
	txs   txSet
	seen  atomic.Uint64
	wakeC chan struct{}
	done  chan struct{}
}

func newHousekeeper(d *Daemon) *housekeeper {
	return &housekeeper{d: d, w: d.e.NewWorker(), txs: txSet{mode: txLight},
		wakeC: make(chan struct{}, 1), done: make(chan struct{})}
}

func (h *housekeeper) wake() {
	select {
	case h.wakeC <- struct{}{}:
	default:
	}
}

func (h *housekeeper) caughtUp(gen uint64) bool {
	select {
	case <-h.done:
		return true
	default:
	}
	return h.seen.Load() >= gen
}

func (h *housekeeper) run() {
	defer close(h.done)
	defer h.txs.closeAll()
	send := func(p *l2.Port, frames [][]byte, origins []int32) { h.txs.send(h.w, p, frames, origins, nil) }
	t := time.NewTicker(h.d.opts.TickInterval)
	defer t.Stop()
	var gen uint64
	for {
		if pt := h.d.ports.Load(); pt.gen != gen {
			h.txs.follow(h.d, pt, nil)
			gen = pt.gen
			h.seen.Store(gen)
		}
		select {
		case <-h.d.stop:
			return
		case <-h.wakeC:
			continue
		case <-t.C:
		}
		h.w.Tick()
		h.w.FlushOrigins(send)
	}
}
