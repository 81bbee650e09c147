package daemon

// The I/O loop of one receive queue, and the housekeeping goroutine.
//
// Flow per batch: Recv (frames in place in the RX ring) -> GSO segment sizes
// from the metadata -> Worker.ReceiveGSO -> Worker.FlushOrigins, whose
// callback sends each port's frames through this goroutine's own pktio.Tx
// for that port, with the offload state of the input frame each output was
// made of (meta[origin].Offload; zero for frames the router generated). The
// flush returns before the next Recv hands the ring blocks back, so frames
// stay valid for as long as the engine needs them.
//
// Locking: none. Each goroutine owns its queue, its l3.Worker and its Tx
// handles; the port table is an atomic snapshot, checked once per batch. No
// allocations per batch once the handles exist (TestQueueLoopAllocs).

import (
	"errors"
	"time"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
)

// batchSize is the number of frames one Recv takes at most.
const batchSize = 256

// txSet is a goroutine's transmit handles, one per port, by l2.PortID.
type txSet struct {
	d   *Daemon
	gen uint64
	txs []*pktio.Tx
	// offl is the offload scratch of one port's flush.
	offl []pktio.Offload
}

// refresh opens handles for ports added since the last batch.
func (s *txSet) refresh() {
	t := s.d.ports.Load()
	if t.gen == s.gen {
		return
	}
	s.gen = t.gen
	for len(s.txs) < len(t.byID) {
		s.txs = append(s.txs, nil)
	}
	for id, p := range t.byID {
		if p == nil || s.txs[id] != nil {
			continue
		}
		tx, err := p.io.NewTx()
		if err != nil {
			if !errors.Is(err, pktio.ErrClosed) {
				s.d.log.Error("transmit handle", "dev", p.name, "err", err)
			}
			continue
		}
		s.txs[id] = tx
	}
}

// send transmits one port's frames; meta is the batch's metadata (nil for
// the housekeeping worker, whose frames are all generated).
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
	n, err := tx.Send(frames, offl)
	if n < len(frames) {
		w.Tx().CountTxError(p, len(frames)-n)
	}
	_ = err // a dead device or shut-down port: counted above; the loop ends on Recv
}

func (s *txSet) close() {
	for _, tx := range s.txs {
		if tx != nil {
			tx.Close()
		}
	}
}

// queueWorker is one receive queue's goroutine state.
type queueWorker struct {
	d      *Daemon
	port   *port
	q      *pktio.Queue
	w      *l3.Worker
	txs    txSet
	frames [][]byte
	meta   []pktio.Meta
	gso    []uint16
	n      int // frames of the current batch
	sendFn func(*l2.Port, [][]byte, []int32)
}

func newQueueWorker(d *Daemon, p *port, q *pktio.Queue) *queueWorker {
	qw := &queueWorker{d: d, port: p, q: q, w: d.e.NewWorker(), txs: txSet{d: d},
		frames: make([][]byte, batchSize), meta: make([]pktio.Meta, batchSize), gso: make([]uint16, batchSize)}
	qw.sendFn = qw.send
	return qw
}

func (qw *queueWorker) send(p *l2.Port, frames [][]byte, origins []int32) {
	qw.txs.send(qw.w, p, frames, origins, qw.meta[:qw.n])
}

// run loops until the port is shut down.
func (qw *queueWorker) run() {
	defer qw.txs.close()
	// Open the transmit handles before the first frame: opening them on the
	// first batch delayed the first packets after start by 100-250 ms.
	qw.txs.refresh()
	for {
		n, err := qw.q.Recv(qw.frames, qw.meta)
		if err != nil {
			if errors.Is(err, pktio.ErrClosed) {
				return
			}
			qw.d.log.Error("receive", "dev", qw.port.name, "queue", qw.q.Index(), "err", err)
			select {
			case <-qw.d.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		qw.batch(n)
	}
}

// batch forwards the n frames of the last Recv.
func (qw *queueWorker) batch(n int) {
	qw.txs.refresh()
	qw.n = n
	var gso []uint16
	for i := range n {
		m := &qw.meta[i]
		if m.Flags&pktio.FlagGSO != 0 {
			qw.gso[i] = m.Offload.GSOSize
			gso = qw.gso[:n]
		} else {
			qw.gso[i] = 0
		}
	}
	qw.w.ReceiveGSO(qw.port.l2, qw.frames[:n], gso)
	qw.w.FlushOrigins(qw.sendFn)
	qw.n = 0
}

// housekeeping runs the neighbour timers and FDB ageing and sends what they
// produce (ARP requests and probes, packets released by a resolution, ICMP
// host unreachable for failed ones).
func (d *Daemon) housekeeping() {
	defer d.wg.Done()
	w := d.e.NewWorker()
	s := txSet{d: d}
	defer s.close()
	send := func(p *l2.Port, frames [][]byte, origins []int32) { s.send(w, p, frames, origins, nil) }
	s.refresh()
	t := time.NewTicker(d.opts.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
		s.refresh()
		w.Tick()
		w.FlushOrigins(send)
	}
}
