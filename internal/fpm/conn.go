package fpm

// One zebra connection: a reader that keeps the socket drained, and the
// applier that batches frames into FIB transactions.
//
// Flow: the reader goroutine moves whatever arrives into an in-memory inbox
// at once, so zebra never sees a full socket: its FPM module, when its
// output buffer fills, pauses its table walk for a whole second, which made
// a replay take 9 s instead of 2. The applier (the session goroutine)
// takes the inbox, counts the complete frames, and applies all of them in
// one FIB transaction when the batch is due:
//   - it holds at least batchTarget frames (1/8 of the FIB's prefixes, at
//     least 4096): a full table streams in at in-place speed, and the clones
//     of the tries while it grows from empty sum to ~8 times its size;
//   - or the stream paused for IdleCommit since its last bytes arrived
//     (100 ms: a replay or an update burst ended, its routes become
//     visible at once; zebra's writes pause for tens of milliseconds in
//     the middle of a stream on a busy machine, and every false end makes
//     a small, copy-on-write batch);
//   - or its oldest frame waited MaxBatchDelay (1 s: the bound on how long
//     a route waits to become visible during a long stream; zebra's first
//     load of a full table, at ~13-76 K routes/s, fills batches far above
//     the in-place threshold, 1/fib.InPlaceFraction of the table, within a
//     second; so does a churn of 10,000 changes/s).
// An in-place batch takes in the frames that arrive while it is applied
// (extend: they cost microseconds each once the tries are cloned), for up
// to MaxBatchDelay, so a stream that ends during a batch is complete when
// that batch commits. After an in-place batch, while the stream goes on,
// the applier clones the tries for the next one outside the writer lock
// (fib.PrepareInPlace), so the next batch, the stream's last included, does
// not start with ~100-250 ms of copying.
// A frame is applied only once it decoded whole; a frame never spans two
// transactions. A malformed frame ends the session after the transaction of
// the frames before it commits.
//
// Locking: inMu guards the inbox, its arrival time and the reader's end;
// the applier owns the rest. The FIB writer lock is held only while a batch
// is applied.

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/netfwd/netfwd/fib"
)

// Buffer sizes: the reader reads readSize at a time; the inbox holds at most
// maxInbox bytes (then the reader waits: back-pressure on zebra).
const (
	readSize = 256 << 10
	maxInbox = 256 << 20
)

// readBuf is a reader's buffer. The server keeps one spare (Server.bufs),
// reused from one connection to the next: a buffer allocated per
// connection made every connection 256 KiB of garbage, and the heap kept
// room for it (1,000 connections: +62 MiB held from the OS, the resident
// size, for minutes). One spare suffices: sessions follow one another (a
// new one starts after the old one's reader ended). Not a sync.Pool, which
// drops a quarter of what it is given under the race detector, making the
// bound untestable there.
type readBuf = [readSize]byte

// getReadBuf takes the spare buffer, or allocates one.
func (s *Server) getReadBuf() *readBuf {
	select {
	case b := <-s.bufs:
		return b
	default:
		return new(readBuf)
	}
}

// putReadBuf keeps b as the spare (or drops it when there is one).
func (s *Server) putReadBuf(b *readBuf) {
	select {
	case s.bufs <- b:
	default:
	}
}

// maxChanges is how many merged-trie changes of one transaction the
// compiled FIB replays one by one (fib.Txn.AllowChanges).
const maxChanges = 1 << 22

// minBatch is the smallest batchTarget.
const minBatch = 4096

// session is one connection's state.
type session struct {
	s     *Server
	conn  net.Conn
	peer  peer
	tr    *Translator
	done  chan struct{}
	start time.Time

	lastMsg time.Time   // last route or nexthop message applied
	stale   []fib.Proto // protocols of the earlier sessions' routes
	swept   bool

	restoreGC func() // set while a bulk transaction is open
	// prepared: clones for the next batch, made after an in-place batch
	// while the stream goes on (streaming; fib/prepare.go): the clone is
	// off the next batch's critical path, the stream's last included.
	prepared *fib.Prepared

	inMu    sync.Mutex
	inbox   []byte        // guarded by inMu
	inLast  time.Time     // when the reader last added data; guarded by inMu
	inErr   error         // the reader's end; guarded by inMu
	inRoom  *sync.Cond    // the reader waits on it while the inbox is full
	notify  chan struct{} // the reader added data or ended
	readerW sync.WaitGroup

	buf     []byte
	r       int       // unapplied bytes are buf[r:]
	scan    int       // buf[r:scan] holds complete frames, counted in pending
	pending int       // complete frames not applied yet
	since   time.Time // when the oldest of them arrived
	arrived time.Time // when the newest bytes arrived (inLast at the last take)
	fr      Frame
}

