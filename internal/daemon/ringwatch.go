package daemon

// ringwatch: says when a port's receive rings overflowed. A ring drop is
// the one loss the engine cannot count itself (the kernel dropped the
// frame before netfwd saw it), and it is the loss a burst causes: frames
// arrive faster than the workers drain them for longer than the rings
// hold (docs/performance.md, "Bursts and zero loss"). Every second the
// watcher reads each port's ring drops; where they grew it counts an
// overflow (netfwd_pktio_ring_overflows_total{port}) and logs a line, at
// most one a port every ringWatchLogEvery with the frames lost since the
// last line, so an attack cannot flood the log.
//
// Locking: one goroutine owns the watcher's state; Overflows is read by the
// metrics collector (atomics in a sync.Map keyed by port name).

import (
	"sync"
	"sync/atomic"
	"time"
)

const (
	ringWatchPeriod   = time.Second
	ringWatchLogEvery = 10 * time.Second
)

type ringWatch struct {
	d         *Daemon
	overflows sync.Map // port name -> *atomic.Uint64
	last      map[string]ringWatchPort
}

type ringWatchPort struct {
	drops, unlogged uint64
	loggedAt        time.Time
}

func newRingWatch(d *Daemon) *ringWatch {
	return &ringWatch{d: d, last: map[string]ringWatchPort{}}
}

// Overflows is how many watch periods port saw ring drops in.
func (w *ringWatch) Overflows(port string) uint64 {
	if w == nil {
		return 0
	}
	if v, ok := w.overflows.Load(port); ok {
		return v.(*atomic.Uint64).Load()
	}
	return 0
}

func (w *ringWatch) run(stop <-chan struct{}) {
	t := time.NewTicker(ringWatchPeriod)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			w.sweep(now)
		}
	}
}

// sweep compares each port's ring drops with the last sweep's.
func (w *ringWatch) sweep(now time.Time) {
	pt := w.d.ports.Load()
	seen := make(map[string]bool, len(pt.list))
	for _, p := range pt.list {
		if p.pk == nil && p.xp == nil {
			continue
		}
		seen[p.name] = true
		drops := p.stats().Rx.RingDrops
		st := w.last[p.name] // a new port's counters start at 0, as its baseline does
		if drops > st.drops {
			w.overflowed(p.name, &st, drops-st.drops, now)
		}
		st.drops = drops
		w.last[p.name] = st
	}
	for name := range w.last {
		if !seen[name] {
			delete(w.last, name) // a re-created port starts its counters anew
		}
	}
}

func (w *ringWatch) overflowed(port string, st *ringWatchPort, lost uint64, now time.Time) {
	v, _ := w.overflows.LoadOrStore(port, new(atomic.Uint64))
	v.(*atomic.Uint64).Add(1)
	st.unlogged += lost
	if now.Sub(st.loggedAt) < ringWatchLogEvery {
		return
	}
	w.d.log.Warn("receive ring overflowed: frames arrived faster than the workers took them for longer than the ring holds (a burst, or the workers off the CPU; docs/performance.md)",
		"port", port, "lost", st.unlogged, "since", sinceText(st.loggedAt, now))
	st.unlogged, st.loggedAt = 0, now
}

func sinceText(last, now time.Time) string {
	if last.IsZero() {
		return "start"
	}
	return now.Sub(last).Round(time.Second).String() + " ago"
}
