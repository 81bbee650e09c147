// Package ctlsock is the daemon's control socket: a unix stream socket
// (mode 0600) taking config lines (applied as one all-or-nothing batch by
// internal/apply, with the config file's checks) and queries (route
// show/get, fdb, vlan, neigh, link, address, nexthop, stats, reload,
// answered by internal/show), and the client `netfwd ctl` uses (Do).
//
// Protocol: one request per connection. The client writes one JSON object
// {"lines": [...], "json": bool} and shuts its write side; the server
// answers {"output": "...", "errors": ["ctl:N: reason"], "ok": bool} and
// closes. Errors name the line of the request (from 1).
//
// Flow of a request: every line is read by internal/config (position
// ctl:N), the one reader of configuration and queries; when all lines
// parsed, the config lines are applied in one Controller.Apply (through the
// Handler's Apply when it has one); when that succeeded, the queries are
// answered in order, streamed into the response through a bounded buffer: a
// client that stops reading is dropped after WriteTimeout, and one request
// renders at a time (answerSlots), so clients that never read cannot make
// the daemon hold their answers in memory.
//
// Locking: each connection is served on its own goroutine; the controller
// serialises applies; queries read published state; answerSlots is a
// semaphore.
package ctlsock

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/netfwd/netfwd/internal/apply"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/show"
)

// maxRequest bounds a request (a few thousand route lines fit).
const maxRequest = 64 << 20

// Defaults of the server's limits.
const (
	DefaultReadTimeout   = 30 * time.Second // to receive the whole request
	DefaultWriteTimeout  = 5 * time.Second  // for each write of the answer
	DefaultAnswerTimeout = time.Minute      // for the whole answer
	// answerSlots is how many requests render answers at once: an answer
	// in flight holds a copy of the table it lists (about 1.5 times the
	// text), so this bounds the memory of answers whatever the number of
	// clients. Answers are quick; a client that stops reading loses its
	// slot after WriteTimeout, one that reads too slowly after AnswerTimeout.
	answerSlots  = 1
	answerBuffer = 32 << 10 // bytes buffered per connection
)

// Handler is what requests act on.
type Handler struct {
	Ctl *apply.Controller
	// Apply applies a request's config lines (nil: Ctl.Apply). The daemon
	// opens the ports they newly name and acts on the kernel's interfaces
	// around Ctl.Apply (internal/daemon, ctlapply.go).
	Apply func([]config.Command) error
	// Reload re-reads the daemon's config file (nil: `reload` refused).
	Reload func() error
}

// Server serves a control socket.
type Server struct {
	sock *socketFile
	h    Handler

	// ReadTimeout bounds reading the request, WriteTimeout each write of
	// the answer, AnswerTimeout the whole answer; set them before Serve.
	ReadTimeout, WriteTimeout, AnswerTimeout time.Duration

	slots chan struct{} // answerSlots tokens

	mu     sync.Mutex
	closed bool // guarded by mu
	wg     sync.WaitGroup
}

// Listen creates the socket at path with mode 0600. A stale socket left by
// a daemon that died is replaced; a socket somebody listens on, or anything
// at path that is not a socket, is an error naming the path (socket.go).
func Listen(path string, h Handler) (*Server, error) {
	sock, err := listenSocket(path)
	if err != nil {
		return nil, err
	}
	return &Server{sock: sock, h: h, ReadTimeout: DefaultReadTimeout, WriteTimeout: DefaultWriteTimeout,
		AnswerTimeout: DefaultAnswerTimeout, slots: make(chan struct{}, answerSlots)}, nil
}

// Serve accepts connections until Close.
func (s *Server) Serve() {
	for {
		c, err := s.sock.ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				s.wg.Wait()
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(c)
		}()
	}
}

// Close stops accepting and removes the socket file (only if it is still
// the one Listen created).
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	return s.sock.close()
}

func (s *Server) serveConn(c net.Conn) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(s.ReadTimeout))
	rw := newResponseWriter(&deadlineWriter{c: c, d: s.WriteTimeout, total: s.AnswerTimeout}, answerBuffer)
	var req Request
	if err := json.NewDecoder(io.LimitReader(c, maxRequest)).Decode(&req); err != nil {
		rw.finish([]string{"ctl: bad request: " + err.Error()})
		return
	}
	s.h.serve(req, rw, s.slots)
}

