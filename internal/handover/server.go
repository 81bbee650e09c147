package handover

// The running process's side: a listener on Path that serves successors
// one at a time, calling its Source.
//
// One at a time: each connection is served on its own goroutine, and the
// first to ask prepare holds the daemon (holder: its pid, from the
// socket's peer credentials) until its connection ends, or for good once
// it took over. Any other successor's prepare meanwhile is answered at
// once with a refusal naming the holder (Prepared.Busy: "another restart
// (pid N) is in progress"), instead of waiting behind it and then finding
// the socket gone with the process that handed over (`read: connection
// reset by peer`). Hold does the same for a daemon that is itself still
// taking over from its predecessor.
//
// Locking: mu guards closed and holder; only the holder's goroutine calls
// the Source; Close, Hold and Release from anywhere.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/netfwd/netfwd/internal/ctlsock"
	"golang.org/x/sys/unix"
)

// CommitTimeout bounds how long a paused daemon waits for its successor's
// commit (protocol 1.1) before it forwards again, from its answer to
// pause. In between the successor only continues the rings where they
// stopped and builds its AF_XDP workers around the old ones: pause to the
// first read took 0.7-24 ms in the measurements (docs/reliability.md,
// "Hot restart"). 500 ms is 20 times the worst of them, and what a stalled
// successor costs the router, at most, beyond the pause (the rings hold the
// first tens of milliseconds of it). A successor that misses it only fails
// its restart: the old daemon forwards on.
const CommitTimeout = 500 * time.Millisecond

// PauseTimeout bounds how long a paused daemon waits for done from a
// successor that speaks protocol 1.0, which has no commit and reads the
// rings right after pause: the old daemon resumes only when it is sure
// the successor is gone, or after this long.
const PauseTimeout = 10 * time.Second

// requestTimeout bounds the wait for a connection's first request (a
// successor asks prepare as soon as it connected; `netfwd restart` only
// connects to learn the daemon's pid).
const requestTimeout = 10 * time.Second

// Source is what the running daemon offers a successor.
type Source interface {
	// Prepare describes the ports and listeners to take over.
	Prepare() (Prepared, error)
	// Pause stops reading the rings and reports the positions.
	Pause() (Paused, error)
	// Yield: the successor reads the rings from now on (it committed, or
	// speaks 1.0 and was answered pause); this process only waits, and
	// must leave the CPU to the successor's workers. committed: for good
	// (Resume never follows), so this process may let go of the rings'
	// sockets; false for a 1.0 successor, which may still fail before
	// done and leave them to this process.
	Yield(committed bool)
	// Resume forwards again after a Pause whose successor failed (before
	// it committed). Never after a commit.
	Resume()
	// Finish is called once the successor took the rings over, with nil
	// after its done (it forwards), or with why its connection ended after
	// it committed (it took the rings and failed): the process exits,
	// in error for the latter.
	Finish(err error)
}

// Server listens for a successor.
type Server struct {
	sock *ctlsock.SocketFile
	ln   *net.UnixListener
	src  Source
	log  func(msg string, args ...any)

	mu     sync.Mutex
	closed bool // guarded by mu
	// holder is the restart in progress: the pid of the successor (from
	// its prepare to the end of its connection, conn; for good once it
	// took over), or the pid Hold gave (conn 0); pid 0: none. Guarded by mu.
	holder struct {
		pid  int
		conn uint64
		// final: the holder committed; the hold ends only with this
		// process, so a prepare is refused at once instead of waiting
		// claimWait for an end that comes as the process exits (the
		// waiting successor then read EOF, not the refusal).
		final bool
	}
	conns uint64 // connections accepted, numbering them; guarded by mu
}

// Listen creates the handover socket at path (root only, 0600), replacing
// a predecessor's file: a new process takes the name over by rename, so a
// client always finds the newest daemon.
func Listen(path string, src Source, log func(string, ...any)) (*Server, error) {
	sock, err := ctlsock.ListenUnixReplacing(path)
	if err != nil {
		return nil, err
	}
	return &Server{sock: sock, ln: sock.Listener(), src: src, log: log}, nil
}

// ListenAside is Listen in two steps: the socket listens under a
// temporary name until Install renames it over path. A hot restart's new
// daemon takes the name over only once the running one committed: a
// successor that gives up before leaves the old daemon's socket in place.
func ListenAside(path string, src Source, log func(string, ...any)) (*Server, error) {
	sock, err := ctlsock.ListenUnixAside(path)
	if err != nil {
		return nil, err
	}
	return &Server{sock: sock, ln: sock.Listener(), src: src, log: log}, nil
}

// Install puts a socket ListenAside made under its path.
func (s *Server) Install() error { return s.sock.Install() }

// Serve answers successors until Close (after a takeover too: later
// ones are refused until the process is gone).
func (s *Server) Serve() {
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		s.mu.Lock()
		s.conns++
		id := s.conns
		s.mu.Unlock()
		go func() {
			defer c.Close()
			s.serveConn(c, id)
		}()
	}
}

