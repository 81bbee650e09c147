package daemon

// Datapath workers: W goroutines (W = --workers, default the number of
// cores), worker i owning receive queue i of every port and one transmit
// handle per egress port, as VPP and DPDK assign queues to worker threads.
// Memory and sockets grow with ports x workers, not ports x ports.
//
// Flow of one worker: before each sweep, if the port table changed, bind
// the queues and transmit handles of new ports and drop those of ports that
// left (then acknowledge the table's generation). A sweep takes up to one
// batch from each of its queues without waiting (TryRecv): GSO segment
// sizes from the metadata -> l3.Worker.ReceiveGSO -> FlushOrigins, whose
// callback sends each egress port's frames through the worker's own
// pktio.Tx for that port, with the offload state of the input frame each
// output was made of. The frames stay in the receive ring until the next
// TryRecv on that queue, after the flush. A sweep that found nothing parks
// the worker on all its queues at once (pktio.Waiter: one epoll set in the
// Go netpoller).
//
// Locking: none on the datapath. Each worker owns its queues' receive side,
// its l3.Worker and its transmit handles; the port table is an atomic
// snapshot checked once per sweep. No allocations per batch once the
// handles exist (TestWorkerLoopAllocs).

import (
	"errors"
	"sync/atomic"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
)

// batchSize is the number of frames one TryRecv takes at most.
const batchSize = 256

// rxBinding is one of a worker's receive queues.
type rxBinding struct {
	p    *port
	q    *pktio.Queue
	dead bool // the queue returned ErrClosed: skipped until the table drops the port
}

// ioWorker is one datapath goroutine.
type ioWorker struct {
	d      *Daemon
	idx    int
	w      *l3.Worker
	waiter *pktio.Waiter

	gen  uint64 // port table generation bound
	seen atomic.Uint64
	done chan struct{} // closed when run returns

	rx  []rxBinding
	txs txSet

	frames [][]byte
	meta   []pktio.Meta
	gso    []uint16
	n      int // frames of the batch being flushed
	sendFn func(*l2.Port, [][]byte, []int32)
}

func newIOWorker(d *Daemon, idx int) (*ioWorker, error) {
	wt, err := pktio.NewWaiter()
	if err != nil {
		return nil, err
	}
	iw := &ioWorker{d: d, idx: idx, w: d.e.NewWorker(), waiter: wt, done: make(chan struct{}),
		txs:    txSet{mode: txData},
		frames: make([][]byte, batchSize), meta: make([]pktio.Meta, batchSize), gso: make([]uint16, batchSize)}
	iw.sendFn = iw.send
	return iw, nil
}

// wake makes a parked worker look at the port table and the stop flag.
func (iw *ioWorker) wake() { iw.waiter.Wake() }

// caughtUp reports whether the worker runs with generation gen or later,
// or has exited.
func (iw *ioWorker) caughtUp(gen uint64) bool {
	select {
	case <-iw.done:
		return true
	default:
	}
	return iw.seen.Load() >= gen
}

// run forwards until the daemon stops.
func (iw *ioWorker) run() {
	defer close(iw.done)
	defer iw.release()
	for !iw.d.stopping.Load() {
		if t := iw.d.ports.Load(); t.gen != iw.gen {
			iw.bind(t)
		}
		got := false
		for i := range iw.rx {
			b := &iw.rx[i]
			if b.dead {
				continue
			}
			n, err := b.q.TryRecv(iw.frames, iw.meta)
			if err != nil {
				if errors.Is(err, pktio.ErrClosed) {
					b.dead = true
					iw.waiter.Remove(b.q)
				}
				continue
			}
			if n > 0 {
				iw.batch(b.p, n)
				got = true
			}
		}
		if !got {
			if err := iw.waiter.Wait(); err != nil {
				return
			}
		}
	}
}

// bind follows the port table: queues and handles of new ports, none of
// ports that left (or were re-opened).
func (iw *ioWorker) bind(t *portTable) {
	keep := iw.rx[:0]
	for _, b := range iw.rx {
		if t.get(b.p.l2.ID) == b.p {
			keep = append(keep, b)
		} else {
			iw.waiter.Remove(b.q)
		}
	}
	iw.rx = keep
	for _, p := range t.list {
		if iw.idx >= p.io.Queues() || iw.hasQueue(p) {
			continue
		}
		q := p.io.Queue(iw.idx)
		if err := iw.waiter.Add(q); err != nil {
			iw.d.log.Error("receive queue", "dev", p.name, "queue", iw.idx, "err", err)
			continue
		}
		iw.rx = append(iw.rx, rxBinding{p: p, q: q})
	}
	iw.txs.follow(iw.d, t)
	iw.gen = t.gen
	iw.seen.Store(t.gen)
}

