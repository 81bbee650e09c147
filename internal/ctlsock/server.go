// Package ctlsock is the daemon's control socket: a unix stream socket
// (mode 0600) taking config lines (applied as one all-or-nothing batch by
// internal/apply, with the config file's checks) and queries (route
// show/get, fdb, vlan, neigh, link, address, nexthop, stats, reload,
// answered by internal/show), and the client `netfwd ctl` uses (Do).
//
// Protocol: one request per connection. The client writes one JSON object
// {"lines": [...], "json": bool} and shuts its write side; the server
// answers {"output": "...", "errors": ["ctl:N: reason"], "ok": bool,
// "status": N} and closes. Errors name the line of the request (from 1).
// ok is false when the request was refused (errors say why: `netfwd ctl`
// exits 1); status, when the request was served, is the exit status of its
// queries as `ip` gives it: 0, or non-zero when a query's answer is a
// failure (`route get` with no usable route: 2; show.Failed), so that
// scripts can tell; absent (0) from daemons older than the field.
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
	// Reload re-reads the daemon's config file (nil: `reload` refused).
	Reload func() error
	// Apply applies a request's configuration lines (nil: Ctl.Apply). The
	// daemon's opens the ports they newly name and makes the kernel follow
	// them (link state, MTU: internal/daemon ctlapply.go, linkmtu.go).
	Apply func(cmds []config.Command) error
	// Flush runs a `route flush` / `neigh flush` line (nil: FlushSteps
	// applied through Ctl). The daemon's refuses it while a hot restart
	// holds the daemon and journals it as other ctl changes (flush.go).
	Flush func(cmd config.Command) error
	// Monitor serves `monitor` (nil: refused); Server.Close closes it.
	Monitor *Monitor
	// Capture serves `capture` (nil: refused): it writes pcap to w
	// (flush sends what is written; gone closes when the client goes) and
	// returns notes for the client's stderr (capture.go).
	Capture func(q config.Capture, w io.Writer, flush func() error, gone <-chan struct{}) ([]string, error)
	// Trace serves `trace` (nil: refused): each traced frame's decisions,
	// text or JSON lines, as the frames come (trace.go in the daemon).
	Trace func(q config.Trace, w io.Writer, asJSON bool, flush func() error, gone <-chan struct{}) ([]string, error)
	// RingDrops are the frames port dev's receive rings lost (nil: none),
	// `-s link`'s RX missed (show.RingDropper).
	RingDrops func(dev string) uint64
}

// state is what queries read: the controller, with the ports' ring drops
// when the handler has them.
func (h Handler) state() show.State {
	if h.RingDrops == nil {
		return h.Ctl
	}
	return ringState{h.Ctl, h.RingDrops}
}

// ringState is a controller with its ports' ring drops (show.RingDropper).
type ringState struct {
	*apply.Controller
	drops func(dev string) uint64
}

func (s ringState) RingDrops(dev string) uint64 { return s.drops(dev) }

// apply applies cmds through Apply, or the Controller.
func (h Handler) apply(cmds []config.Command) error {
	if h.Apply != nil {
		return h.Apply(cmds)
	}
	return h.Ctl.Apply(cmds)
}

// Server serves a control socket.
type Server struct {
	sock *SocketFile
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
	return listen(path, h, listenSocket)
}

// ListenReplacing is Listen for a hot restart's new daemon: its socket
// takes the name over from the running daemon's (ListenUnixReplacing)
// instead of refusing a live one.
func ListenReplacing(path string, h Handler) (*Server, error) {
	return listen(path, h, ListenUnixReplacing)
}

// ListenAside is ListenReplacing in two steps: the socket listens under a
// temporary name until Install renames it over path (a hot restart's new
// daemon: the running one keeps the name until the takeover is decided).
func ListenAside(path string, h Handler) (*Server, error) {
	return listen(path, h, ListenUnixAside)
}

// Install puts a socket ListenAside made under its path.
func (s *Server) Install() error { return s.sock.Install() }

func listen(path string, h Handler, open func(string) (*SocketFile, error)) (*Server, error) {
	sock, err := open(path)
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
	if s.h.Monitor != nil {
		s.h.Monitor.Close() // monitor streams end, so their connections do
	}
	return s.sock.close()
}

