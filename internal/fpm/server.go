// Package fpm is netfwd's FPM server: FRR's zebra (loaded with
// `-M dplane_fpm_nl`) connects to it over TCP and streams its routes and
// nexthop objects as netlink messages in FPM frames; they become learned
// routes of owner fib.OwnerFPM.
//
// Flow: Listen binds; Serve admits a connection only from the routing
// daemon (access.go: its socket's owner, or an allowed network) and only
// while no session is live: a second connection never replaces a live
// session. It waits TakeoverWait for the live one to end (zebra restarted:
// the old connection sees its EOF at once), else it is refused; a peer
// that vanished without closing is found dead by TCP keepalive, and
// zebra's next attempt (every ~3 s) gets in.
//
// Each connection is a session with its own mark and Translator
// (translate.go): frames are read in batches (conn.go), each batch applied
// in one FIB transaction, frame by frame, a frame only once all its
// messages decoded. A malformed frame applies nothing of itself,
// is counted, and closes the connection: zebra reconnects and replays.
//
// Resync (zebra sends no end-of-replay marker): routes a session installs
// or confirms carry its mark, so the routes of earlier sessions that the
// new one has not replayed are recognisable without touching any route at
// the start of the session, and forwarding keeps using them meanwhile.
// Marks are a byte (they fill padding in fib.Route) and wrap after 255
// sessions: a session whose mark comes round again first re-marks the
// routes still carrying it as of no session (staleMark), so routes nobody
// confirmed for 255 sessions cannot pass for its own. The sweep that
// removes them runs once per session: when the session has
// delivered at least one route of every protocol among those stale routes
// and then been quiet (no route or nexthop message) for SweepQuiet, or
// SweepMax after it started. (After a restart zebra replays its connected
// routes at once, but BGP routes only once bgpd has re-established its
// sessions, seconds later: a quiet period alone would sweep them first.) A
// session that ends leaves its routes in place (graceful restart); if no
// new session has started after StaleTime they are all removed.
//
// Locking: mu guards the session bookkeeping; FIB changes happen in FIB
// transactions from the session goroutine (or the stale timer), one at a
// time (the FIB writer lock).
package fpm

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/rtnl"
)

// Options configure a Server.
type Options struct {
	FIB *fib.FIB
	// Listener, if set, is used instead of binding the address: the
	// listening socket a hot restart took over from the previous process
	// (internal/handover).
	Listener net.Listener
	// Iface maps zebra's interface indices (the kernel's, in zebra's
	// namespace) to netfwd devices. Required.
	Iface IfaceFunc
	// Logger (nil: slog.Default()).
	Logger *slog.Logger
	// SweepQuiet: a new session sweeps the routes it did not replay after
	// this long without a route or nexthop message (0: 10 s).
	SweepQuiet time.Duration
	// SweepMax: ... or this long after the session started (0: 120 s).
	SweepMax time.Duration
	// StaleTime: routes of a lost session are removed if no new session
	// started within this time (0: 120 s; negative: never).
	StaleTime time.Duration
	// KeepKernelProto installs zebra's routes of protocol kernel (its copies
	// of the namespace's connected routes); by default they are skipped:
	// netfwd derives connected routes from its own addresses.
	KeepKernelProto bool
	// MaxBatch bounds the frames of one transaction (0: 1<<20).
	MaxBatch int
	// MaxBatchDelay bounds how long a frame waits for its batch (0: 1 s):
	// during a long stream a route becomes visible at the latest this long
	// after it arrived, plus the transaction's time (conn.go).
	MaxBatchDelay time.Duration
	// IdleCommit applies the waiting frames when the stream pauses this
	// long (0: 100 ms): the end of a replay or of an update burst.
	IdleCommit time.Duration

	// AllowUsers may connect from this host: user names or uids (nil:
	// DefaultAllowUsers that exist; access.go). A name that does not exist
	// is an error.
	AllowUsers []string
	// AllowNets may connect from other hosts (by address: nobody's user
	// can be checked there). Default: none.
	AllowNets []netip.Prefix
	// KeepAlive probes an idle connection after this long, then every
	// KeepAlive/2, and gives up after 3 unanswered probes: a peer that
	// vanished without closing (a host gone, a cable cut) ends its session
	// within 2*KeepAlive of its last data (0: 10 s).
	KeepAlive time.Duration
	// TakeoverWait: a new connection while a session is live waits this
	// long for the live one to end (a restarted zebra's old connection is
	// being closed), else it is refused (0: 1 s).
	TakeoverWait time.Duration
}

func (o *Options) normalize() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.SweepQuiet <= 0 {
		o.SweepQuiet = 10 * time.Second
	}
	if o.SweepMax <= 0 {
		o.SweepMax = 120 * time.Second
	}
	if o.StaleTime == 0 {
		o.StaleTime = 120 * time.Second
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 1 << 20
	}
	if o.MaxBatchDelay <= 0 {
		o.MaxBatchDelay = time.Second
	}
	if o.IdleCommit <= 0 {
		o.IdleCommit = 100 * time.Millisecond
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = 10 * time.Second
	}
	if o.TakeoverWait <= 0 {
		o.TakeoverWait = time.Second
	}
}

