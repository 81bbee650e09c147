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
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/netfwd/netfwd/internal/ctlsock"
	"golang.org/x/sys/unix"
)

// PauseTimeout bounds how long a paused process waits for done before it
// resumes forwarding.
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
	// Resume forwards again after a Pause whose successor failed.
	Resume()
	// Finish is called once the successor forwards: the process exits.
	Finish()
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

// claim makes connection conn (0: Hold) of pid the holder if there is
// none; it returns the pid holding the server, and whether that is conn.
func (s *Server) claim(conn uint64, pid int) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holder.pid == 0 {
		s.holder.pid, s.holder.conn = pid, conn
	}
	return s.holder.pid, s.holder.conn == conn && s.holder.pid == pid
}

// release ends the hold of connection conn (0: Hold) of pid.
func (s *Server) release(conn uint64, pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holder.pid == pid && s.holder.conn == conn {
		s.holder.pid, s.holder.conn = 0, 0
	}
}

// serveConn runs one connection's exchange: a successor's, or the refusal
// of one while another's restart is in progress.
func (s *Server) serveConn(c *net.UnixConn, id uint64) {
	cred, err := peerCred(c)
	if err == nil && cred.Uid != 0 {
		err = fmt.Errorf("peer uid %d (pid %d) is not root", cred.Uid, cred.Pid)
	}
	if err != nil {
		s.log("handover: refused", "err", err)
		return
	}
	pid := int(cred.Pid)
	r := bufio.NewReader(c)
	enc := json.NewEncoder(c)
	dec := json.NewDecoder(r)
	held, paused, finished := false, false, false
	defer func() {
		if paused {
			s.log("handover: the successor went away after pause; forwarding again")
			s.src.Resume()
		}
		if held && !finished {
			s.release(id, pid)
		}
	}()
	for {
		switch {
		case paused:
			c.SetReadDeadline(time.Now().Add(PauseTimeout))
		case held: // the successor builds its engine: as long as it takes
			c.SetReadDeadline(time.Time{})
		default:
			c.SetReadDeadline(time.Now().Add(requestTimeout))
		}
		var req request
		if err := dec.Decode(&req); err != nil {
			return
		}
		if !held && req.Op != "prepare" {
			enc.Encode(doneReply{Error: fmt.Sprintf("%s before prepare", req.Op)})
			return
		}
		switch req.Op {
		case "prepare":
			if held {
				enc.Encode(Prepared{Error: "prepare twice"})
				return
			}
			if h, ours := s.claim(id, pid); !ours {
				busy := &BusyError{PID: h}
				s.log("handover: refused a successor", "pid", pid, "err", busy)
				enc.Encode(Prepared{Busy: h, Error: busy.Error()})
				return
			}
			held = true
			p, err := s.src.Prepare()
			if err != nil {
				p = Prepared{Error: err.Error()}
			}
			if enc.Encode(p) != nil || err != nil {
				return
			}
		case "pause":
			if paused {
				return
			}
			t0 := time.Now()
			p, err := s.src.Pause()
			paused = true
			if err != nil {
				p = Paused{Error: err.Error()}
			}
			p.Took = time.Since(t0)
			if enc.Encode(p) != nil || err != nil {
				return
			}
		case "done":
			if !paused {
				enc.Encode(doneReply{Error: "done before pause"})
				return
			}
			paused, finished = false, true // held for good: the process is finishing
			enc.Encode(doneReply{})
			s.src.Finish()
			return
		default:
			enc.Encode(doneReply{Error: fmt.Sprintf("unknown op %q", req.Op)})
			return
		}
	}
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