func (iw *ioWorker) hasQueue(p *port) bool {
	for _, b := range iw.rx {
		if b.p == p {
			return true
		}
	}
	return false
}

// batch forwards the n frames of the last TryRecv on p.
func (iw *ioWorker) batch(p *port, n int) {
	iw.n = n
	var gso []uint16
	for i := range n {
		m := &iw.meta[i]
		if m.Flags&pktio.FlagGSO != 0 {
			iw.gso[i] = m.Offload.GSOSize
			gso = iw.gso[:n]
		} else {
			iw.gso[i] = 0
		}
	}
	iw.w.ReceiveGSO(p.l2, iw.frames[:n], gso)
	iw.w.FlushOrigins(iw.sendFn)
	iw.n = 0
}

func (iw *ioWorker) send(p *l2.Port, frames [][]byte, origins []int32) {
	iw.txs.send(iw.w, p, frames, origins, iw.meta[:iw.n])
}

// release closes the worker's transmit handles and its waiter; the queues
// belong to their ports.
func (iw *ioWorker) release() {
	iw.txs.closeAll()
	iw.waiter.Close()
}

// txMode says which kind of transmit handle a txSet opens.
type txMode uint8

const (
	// txData: the port's configured mode (a TX ring by default): the
	// datapath workers.
	txData txMode = iota
	// txLight: sendmmsg, no ring memory: the housekeeping worker, which
	// sends a few ARP requests and released packets.
	txLight
)

// txSet is one goroutine's transmit handles, one per port, by l2.PortID.
type txSet struct {
	mode  txMode
	txs   []*pktio.Tx
	ports []*port // the port each handle was opened on
	offl  []pktio.Offload
}

// follow opens handles for new ports and closes those of ports that left
// the table (closing costs a grace period in the kernel each: concurrently).
func (s *txSet) follow(d *Daemon, t *portTable) {
	var stale []*pktio.Tx
	for id, p := range s.ports {
		if p != nil && t.get(l2.PortID(id)) != p {
			stale = append(stale, s.txs[id])
			s.txs[id], s.ports[id] = nil, nil
		}
	}
	closeTxs(stale)
	for len(s.txs) < len(t.byID) {
		s.txs = append(s.txs, nil)
		s.ports = append(s.ports, nil)
	}
	var open []*port
	for id, p := range t.byID {
		if p != nil && s.ports[id] == nil {
			open = append(open, p)
		}
	}
	opened := make([]*pktio.Tx, len(open))
	errs := make([]error, len(open))
	parallel(len(open), func(i int) {
		if s.mode == txLight {
			opened[i], errs[i] = open[i].io.NewTxMode(pktio.TxSendmmsg)
		} else {
			opened[i], errs[i] = open[i].io.NewTx()
		}
	})
	for i, p := range open {
		if errs[i] != nil {
			if !errors.Is(errs[i], pktio.ErrClosed) {
				d.log.Error("transmit handle", "dev", p.name, "err", errs[i])
			}
			continue
		}
		s.txs[p.l2.ID], s.ports[p.l2.ID] = opened[i], p
	}
}

// send transmits one port's frames; meta is the batch's metadata (nil for
// frames that are all generated).
func (s *txSet) send(w *l3.Worker, p *l2.Port, frames [][]byte, origins []int32, meta []pktio.Meta) {
	var tx *pktio.Tx
	if int(p.ID) < len(s.txs) {
		tx = s.txs[p.ID]
	}
	if tx == nil {
		w.Tx().CountTxError(p, len(frames))
		return
	}
	if cap(s.offl) < len(frames) {
		s.offl = make([]pktio.Offload, len(frames)+len(frames)/2)
	}
	offl := s.offl[:len(frames)]
	for i, o := range origins {
		if o >= 0 && int(o) < len(meta) {
			offl[i] = meta[o].Offload
		} else {
			offl[i] = pktio.Offload{}
		}
	}
	n, _ := tx.Send(frames, offl)
	if n < len(frames) {
		// A dead device or a shut-down port; the kernel's refusals of
		// single frames are in the port's pktio counters.
		w.Tx().CountTxError(p, len(frames)-n)
	}
}

func (s *txSet) closeAll() {
	closeTxs(s.txs)
	clear(s.txs)
	clear(s.ports)
}

func closeTxs(txs []*pktio.Tx) {
	parallel(len(txs), func(i int) {
		if txs[i] != nil {
			txs[i].Close()
		}
	})
}