func (s *Server) serveConn(c net.Conn) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(s.ReadTimeout))
	dw := &deadlineWriter{c: c, d: s.WriteTimeout, total: s.AnswerTimeout}
	rw := newResponseWriter(dw, answerBuffer)
	var req Request
	if err := json.NewDecoder(io.LimitReader(c, maxRequest)).Decode(&req); err != nil {
		rw.finish([]string{"ctl: bad request: " + err.Error()})
		return
	}
	// A monitor streams until the client goes: no deadline for the whole
	// answer, and the end of the client's side (it keeps it open while it
	// listens) ends the stream.
	rw.monitorStart = func() <-chan struct{} {
		dw.total = 1<<63 - 1
		dw.end = time.Time{}
		c.SetReadDeadline(time.Time{})
		done := make(chan struct{})
		go func() {
			io.Copy(io.Discard, c)
			close(done)
		}()
		return done
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
	text string // the line as written (a flush is journaled as it)
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
	var mon *query
	for i, line := range req.Lines {
		pos := config.Pos{File: "ctl", Line: i + 1}
		cmd, ok, err := config.ParseLine(pos, line)
		switch {
		case err != nil:
			errs.Add(&config.Error{Pos: pos, Err: err})
		case !ok:
		case cmd.Query != nil:
			switch cmd.Query.(type) {
			case config.Monitor, config.Capture, config.Trace:
				if mon != nil {
					errs.Add(&config.Error{Pos: pos, Err: fmt.Errorf("%s: one stream per request", cmd.Query.Name())})
				}
				mon = &query{i + 1, cmd.Text, cmd.Query, cmd.JSON || req.JSON}
				continue
			}
			queries = append(queries, query{i + 1, cmd.Text, cmd.Query, cmd.JSON || req.JSON})
		default:
			cmds = append(cmds, cmd)
		}
	}
	if errs.Len() == 0 && len(cmds) > 0 {
		if err := h.apply(cmds); err != nil {
			addJoined(&errs, err)
		}
	}
	if errs.Len() > 0 {
		rw.finish(errorStrings(&errs))
		return
	}
	status := 0   // the worst exit status of a query answered with a failure
	held := false // an answer slot, taken for the first answer rendered (not for reload)
	defer func() {
		if held {
			<-slots
		}
	}()
	for _, q := range queries {
		switch qq := q.q.(type) {
		case config.Reload:
			if h.Reload == nil {
				errs.Add(fmt.Errorf("ctl:%d: reload: no config file to reload", q.line))
			} else if err := h.Reload(); err != nil {
				addJoined(&errs, err)
			}
			continue
		case config.RouteFlush, config.NeighFlush:
			if err := h.flush(config.Command{Pos: config.Pos{File: "ctl", Line: q.line}, Text: q.text, Query: qq}); err != nil {
				addJoined(&errs, err)
			}
			continue
		}
		if slots != nil && !held {
			slots <- struct{}{}
			held = true
		}
		if err := show.Answer(rw, h.state(), q.q, q.json); err != nil {
			if rw.err != nil {
				return // the client is gone or stopped reading: drop it
			}
			var f *show.Failed
			if errors.As(err, &f) { // answered: the failure is the answer
				status = max(status, f.Status)
				continue
			}
			errs.Add(fmt.Errorf("ctl:%d: %v", q.line, err))
		}
	}
	if mon != nil && errs.Len() == 0 {
		if held {
			<-slots // a monitor never holds an answer slot
			held = false
		}
		cq, capture := mon.q.(config.Capture)
		tq, trace := mon.q.(config.Trace)
		switch {
		case trace && (h.Trace == nil || rw.monitorStart == nil):
			errs.Add(fmt.Errorf("ctl:%d: trace: only on the control socket of a running daemon", mon.line))
		case trace:
			notes, err := h.Trace(tq, rw, mon.json, rw.flush, rw.monitorStart())
			if rw.err != nil {
				return
			}
			if err != nil {
				errs.Add(fmt.Errorf("ctl:%d: %v", mon.line, err))
			}
			rw.notes = notes
		case capture && (len(queries) > 0 || len(cmds) > 0):
			errs.Add(fmt.Errorf("ctl:%d: capture: its pcap is the whole answer: send it alone", mon.line))
		case capture && (h.Capture == nil || rw.monitorStart == nil):
			errs.Add(fmt.Errorf("ctl:%d: capture: only on the control socket of a running daemon", mon.line))
		case capture:
			// The pcap travels as base64 lines in the output string
			// (binary.go); `netfwd ctl capture` decodes it.
			enc := &binaryEncoder{w: rw}
			flush := func() error {
				if err := enc.line(); err != nil {
					return err
				}
				return rw.flush()
			}
			notes, err := h.Capture(cq, enc, flush, rw.monitorStart())
			enc.line()
			if rw.err != nil {
				return
			}
			if err != nil {
				errs.Add(fmt.Errorf("ctl:%d: %v", mon.line, err))
			}
			rw.notes = notes
		case h.Monitor == nil || rw.monitorStart == nil:
			errs.Add(fmt.Errorf("ctl:%d: monitor: only on the control socket of a running daemon", mon.line))
		default:
			h.Monitor.stream(rw, mon.q.(config.Monitor), mon.json, rw.monitorStart())
			if rw.err != nil {
				return
			}
		}
	}
	rw.status = status
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