// Hold refuses successors as if a restart by pid were in progress, until
// Release (a daemon still taking over holds its own server: it is not
// ready to hand over before its predecessor is gone). A successor already
// holding the server keeps it.
func (s *Server) Hold(pid int) {
	s.claim(0, pid)
}

// Release ends Hold(pid).
func (s *Server) Release(pid int) {
	s.release(0, pid)
}

// claimWait is how long a prepare waits for a hold to end before it is
// refused: a successor whose connection just closed is released only when
// its goroutine reads the end, and one that dials again at once (a retry
// after a failed restart) must not be told that its own last attempt is in
// progress.
const claimWait = 250 * time.Millisecond

// claim makes connection conn (0: Hold) of pid the holder if there is
// none, waiting up to claimWait for a hold to end; it returns the pid
// holding the server, and whether that is conn.
func (s *Server) claim(conn uint64, pid int) (int, bool) {
	deadline := time.Now().Add(claimWait)
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.holder.pid != 0 && !s.holder.final && conn != 0 && time.Now().Before(deadline) {
		s.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		s.mu.Lock()
	}
	if s.holder.pid == 0 {
		s.holder.pid, s.holder.conn, s.holder.final = pid, conn, false
	}
	return s.holder.pid, s.holder.conn == conn && s.holder.pid == pid
}

// holdForGood marks the hold of connection conn of pid final (it
// committed: the hold lasts as long as this process), or not (the commit's
// answer was not written).
func (s *Server) holdForGood(conn uint64, pid int, final bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holder.pid == pid && s.holder.conn == conn {
		s.holder.final = final
	}
}

// release ends the hold of connection conn (0: Hold) of pid.
func (s *Server) release(conn uint64, pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holder.pid == pid && s.holder.conn == conn {
		s.holder.pid, s.holder.conn, s.holder.final = 0, 0, false
	}
}

// serveConn runs one connection's exchange: a successor's, or the refusal
// of one while another's restart is in progress (or that speaks another
// major version).
func (s *Server) serveConn(c *net.UnixConn, id uint64) {
	cred, err := peerCred(c)
	if err == nil && cred.Uid != 0 {
		err = fmt.Errorf("peer uid %d (pid %d) is not root", cred.Uid, cred.Pid)
	}
	if err != nil {
		s.log("handover: refused", "err", err)
		return
	}
	x := &exchange{s: s, c: c, id: id, pid: int(cred.Pid), enc: json.NewEncoder(c), dec: json.NewDecoder(bufio.NewReader(c))}
	defer x.end()
	for x.next() {
	}
}

// exchange is one successor's connection and where it stands: held
// (prepared) -> paused -> committed (1.1 successors) -> finished. paused
// is the only state in which its end resumes forwarding; committed is
// left only by finishing (the old daemon never reads a ring again once it
// answered commit: see the package comment). One goroutine.
type exchange struct {
	s                   *Server
	c                   *net.UnixConn
	id                  uint64
	pid                 int // the successor's
	enc                 *json.Encoder
	dec                 *json.Decoder
	peer                Version // the successor's, from prepare
	held                bool
	paused              bool
	pausedAt            time.Time // when the pause began to hold
	committed, finished bool
}

// end resumes forwarding (paused), or finishes in error (committed without
// done), and lets the next successor in unless the process finishes.
func (x *exchange) end() {
	switch {
	case x.paused:
		x.s.src.Resume()
	case x.committed && !x.finished:
		// The successor took the rings and its connection ended without
		// done: it crashed (or closed it). This process cannot continue
		// rings another process read.
		x.finished = true
		x.s.src.Finish(fmt.Errorf("hot restart: the new process (pid %d) went away after it took the ports over, before it confirmed it forwards", x.pid))
	}
	if x.held && !x.finished {
		x.s.release(x.id, x.pid)
	}
}

// next reads and answers one request; false ends the exchange.
func (x *exchange) next() bool {
	switch {
	case x.paused && x.peer.Has(1):
		x.c.SetReadDeadline(x.pausedAt.Add(CommitTimeout))
	case x.paused:
		x.c.SetReadDeadline(time.Now().Add(PauseTimeout))
	case x.held: // the successor builds its engine, or catches up: as long as it takes
		x.c.SetReadDeadline(time.Time{})
	default:
		x.c.SetReadDeadline(time.Now().Add(requestTimeout))
	}
	var req request
	if err := x.dec.Decode(&req); err != nil {
		switch {
		case x.paused && errors.Is(err, os.ErrDeadlineExceeded) && x.peer.Has(1):
			x.s.log("handover: the successor did not commit within the deadline after pause (stalled?); forwarding again, its restart fails",
				"pid", x.pid, "deadline", CommitTimeout, "since_pause", time.Since(x.pausedAt).Round(time.Millisecond))
		case x.paused:
			x.s.log("handover: the successor went away after pause (or said nothing); forwarding again", "pid", x.pid, "err", err)
		case x.committed:
			x.s.log("handover: the successor went away after it committed, before done; exiting: the rings are its now", "pid", x.pid, "err", err)
		}
		return false
	}
	if !x.held && req.Op != "prepare" {
		x.enc.Encode(doneReply{Error: fmt.Sprintf("%s before prepare", req.Op)})
		return false
	}
	switch req.Op {
	case "prepare":
		return x.prepare(req)
	case "pause":
		return x.pause()
	case "commit":
		return x.commit()
	case "done":
		return x.done()
	}
	x.enc.Encode(doneReply{Error: fmt.Sprintf("unknown op %q", req.Op)})
	return false
}

