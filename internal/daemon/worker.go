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
// transmit handle (pktio.Sender) for that port, with the offload state of
// the input frame each output was made of. The frames stay in the receive
// ring until the next TryRecv on that queue, after the flush. A sweep that
// found nothing parks the worker on all its queues at once (a pktio.Waiter:
// the pktio.Poller, one epoll set in the Go netpoller).
//
// The worker names no backend: portio.go opens its queues and handles and
// hands them over as pktio.Receiver, Sender and Waitable. With AF_XDP ports
// the worker also owns an AF_XDP worker (portio.go, xdpWorker): one UMEM
// shared by its XDP sockets, one per (port, its queue), each both its
// receive queue and its transmit handle on that port, so a frame received
// on one port and rewritten in place leaves on another by descriptor. Such
// a worker waits with the AF_XDP worker (spin, then poll over its sockets
// and its AF_PACKET queues; also a pktio.Waiter) instead of the Poller.
//
// Locking: none on the datapath. Each worker owns its queues' receive side,
// its l3.Worker and its transmit handles; the port table is an atomic
// snapshot checked once per sweep. No allocations per batch once the
// handles exist (TestWorkerLoopAllocs).

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
)

// batchSize is the number of frames one TryRecv takes at most.
const batchSize = 256

// rxBinding is one of a worker's receive queues.
type rxBinding struct {
	p    *port
	qi   int // the queue's number on the port
	q    pktio.Receiver
	w    pktio.Waitable // q, for waiting; nil: the worker's AF_XDP worker waits for it already
	tx   pktio.Sender   // AF_XDP: q, also the port's transmit handle; else nil
	dead bool           // the queue returned ErrClosed: skipped until the table drops the port
}

// ioWorker is one datapath goroutine.
type ioWorker struct {
	d      *Daemon
	idx    int
	w      *l3.Worker
	poller *pktio.Poller // the waiter until the worker has an AF_XDP port
	waiter pktio.Waiter  // poller, or the AF_XDP worker (xdp.w)
	xdp    xdpWorker     // the worker's AF_XDP backend, if any (portio.go)

	gen    uint64 // port table generation bound
	seen   atomic.Uint64
	done   chan struct{} // closed when run returns
	parked atomic.Bool   // held by a hot restart's pause, its batches released
	// A hot restart's successor watches its new workers: startedAt is
	// when run began its first sweep (unix ns), idle is set by a sweep that
	// found every queue empty (the rings' backlog is worked off).
	startedAt atomic.Int64
	idle      atomic.Bool

	rx  []rxBinding
	txs txSet

	frames [][]byte
	meta   []pktio.Meta
	gso    []uint16
	cur    []pktio.Meta // metadata of the batch being flushed (origins index it)
	sendFn func(*l2.Port, [][]byte, []int32)
	tr     workerTrace // a trace's per-worker state (trace.go)

	// control: the worker reads the ports' control rings, not their data
	// queues (controlworker.go).
	control bool
}

func newIOWorker(d *Daemon, idx int) (*ioWorker, error) {
	wt, err := pktio.NewPoller()
	if err != nil {
		return nil, err
	}
	iw := &ioWorker{d: d, idx: idx, w: d.e.NewWorker(), poller: wt, waiter: wt, done: make(chan struct{}),
		txs:    txSet{mode: txData},
		frames: make([][]byte, batchSize), meta: make([]pktio.Meta, batchSize), gso: make([]uint16, batchSize)}
	iw.sendFn = iw.send
	iw.xdp.awaitTakeover = d.succ != nil // hot restart: AF_XDP sockets come with the takeover (hotrestart.go)
	return iw, nil
}

// wake makes a parked worker look at the port table and the stop flag.
func (iw *ioWorker) wake() {
	iw.poller.Wake()
	iw.xdp.wake()
}

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

// exited reports whether run has returned.
func (iw *ioWorker) exited() bool {
	select {
	case <-iw.done:
		return true
	default:
		return false
	}
}

