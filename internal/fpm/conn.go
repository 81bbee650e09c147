package fpm

// One zebra connection: the read loop and its batching.
//
// Flow: wait for data without holding anything (a blocking read whose
// deadline is the session's next sweep check); then apply a batch: open a
// FIB transaction sized from what is already buffered or queued in the
// socket, apply every complete frame in the buffer, read more without
// blocking while data keeps coming, and commit when no complete frame is
// left and the socket is empty, or the batch reaches MaxBatch messages or
// MaxBatchDelay. A frame is applied only once it decoded whole; a frame
// never spans two transactions. A malformed frame ends the session after
// the transaction of the frames before it commits.
//
// Copy-on-write transactions (a batch small against the FIB) cost a few
// microseconds per changed route; a batch large enough to clone the tries
// updates in place (fib.Begin). Under a flood the batches grow until the
// in-place mode pays: the loop keeps up with zebra's replay rate.
//
// Locking: the session goroutine owns the connection and its buffer; the
// FIB writer lock is held only while a batch is applied (never across a
// blocking read).

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/fib"
)

// avgFrame is the size of zebra's route frames with nexthop groups (56
// bytes) or without (64): the transaction size hint per buffered byte.
const avgFrame = 60

// persistBatch bounds a copy-on-write transaction: past this many messages
// a fresh transaction with a new size hint is cheaper.
const persistBatch = 4096

// readBufSize is the connection's read buffer.
const readBufSize = 1 << 20

// maxChanges is how many merged-trie changes of one transaction the
// compiled FIB replays one by one (fib.Txn.AllowChanges).
const maxChanges = 1 << 22

// session is one connection's state.
type session struct {
	s     *Server
	conn  net.Conn
	tr    *Translator
	done  chan struct{}
	start time.Time

	lastMsg time.Time   // last route or nexthop message
	stale   []fib.Proto // protocols of the earlier sessions' routes
	swept   bool

	restoreGC func() // set while a bulk transaction is open

	rc   syscall.RawConn // for non-blocking reads (nil: not a socket)
	buf  []byte
	r, w int // unread bytes are buf[r:w]
	fr   Frame
}

// run serves the connection until it fails or closes.
func (sess *session) run() {
	var why error
	defer func() { sess.s.endSession(sess, why) }()
	sess.buf = make([]byte, readBufSize)
	if sc, ok := sess.conn.(syscall.Conn); ok {
		sess.rc, _ = sc.SyscallConn()
	}
	for {
		// A batch that stopped at its size or time limit left frames
		// in the buffer: apply them before waiting for more.
		if _, _, n, err := NextFrame(sess.buf[sess.r:sess.w]); n > 0 || err != nil {
			if err := sess.batch(); err != nil {
				why = err
				return
			}
			sess.maybeSweep()
			continue
		}
		deadline := time.Time{}
		if !sess.swept {
			deadline = sess.sweepAt()
		}
		n, err := sess.fill(deadline)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			sess.maybeSweep()
			continue
		}
		if n == 0 && err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				why = io.EOF
			} else {
				why = err
			}
			return
		}
		if err := sess.batch(); err != nil {
			why = err
			return
		}
		sess.maybeSweep()
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
	if sess.swept {
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

// compact moves the unread bytes to the start of the buffer.
func (sess *session) compact() {
	if sess.r > 0 {
		sess.w = copy(sess.buf, sess.buf[sess.r:sess.w])
		sess.r = 0
	}
}

// fill blocks until more bytes arrive (or the deadline passes).
func (sess *session) fill(deadline time.Time) (int, error) {
	if sess.w == len(sess.buf) {
		sess.compact()
	}
	sess.conn.SetReadDeadline(deadline)
	n, err := sess.conn.Read(sess.buf[sess.w:])
	sess.w += n
	return n, err
}

// tryFill reads what the socket holds without blocking.
func (sess *session) tryFill() int {
	if sess.rc == nil {
		return 0
	}
	if sess.w == len(sess.buf) {
		sess.compact()
		if sess.w == len(sess.buf) {
			return 0
		}
	}
	n := 0
	sess.rc.Read(func(fd uintptr) bool {
		n, _ = unix.Read(int(fd), sess.buf[sess.w:])
		return true // never wait
	})
	if n > 0 {
		sess.w += n
		return n
	}
	return 0
}

// queued is how many bytes wait in the socket.
func (sess *session) queued() int {
	if sess.rc == nil {
		return 0
	}
	q := 0
	sess.rc.Control(func(fd uintptr) {
		q, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ)
	})
	return q
}

// bulkRatio: a batch of at least 1/bulkRatio of the FIB's size is applied
// in place (both tries cloned once, ~0.14 us per stored prefix) rather than
// copy-on-write (~5 us per route): the break-even is near 1/36.
const bulkRatio = 40

// begin opens a transaction sized by what is buffered and queued.
func (sess *session) begin() *fib.Txn {
	f := sess.s.opts.FIB
	pending := (sess.w-sess.r+sess.queued())/avgFrame + 1
	hint := pending
	if size := f.MergedSize(); pending >= 64 && pending >= size/bulkRatio {
		hint = max(pending, size) // in place
	}
	tx := f.Begin(hint)
	if tx.Bulk() {
		tx.AllowChanges(maxChanges)
		sess.restoreGC = BulkGC()
	}
	return tx
}

// batch applies the complete frames in the buffer, and what follows them
// without waiting, in one transaction.
func (sess *session) batch() error {
	s := sess.s
	o := &s.opts
	start := time.Now()
	msgs, frames := 0, 0
	var tx *fib.Txn
	defer func() {
		if tx != nil {
			tx.Commit()
			s.stats.Batches.Add(1)
			sess.lastMsg = time.Now()
		}
		if sess.restoreGC != nil {
			sess.restoreGC()
			sess.restoreGC = nil
		}
		// Counted once applied, so a reader of the counters sees the
		// frames' routes.
		s.stats.Frames.Add(uint64(frames))
		s.stats.Messages.Add(uint64(msgs))
	}()
	for {
		typ, payload, n, err := NextFrame(sess.buf[sess.r:sess.w])
		if err != nil {
			s.stats.countMalformed(err)
			return err
		}
		if n == 0 {
			if msgs >= o.MaxBatch || time.Since(start) >= o.MaxBatchDelay {
				return nil
			}
			if sess.tryFill() == 0 {
				return nil
			}
			continue
		}
		sess.r += n
		frames++
		if typ != TypeNetlink {
			s.stats.SkippedFrames.Add(1)
			continue
		}
		if err := sess.fr.Decode(payload); err != nil {
			s.stats.countMalformed(err)
			return err
		}
		if tx == nil && len(sess.fr.Msgs) > 0 {
			tx = sess.begin()
		}
		sess.tr.ApplyFrame(tx, &sess.fr)
		msgs += len(sess.fr.Msgs)
		if msgs >= o.MaxBatch || tx != nil && !tx.Bulk() && msgs >= persistBatch {
			return nil
		}
	}
}
