package handover

// The running process's side: a listener on Path that serves successors
// one at a time, calling its Source.
//
// Locking: Serve's goroutine alone calls the Source; Close from anywhere.

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
	closed bool
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

// Serve answers successors until Close.
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
		finished := s.serveConn(c)
		c.Close()
		if finished {
			return
		}
	}
}

// serveConn runs one successor's exchange; it reports whether the
// successor took over (the process is finishing).
func (s *Server) serveConn(c *net.UnixConn) bool {
	if err := peerIsRoot(c); err != nil {
		s.log("handover: refused", "err", err)
		return false
	}
	r := bufio.NewReader(c)
	enc := json.NewEncoder(c)
	dec := json.NewDecoder(r)
	paused := false
	defer func() {
		if paused {
			s.log("handover: the successor went away after pause; forwarding again")
			s.src.Resume()
		}
	}()
	for {
		if paused {
			c.SetReadDeadline(time.Now().Add(PauseTimeout))
		} else {
			c.SetReadDeadline(time.Time{})
		}
		var req request
		if err := dec.Decode(&req); err != nil {
			return false
		}
		switch req.Op {
		case "prepare":
			p, err := s.src.Prepare()
			if err != nil {
				p = Prepared{Error: err.Error()}
			}
			if enc.Encode(p) != nil || err != nil {
				return false
			}
		case "pause":
			if paused {
				return false
			}
			t0 := time.Now()
			p, err := s.src.Pause()
			paused = true
			if err != nil {
				p = Paused{Error: err.Error()}
			}
			p.Took = time.Since(t0)
			if enc.Encode(p) != nil || err != nil {
				return false
			}
		case "done":
			if !paused {
				enc.Encode(doneReply{Error: "done before pause"})
				return false
			}
			paused = false
			enc.Encode(doneReply{})
			s.src.Finish()
			return true
		default:
			enc.Encode(doneReply{Error: fmt.Sprintf("unknown op %q", req.Op)})
			return false
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

// peerIsRoot refuses a client that is not root: a successor takes every
// socket of the router.
func peerIsRoot(c *net.UnixConn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	if cred.Uid != 0 {
		return fmt.Errorf("peer uid %d (pid %d) is not root", cred.Uid, cred.Pid)
	}
	return nil
}