// run forwards until the daemon stops.
func (iw *ioWorker) run() {
	defer close(iw.done)
	defer iw.release()
	iw.startedAt.Store(time.Now().UnixNano())
	for !iw.d.stopping.Load() {
		if !iw.parkIfPaused() { // a hot restart's handover (hotrestart.go)
			return
		}
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
					iw.unwatch(b)
				}
				continue
			}
			if n > 0 {
				b.p.captureRx(iw.frames[:n], b.q.Headroom()) // one atomic load when off
				if t := iw.d.trace.Load(); t != nil {        // one atomic load when off (trace.go)
					iw.tracedBatch(b.p, n, t)
				} else {
					iw.batch(b.p, n)
				}
				b.q.Release() // the flush is done: the frames go back now, not a sweep later
				got = true
			}
		}
		if !got {
			iw.idle.Store(true)
			if err := iw.wait(); err != nil && !iw.d.stopping.Load() {
				iw.d.log.Error("worker wait", "worker", iw.idx, "err", err)
				return
			}
		}
	}
}

// wait parks the worker until one of its queues has frames or it is woken.
func (iw *ioWorker) wait() error { return iw.waiter.Wait() }

func (iw *ioWorker) watch(b *rxBinding) error {
	if b.w == nil {
		return nil // an XDP socket: the AF_XDP worker waits for it already
	}
	return iw.waiter.Add(b.w)
}

func (iw *ioWorker) unwatch(b *rxBinding) {
	if b.w == nil {
		return
	}
	iw.waiter.Remove(b.w)
	iw.poller.Remove(b.w) // a no-op unless the AF_XDP worker took over from it
}

// bind follows the port table: queues and handles of new ports, none of
// ports that left (or were re-opened).
func (iw *ioWorker) bind(t *portTable) {
	keep := iw.rx[:0]
	var gone []pktio.Sender
	for _, b := range iw.rx {
		if t.get(b.p.l2.ID) == b.p {
			keep = append(keep, b)
			continue
		}
		iw.unwatch(&b)
		if b.tx != nil {
			gone = append(gone, b.tx)
		}
	}
	iw.rx = keep
	// Queue q of a port goes to worker q mod W: AF_PACKET ports have W
	// queues (one fanout member each); an AF_XDP port has as many as its
	// device (an RSS NIC may have more than there are workers).
	for _, p := range t.list {
		if iw.control {
			iw.bindControl(p)
			continue
		}
		for q := iw.idx; q < p.queues(); q += iw.d.opts.Workers {
			if iw.hasQueue(p, q) {
				continue
			}
			b, err := iw.openQueue(p, q)
			if errors.Is(err, errNoXDPWorker) {
				break
			}
			if err != nil {
				continue
			}
			if err := iw.watch(&b); err != nil {
				iw.d.log.Error("receive queue", "dev", p.name, "queue", q, "err", err)
				continue
			}
			iw.rx = append(iw.rx, b)
		}
	}
	iw.txs.follow(iw.d, t, iw.sockets)
	for _, xs := range gone { // after the transmit handles let go of them
		iw.xdp.closeSocket(xs)
	}
	iw.gen = t.gen
	iw.seen.Store(t.gen)
}

// sockets returns the worker's XDP socket on a port (nil: none): its
// transmit handle there.
func (iw *ioWorker) sockets(p *port) pktio.Sender {
	for _, b := range iw.rx {
		if b.p == p && b.tx != nil {
			return b.tx
		}
	}
	return nil
}

func (iw *ioWorker) hasQueue(p *port, q int) bool {
	for _, b := range iw.rx {
		if b.p == p && b.qi == q {
			return true
		}
	}
	return false
}

// batch forwards the n frames of the last TryRecv on p.
func (iw *ioWorker) batch(p *port, n int) { iw.batchRange(p, 0, n) }

// batchRange forwards frames [from, to) of the last TryRecv on p as one
// batch (a trace cuts a batch around the frames it follows, trace.go).
func (iw *ioWorker) batchRange(p *port, from, to int) {
	iw.receive(p, from, to)
	iw.w.FlushOrigins(iw.sendFn)
	iw.cur = nil
}