// read is the reader goroutine.
func (sess *session) read() {
	defer sess.readerW.Done()
	rb := sess.s.getReadBuf()
	defer sess.s.putReadBuf(rb)
	b := rb[:]
	for {
		n, err := sess.conn.Read(b)
		sess.inMu.Lock()
		for n > 0 && len(sess.inbox) >= maxInbox && sess.inErr == nil {
			sess.inRoom.Wait()
		}
		sess.inbox = append(sess.inbox, b[:n]...)
		if n > 0 {
			sess.inLast = time.Now()
		}
		if err != nil {
			sess.inErr = err
		}
		sess.inMu.Unlock()
		select {
		case sess.notify <- struct{}{}:
		default:
		}
		if err != nil {
			return
		}
	}
}

// take moves the inbox into the applier's buffer; it returns the reader's
// end once the inbox is empty.
func (sess *session) take() error {
	if sess.r > 0 { // drop what was applied
		n := copy(sess.buf, sess.buf[sess.r:])
		sess.buf, sess.scan, sess.r = sess.buf[:n], sess.scan-sess.r, 0
	}
	sess.inMu.Lock()
	defer sess.inMu.Unlock()
	sess.buf = append(sess.buf, sess.inbox...)
	sess.inbox = sess.inbox[:0]
	sess.arrived = sess.inLast
	sess.inRoom.Broadcast()
	return sess.inErr
}

// run serves the connection until it fails or closes.
func (sess *session) run() {
	var why error
	defer func() {
		sess.conn.Close()
		sess.inMu.Lock()
		if sess.inErr == nil {
			sess.inErr = net.ErrClosed
		}
		sess.inRoom.Broadcast()
		sess.inMu.Unlock()
		sess.readerW.Wait()
		sess.inbox, sess.buf = nil, nil // a replay's buffers can be large
		sess.s.endSession(sess, why)
	}()
	sess.notify = make(chan struct{}, 1)
	sess.inRoom = sync.NewCond(&sess.inMu)
	sess.readerW.Add(1)
	go sess.read()
	o := &sess.s.opts
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		end := sess.take()
		if err := sess.count(time.Now()); err != nil {
			// A malformed header: apply the frames before it, then end.
			sess.flush()
			sess.s.stats.countMalformed(err)
			why = err
			return
		}
		if end != nil {
			sess.flush() // what arrived before the end still applies
			if errors.Is(end, io.EOF) || errors.Is(end, net.ErrClosed) {
				why = io.EOF
			} else {
				why = end
			}
			return
		}
		now := time.Now()
		if sess.pending > 0 && (sess.pending >= sess.batchTarget() || now.Sub(sess.since) >= o.MaxBatchDelay) {
			if why = sess.batch(); why != nil {
				return
			}
			continue
		}
		deadline := time.Time{}
		if !sess.swept {
			deadline = sess.sweepAt()
		}
		if sess.pending > 0 {
			// The pause counts from the last arrival, not from now: after
			// a long batch, frames that arrived during it and nothing since
			// are applied at once.
			idle := sess.arrived.Add(o.IdleCommit)
			if due := sess.since.Add(o.MaxBatchDelay); due.Before(idle) {
				idle = due
			}
			if deadline.IsZero() || idle.Before(deadline) {
				deadline = idle
			}
		}
		wait := time.Hour
		if !deadline.IsZero() {
			wait = max(time.Until(deadline), 0)
		}
		timer.Reset(wait)
		select {
		case <-sess.notify:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		case <-timer.C:
			if sess.pending == 0 {
				sess.prepared = nil // the stream ended: no batch will use it
			}
			if sess.pending > 0 {
				if why = sess.batch(); why != nil {
					return
				}
			}
			sess.maybeSweep()
		}
	}
}

// streaming reports whether another batch is likely soon: frames wait
// (counted, or still in the reader's inbox), or the stream was active
// within IdleCommit.
func (sess *session) streaming() bool {
	if sess.pending > 0 {
		return true
	}
	sess.inMu.Lock()
	defer sess.inMu.Unlock()
	return len(sess.inbox) > 0 || time.Since(sess.inLast) < sess.s.opts.IdleCommit
}

// flush applies every pending frame.
func (sess *session) flush() {
	for sess.pending > 0 {
		if sess.batch() != nil {
			return
		}
	}
}

// batchTarget is the batch size worth the in-place mode.
func (sess *session) batchTarget() int {
	return min(max(minBatch, sess.s.opts.FIB.Size()/8), sess.s.opts.MaxBatch)
}