// Stats are the server's counters (atomic; the translator's are in C).
type Stats struct {
	Connections   atomic.Uint64 // sessions started
	RefusedPeers  atomic.Uint64 // connections of peers not allowed (access.go)
	RefusedBusy   atomic.Uint64 // connections refused while a session was live
	Frames        atomic.Uint64
	Messages      atomic.Uint64
	Batches       atomic.Uint64 // FIB transactions
	BulkBatches   atomic.Uint64 // of them in place (tries cloned once)
	SkippedFrames atomic.Uint64 // frames of a type other than netlink
	Sweeps        atomic.Uint64
	SweptRoutes   atomic.Uint64
	StaleFlushes  atomic.Uint64 // lost sessions whose routes timed out
	// MaxBatchNanos is the longest transaction so far, from its first
	// frame to its commit: the most a route waited to become visible.
	MaxBatchNanos atomic.Int64
	Connected     atomic.Bool
	C             Counters // route and nexthop messages

	mu        sync.Mutex
	malformed map[string]uint64 // guarded by mu
}

func (s *Stats) countMalformed(err error) {
	reason := "other" // a label value, never the text of an error
	var e *rtnl.Error
	if errors.As(err, &e) {
		reason = e.Label()
	}
	s.mu.Lock()
	if s.malformed == nil {
		s.malformed = map[string]uint64{}
	}
	s.malformed[reason]++
	s.mu.Unlock()
}

// Malformed returns the malformed frames by reason.
func (s *Stats) Malformed() map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]uint64, len(s.malformed))
	for k, v := range s.malformed {
		out[k] = v
	}
	return out
}

// staleMark is the mark of no session: the routes of a session whose mark
// comes round again get it when the new session starts (startSession).
const staleMark = 0

// Server is an FPM server.
type Server struct {
	opts  Options
	log   *slog.Logger
	ln    net.Listener
	diag  *sockDiag
	uids  []uint32      // allowed users
	bufs  chan *readBuf // the spare read buffer (conn.go)
	stats Stats

	mu     sync.Mutex
	cur    *session    // guarded by mu
	mark   uint8       // mark of the latest session; guarded by mu
	stale  *time.Timer // guarded by mu
	closed bool        // guarded by mu
	wg     sync.WaitGroup
}

// Listen binds the FPM listener on addr (host:port).
func Listen(addr string, opts Options) (*Server, error) {
	if opts.FIB == nil || opts.Iface == nil {
		return nil, errors.New("fpm: FIB and Iface are required")
	}
	opts.normalize()
	users, required := opts.AllowUsers, true
	if users == nil {
		users, required = DefaultAllowUsers, false
	}
	uids, err := ResolveUsers(users, required)
	if err != nil {
		return nil, err
	}
	diag, err := openSockDiag() // in the listener's namespace
	if err != nil {
		return nil, fmt.Errorf("fpm: %w", err)
	}
	ln := opts.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", addr); err != nil {
			diag.Close()
			return nil, fmt.Errorf("fpm: %w", err)
		}
	}
	return &Server{opts: opts, log: opts.Logger, ln: ln, diag: diag, uids: uids,
		bufs: make(chan *readBuf, 1)}, nil
}

// Listener is the listening socket (a hot restart hands it over).
func (s *Server) Listener() net.Listener { return s.ln }

// AllowedUIDs returns the users that may connect from this host.
func (s *Server) AllowedUIDs() []uint32 { return slices.Clone(s.uids) }

// Addr returns the listener's address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Stats returns the server's counters.
func (s *Server) Stats() *Stats { return &s.stats }

// Serve accepts connections until Close.
func (s *Server) Serve() error {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			return err
		}
		p, why := s.admit(c)
		if why != "" {
			s.stats.RefusedPeers.Add(1)
			s.log.Warn("fpm: refused a connection", append(p.logArgs(), "reason", why)...)
			c.Close()
			continue
		}
		if !s.waitIdle(c, p) {
			c.Close()
			continue
		}
		keepAlive(c, s.opts.KeepAlive)
		sess, ok := s.startSession(c, p)
		if !ok {
			c.Close()
			return nil
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			sess.run()
		}()
	}
}

// waitIdle lets an admitted connection in when no session is live, or when
// the live one ends within TakeoverWait (a restarted zebra's old connection
// saw its EOF or RST); else it refuses it: a connection never replaces a
// live session. A peer that vanished without closing is found dead by TCP
// keepalive (KeepAlive), and zebra's next attempt gets in.
func (s *Server) waitIdle(c net.Conn, p peer) bool {
	s.mu.Lock()
	old := s.cur
	s.mu.Unlock()
	if old == nil {
		return true
	}
	t := time.NewTimer(s.opts.TakeoverWait)
	defer t.Stop()
	select {
	case <-old.done:
		return true
	case <-t.C:
	}
	s.stats.RefusedBusy.Add(1)
	old.inMu.Lock()
	idle := time.Since(old.inLast).Round(time.Millisecond)
	old.inMu.Unlock()
	s.log.Warn("fpm: refused a connection: a session is live", append(p.logArgs(),
		"live", old.peer.String(), "live_idle", idle)...)
	return false
}