// receive runs frames [from, to) through the engine, up to the flush.
func (iw *ioWorker) receive(p *port, from, to int) {
	iw.cur = iw.meta[from:to]
	var gso []uint16
	for i := range iw.cur {
		m := &iw.cur[i]
		if m.Flags&pktio.FlagGSO != 0 {
			iw.gso[i] = m.Offload.GSOSize
			gso = iw.gso[:len(iw.cur)]
		} else {
			iw.gso[i] = 0
		}
	}
	iw.w.ReceiveGSO(p.l2, iw.frames[from:to], gso)
}

func (iw *ioWorker) send(p *l2.Port, frames [][]byte, origins []int32) {
	iw.txs.send(iw.w, p, frames, origins, iw.cur)
}

// release closes the worker's transmit handles, its XDP sockets and UMEM
// and its waiter; the AF_PACKET queues belong to their ports.
func (iw *ioWorker) release() {
	iw.txs.closeAll()
	iw.xdp.close()
	iw.poller.Close()
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

// txSet is one goroutine's transmit handles, one per port, by l2.PortID:
// the goroutine's XDP socket on the port, or a handle of its own.
type txSet struct {
	mode  txMode
	txs   []pktio.Sender
	own   []txHandle // the handles the set opened (closed by it); nil for XDP sockets
	ports []*port    // the port each handle is for
	offl  []pktio.Offload
}

// follow opens handles for new ports and closes those of ports that left
// the table (closing costs a grace period in the kernel each: concurrently).
// socket gives the goroutine's XDP socket on a port, if it has one (nil:
// housekeeping).
func (s *txSet) follow(d *Daemon, t *portTable, socket func(*port) pktio.Sender) {
	var stale []txHandle
	for id, p := range s.ports {
		if p != nil && t.get(l2.PortID(id)) != p {
			stale = append(stale, s.own[id])
			s.txs[id], s.own[id], s.ports[id] = nil, nil, nil
		}
	}
	closeTxs(stale)
	for len(s.txs) < len(t.byID) {
		s.txs = append(s.txs, nil)
		s.own = append(s.own, nil)
		s.ports = append(s.ports, nil)
	}
	var open []*port
	for id, p := range t.byID {
		if p == nil || s.ports[id] != nil {
			continue
		}
		if socket != nil {
			if xs := socket(p); xs != nil {
				s.txs[id], s.ports[id] = xs, p
				continue
			}
		}
		open = append(open, p)
	}
	opened := make([]txHandle, len(open))
	errs := make([]error, len(open))
	parallel(len(open), func(i int) { opened[i], errs[i] = open[i].newTx(s.mode == txLight) })
	for i, p := range open {
		if errs[i] != nil {
			if !errors.Is(errs[i], pktio.ErrClosed) {
				d.log.Error("transmit handle", "dev", p.name, "err", errs[i])
			}
			continue
		}
		s.txs[p.l2.ID], s.own[p.l2.ID], s.ports[p.l2.ID] = opened[i], opened[i], p
	}
}

// send transmits one port's frames; meta is the batch's metadata (nil for
// frames that are all generated).
func (s *txSet) send(w *l3.Worker, p *l2.Port, frames [][]byte, origins []int32, meta []pktio.Meta) {
	var tx pktio.Sender
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
	if dp := s.ports[p.ID]; dp != nil {
		dp.captureTx(frames) // one atomic load when off (capture.go)
	}
	n, _ := tx.Send(frames, offl)
	if n < len(frames) {
		// A dead device or a shut-down port; the kernel's refusals of
		// single frames are in the port's pktio counters.
		w.Tx().CountTxError(p, len(frames)-n)
	}
}

func (s *txSet) closeAll() {
	closeTxs(s.own)
	clear(s.txs)
	clear(s.own)
	clear(s.ports)
}

func closeTxs(txs []txHandle) {
	parallel(len(txs), func(i int) {
		if txs[i] != nil {
			txs[i].Close()
		}
	})
}