// count finds the complete frames that arrived.
func (sess *session) count(now time.Time) error {
	for {
		_, _, n, err := NextFrame(sess.buf[sess.scan:])
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if sess.pending == 0 {
			sess.since = now
		}
		sess.scan += n
		sess.pending++
	}
}

// sweepAt is when the sweep condition can next become true.
func (sess *session) sweepAt() time.Time {
	o := &sess.s.opts
	m := sess.start.Add(o.SweepMax)
	if !sess.replayedAll() {
		return m // a message wakes the loop anyway
	}
	if t := sess.lastMsg.Add(o.SweepQuiet); t.Before(m) {
		return t
	}
	return m
}

func (sess *session) maybeSweep() {
	if sess.swept || sess.pending > 0 {
		return
	}
	now := time.Now()
	o := &sess.s.opts
	switch {
	case now.Sub(sess.lastMsg) >= o.SweepQuiet && sess.replayedAll():
		sess.swept = true
		sess.s.sweep(sess, "quiet")
	case now.Sub(sess.start) >= o.SweepMax:
		sess.swept = true
		sess.s.sweep(sess, "max")
	}
}

// replayedAll reports whether the session delivered routes of every
// protocol the earlier sessions' routes have.
func (sess *session) replayedAll() bool {
	for _, p := range sess.stale {
		if !sess.tr.Seen[p] {
			return false
		}
	}
	return true
}

// begin opens the batch's transaction: in place when the batch is large
// against the FIB (fib.InPlaceFraction).
func (sess *session) begin() *fib.Txn {
	tx := sess.s.opts.FIB.BeginPrepared(sess.pending, sess.prepared)
	sess.prepared = nil
	if tx.Bulk() {
		sess.s.stats.BulkBatches.Add(1)
		tx.AllowChanges(maxChanges)
		sess.restoreGC = BulkGC()
	}
	return tx
}

// batch applies the complete frames in the buffer in one transaction.
func (sess *session) batch() error {
	s := sess.s
	start := sess.since
	msgs, frames := 0, 0
	var tx *fib.Txn
	began := time.Now()
	defer func() {
		bulk := tx != nil && tx.Bulk()
		if tx != nil {
			tx.Commit()
			s.stats.Batches.Add(1)
			sess.lastMsg = time.Now()
			s.stats.C.Lag.Observe(sess.lastMsg.Sub(start))
			if d := int64(sess.lastMsg.Sub(start)); d > s.stats.MaxBatchNanos.Load() {
				s.stats.MaxBatchNanos.Store(d)
			}
		}
		if sess.restoreGC != nil {
			sess.restoreGC()
			sess.restoreGC = nil
		}
		// Counted once applied, so a reader of the counters sees the
		// frames' routes.
		s.stats.Frames.Add(uint64(frames))
		s.stats.Messages.Add(uint64(msgs))
		sess.pending -= frames
		if sess.r == sess.scan {
			sess.pending = 0
		}
		sess.since = time.Now()
		if bulk && sess.streaming() {
			restore := BulkGC() // a clone allocates the tries anew: no collections over the whole heap while it copies
			// every table the stream fills, not only main (a replay of
			// table 100 is in place too)
			sess.prepared = s.opts.FIB.PrepareInPlace(sess.tr.Tables()...)
			restore()
		}
	}()
	for sess.r < sess.scan && frames < s.opts.MaxBatch {
		typ, payload, n, err := NextFrame(sess.buf[sess.r:sess.scan])
		if err != nil || n == 0 {
			return err // counted frames are complete and well framed
		}
		sess.r += n
		frames++
		if typ != TypeNetlink {
			s.stats.SkippedFrames.Add(1)
			continue
		}
		if err := sess.fr.Decode(payload); err != nil {
			s.stats.countMalformed(err)
			sess.r = sess.scan
			return err
		}
		if tx == nil && len(sess.fr.Msgs) > 0 {
			tx = sess.begin()
		}
		sess.tr.ApplyFrame(tx, &sess.fr)
		msgs += len(sess.fr.Msgs)
		if sess.r == sess.scan && tx != nil && tx.Bulk() {
			sess.extend(began)
		}
	}
	return nil
}

// extend adds the frames that arrived while an in-place batch was applied
// to it, at a few microseconds each (the trie clones are paid already),
// instead of leaving them to a batch of their own with another clone: at
// the end of a stream the last frames become visible with the batch that
// was running when they came. Bounded by MaxBatchDelay from the batch's
// start (and MaxBatch frames, the caller's loop), so its first frames still
// become visible. A reader's end or a malformed header stops it; the run
// loop finds either again.
func (sess *session) extend(began time.Time) {
	if time.Since(began) >= sess.s.opts.MaxBatchDelay {
		return
	}
	if sess.take() != nil {
		return
	}
	_ = sess.count(time.Now())
}