// prepare checks the successor's version, holds the daemon for it (or
// refuses it: another restart is in progress) and answers what the daemon
// holds.
func (x *exchange) prepare(req request) bool {
	if x.held {
		x.enc.Encode(Prepared{Version: Protocol.String(), Error: "prepare twice"})
		return false
	}
	v, err := ParseVersion(req.Version)
	if err == nil && !Protocol.Compatible(v) {
		err = &VersionError{This: v, Running: Protocol}
	}
	if err != nil {
		x.s.log("handover: refused a successor", "pid", x.pid, "err", err)
		x.enc.Encode(Prepared{Version: Protocol.String(), Error: err.Error()})
		return false
	}
	x.peer = v
	if h, ours := x.s.claim(x.id, x.pid); !ours {
		busy := &BusyError{PID: h}
		x.s.log("handover: refused a successor", "pid", x.pid, "err", busy)
		x.enc.Encode(Prepared{Version: Protocol.String(), Busy: h, Error: busy.Error()})
		return false
	}
	x.held = true
	p, err := x.s.src.Prepare()
	if err != nil {
		p = Prepared{Error: err.Error()}
	}
	p.Version = Protocol.String()
	return x.enc.Encode(p) == nil && err == nil
}

// pause parks the workers and answers the ring positions; from here the
// commit (1.1) or done (1.0) is waited for.
func (x *exchange) pause() bool {
	if x.paused || x.committed {
		return false
	}
	t0 := time.Now()
	p, err := x.s.src.Pause() // resumes by itself when it fails
	x.paused, x.pausedAt = err == nil, time.Now()
	if err != nil {
		p = Paused{Error: err.Error()}
	}
	p.Took = x.pausedAt.Sub(t0)
	// The answer is large with AF_XDP (each worker's frames): a successor
	// that stalls while it reads it must not hold this process paused
	// either. Not written whole, it is no answer.
	if x.peer.Has(1) {
		x.c.SetWriteDeadline(x.pausedAt.Add(CommitTimeout))
	} else {
		x.c.SetWriteDeadline(x.pausedAt.Add(PauseTimeout))
	}
	if err := x.enc.Encode(p); err != nil {
		if x.paused {
			x.s.log("handover: the successor did not read the answer to pause; forwarding again", "pid", x.pid, "err", err)
		}
		return false
	}
	x.c.SetWriteDeadline(time.Time{})
	if x.paused && !x.peer.Has(1) {
		x.s.src.Yield(false) // 1.0: the successor reads from now on
	}
	return x.paused
}

// commit decides, once: from here this process never reads a ring again.
func (x *exchange) commit() bool {
	if !x.paused || !x.peer.Has(1) {
		x.enc.Encode(commitReply{Error: "commit before pause"})
		return false
	}
	x.paused, x.committed = false, true // the end no longer resumes
	// Final before the answer: a prepare that comes once the successor
	// has read it must find the hold final (CI caught a test's check
	// between the answer and this).
	x.s.holdForGood(x.id, x.pid, true)
	if err := x.enc.Encode(commitReply{Committed: true}); err != nil {
		// Not written: the successor's end is gone, so it never read the
		// answer, and it reads no ring without it.
		x.paused, x.committed = true, false
		x.s.holdForGood(x.id, x.pid, false)
		x.s.log("handover: the successor went away as it committed; forwarding again", "pid", x.pid, "err", err)
		return false
	}
	x.s.src.Yield(true)
	return true
}

// done: the successor forwards; this process finishes (held for good).
func (x *exchange) done() bool {
	if !x.committed && (!x.paused || x.peer.Has(1)) {
		what := "pause"
		if x.peer.Has(1) {
			what = "commit"
		}
		x.enc.Encode(doneReply{Error: "done before " + what})
		return false
	}
	x.paused, x.committed, x.finished = false, false, true
	x.enc.Encode(doneReply{})
	x.s.src.Finish(nil)
	return false
}

// Close stops listening; the socket file goes only if it is still ours
// (a successor renamed its own over it).
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	return s.sock.Close()
}

// peerCred is the client's credentials: only root may be a successor (it
// takes every socket of the router); the pid names its restart.
func peerCred(c *net.UnixConn) (*unix.Ucred, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, cerr
}

// Holder is the pid of the successor whose restart is in progress (the
// holder of the daemon, Hold's pid included), 0 when none: the daemon
// refuses configuration changes meanwhile (the journal a successor got at
// prepare is final).
func (s *Server) Holder() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holder.pid
}