// deadlineWriter gives every write to the connection its own deadline: a
// client that reads steadily is served, one that stops reading is dropped
// after d; all of the answer must have gone out total after the first
// write.
type deadlineWriter struct {
	c     net.Conn
	d     time.Duration
	total time.Duration
	end   time.Time // set at the first write
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	now := time.Now()
	if w.end.IsZero() {
		w.end = now.Add(w.total)
	}
	dl := now.Add(w.d)
	if w.end.Before(dl) {
		dl = w.end
	}
	w.c.SetWriteDeadline(dl)
	return w.c.Write(p)
}

// Do handles one request in memory (the server's work, callable
// in-process).
func (h Handler) Do(req Request) Response {
	var b strings.Builder
	rw := newResponseWriter(&b, 4096)
	h.serve(req, rw, nil)
	var resp Response
	if err := json.Unmarshal([]byte(b.String()), &resp); err != nil {
		return Response{Errors: []string{"ctl: " + err.Error()}}
	}
	return resp
}

// query is a request's query line.
type query struct {
	line int
	q    config.Query
	json bool
}

// serve reads the request's lines, applies its configuration, answers its
// queries into rw. slots, when not nil, limits the requests answering at
// once.
func (h Handler) serve(req Request, rw *responseWriter, slots chan struct{}) {
	errs := config.ErrorList{File: "ctl"}
	var cmds []config.Command
	var queries []query
	for i, line := range req.Lines {
		pos := config.Pos{File: "ctl", Line: i + 1}
		cmd, ok, err := config.ParseLine(pos, line)
		switch {
		case err != nil:
			errs.Add(&config.Error{Pos: pos, Err: err})
		case !ok:
		case cmd.Query != nil:
			queries = append(queries, query{i + 1, cmd.Query, cmd.JSON || req.JSON})
		default:
			cmds = append(cmds, cmd)
		}
	}
	if errs.Len() == 0 && len(cmds) > 0 {
		apply := h.Ctl.Apply
		if h.Apply != nil {
			apply = h.Apply
		}
		if err := apply(cmds); err != nil {
			addJoined(&errs, err)
		}
	}
	if errs.Len() > 0 {
		rw.finish(errorStrings(&errs))
		return
	}
	held := false // an answer slot, taken for the first answer rendered (not for reload)
	defer func() {
		if held {
			<-slots
		}
	}()
	for _, q := range queries {
		if _, ok := q.q.(config.Reload); ok {
			if h.Reload == nil {
				errs.Add(fmt.Errorf("ctl:%d: reload: no config file to reload", q.line))
			} else if err := h.Reload(); err != nil {
				addJoined(&errs, err)
			}
			continue
		}
		if slots != nil && !held {
			slots <- struct{}{}
			held = true
		}
		if err := show.Answer(rw, h.Ctl, q.q, q.json); err != nil {
			if rw.err != nil {
				return // the client is gone or stopped reading: drop it
			}
			errs.Add(fmt.Errorf("ctl:%d: %v", q.line, err))
		}
	}
	rw.finish(errorStrings(&errs))
}

// addJoined adds the errors of an errors.Join one by one.
func addJoined(l *config.ErrorList, err error) {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			addJoined(l, e)
		}
		return
	}
	l.Add(err)
}

// errorStrings renders the errors one per line of text.
func errorStrings(l *config.ErrorList) []string {
	var out []string
	for _, e := range l.Errors() {
		for line := range strings.SplitSeq(e.Error(), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				out = append(out, line)
			}
		}
	}
	return out
}

// RequestError is a request the daemon refused.
type RequestError struct {
	Errors []string
	Output string // what was answered before the failure, if anything
}

func (e *RequestError) Error() string { return strings.Join(e.Errors, "\n") }

// IsRequestError reports whether err is a refusal by the daemon.
func IsRequestError(err error) bool {
	var re *RequestError
	return errors.As(err, &re)
}