// keepAlive makes the kernel probe an idle connection (Options.KeepAlive).
func keepAlive(c net.Conn, d time.Duration) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: d, Interval: d / 2, Count: 3})
	}
}

// Close stops the server: the listener and the current connection close;
// learned routes stay in the FIB. Closing twice is a no-op.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	cur := s.cur
	if s.stale != nil {
		s.stale.Stop()
	}
	s.mu.Unlock()
	err := s.ln.Close()
	s.diag.Close()
	if cur != nil {
		cur.conn.Close()
	}
	s.wg.Wait()
	return err
}

// startSession registers a session for a new connection with the next mark.
func (s *Server) startSession(c net.Conn, p peer) (*session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false
	}
	if s.stale != nil {
		s.stale.Stop()
		s.stale = nil
	}
	s.mark++
	if s.mark == staleMark {
		s.mark++
	}
	sess := &session{s: s, conn: c, peer: p, done: make(chan struct{}), start: time.Now(),
		tr: NewTranslator(fib.OwnerFPM, s.mark, s.opts.Iface, &s.stats.C)}
	sess.tr.KeepKernelProto = s.opts.KeepKernelProto
	sess.lastMsg, sess.inLast = sess.start, sess.start
	tx := s.opts.FIB.Begin(1)
	// Marks wrap: routes still carrying this mark were last confirmed 255
	// sessions ago. They are stale for this session like any other's.
	reused := tx.RemarkLearned(fib.OwnerFPM, s.mark, staleMark)
	sess.stale = tx.StaleProtos(fib.OwnerFPM, s.mark)
	if reused > 0 {
		tx.Commit()
	} else {
		tx.Abort()
	}
	s.cur = sess
	s.stats.Connected.Store(true)
	s.stats.Connections.Add(1) // after Connected: who sees the count sees the session live or ended
	s.log.Info("fpm: zebra connected", "peer", p, "mark", s.mark, "stale_protocols", fmt.Sprint(sess.stale))
	return sess, true
}

// endSession drops a finished session's nexthop ids and arms the stale
// timer.
func (s *Server) endSession(sess *session, why error) {
	tx := s.opts.FIB.Begin(1)
	sess.tr.Close(tx)
	tx.Commit()
	s.mu.Lock()
	if s.cur == sess {
		s.cur = nil
		s.stats.Connected.Store(false)
	}
	if !s.closed && s.opts.StaleTime > 0 {
		if s.stale != nil {
			s.stale.Stop()
		}
		s.stale = time.AfterFunc(s.opts.StaleTime, s.flushStale)
	}
	s.mu.Unlock()
	s.log.Info("fpm: connection closed", "remote", sess.conn.RemoteAddr(), "reason", why,
		"session", time.Since(sess.start).Round(time.Millisecond))
	close(sess.done)
}

// flushStale removes every learned route when no session followed a lost
// one within StaleTime.
func (s *Server) flushStale() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil || s.closed {
		return
	}
	tx := s.opts.FIB.Begin(s.opts.FIB.Size())
	n := tx.DropLearned(fib.OwnerFPM)
	tx.Commit()
	s.stats.StaleFlushes.Add(1)
	s.stats.SweptRoutes.Add(uint64(n))
	s.log.Warn("fpm: no zebra session since the last one ended: removed its routes", "after", s.opts.StaleTime, "routes", n)
}

// sweep removes the routes that the session did not install or confirm.
func (s *Server) sweep(sess *session, why string) {
	f := s.opts.FIB
	probe := f.Begin(1)
	all, marked := probe.LearnedCount(fib.OwnerFPM, sess.tr.Mark)
	probe.Abort()
	n := 0
	if stale := all - marked; stale > 0 {
		hint := stale
		if stale > f.Size()/16 {
			hint = f.Size() // in place: many deletions
		}
		tx := f.Begin(hint)
		n = tx.SweepLearnedIn(fib.OwnerFPM, sess.tr.Mark, sess.tr.Replayed)
		tx.Commit()
	}
	s.stats.Sweeps.Add(1)
	s.stats.SweptRoutes.Add(uint64(n))
	s.log.Info("fpm: swept the routes zebra did not replay", "trigger", why, "removed", n, "kept", marked,
		"after", time.Since(sess.start).Round(time.Millisecond),
		"max_batch", time.Duration(s.stats.MaxBatchNanos.Load()).Round(time.Millisecond),
		"batches", s.stats.Batches.Load(), "bulk_batches", s.stats.BulkBatches.Load())
}
