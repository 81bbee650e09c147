// Package ctl is the daemon's control socket: a unix stream socket (mode
// 0600) taking config lines (applied as one all-or-nothing transaction with
// the config file's checks) and queries (route show/get, fdb, vlan, neigh,
// link, address, nexthop, stats), and the client `netfwd ctl` uses.
//
// Protocol: one request per connection. The client writes one JSON object
// {"lines": [...], "json": bool} and shuts its write side; the server
// answers {"ok": bool, "output": "...", "errors": ["ctl:N: reason"]} and
// closes. Errors name the line of the request (from 1).
//
// Flow of a request: every line is classified (query or config); the config
// lines are parsed as the file's lines (position ctl:N) and applied in one
// Controller.Apply; when that succeeded, the queries are answered in order.
//
// Locking: each connection is served on its own goroutine; the controller
// serialises applies; queries read published state.
package ctlsock

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/netfwd/netfwd/internal/apply"
	"github.com/netfwd/netfwd/internal/config"
)

// Request is what the client sends.
type Request struct {
	Lines []string `json:"lines"`
	JSON  bool     `json:"json"`
}

// Response is what the server answers.
type Response struct {
	OK     bool     `json:"ok"`
	Output string   `json:"output"`
	Errors []string `json:"errors"`
}

// maxRequest bounds a request (a few thousand route lines fit).
const maxRequest = 64 << 20

// Handler is what requests act on.
type Handler struct {
	Ctl *apply.Controller
	// Reload re-reads the daemon's config file (nil: `reload` refused).
	Reload func() error
}

// Server serves a control socket.
type Server struct {
	ln   net.Listener
	path string
	h    Handler

	mu     sync.Mutex
	closed bool // guarded by mu
	wg     sync.WaitGroup
}

// Listen creates the socket at path with mode 0600. A stale socket file (no
// daemon answering) is replaced; a live one is an error.
func Listen(path string, h Handler) (*Server, error) {
	if _, err := os.Stat(path); err == nil {
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: another daemon is listening", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	old := umask(0o177)
	ln, err := net.Listen("unix", path)
	umask(old)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(true)
	return &Server{ln: ln, path: path, h: h}, nil
}

// Serve accepts connections until Close.
func (s *Server) Serve() {
	for {
		c, err := s.ln.Accept()
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

// Close stops accepting and removes the socket file.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	return s.ln.Close()
}

func (s *Server) serveConn(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Minute))
	var req Request
	var resp Response
	if err := json.NewDecoder(io.LimitReader(c, maxRequest)).Decode(&req); err != nil {
		resp.Errors = []string{"ctl: bad request: " + err.Error()}
	} else {
		resp = s.h.Do(req)
	}
	json.NewEncoder(c).Encode(&resp)
}

// Do handles one request (the server's work, callable in-process).
func (h Handler) Do(req Request) Response {
	var resp Response
	var cmds []config.Command
	type query struct {
		line int
		q    *Query
	}
	var queries []query
	for i, line := range req.Lines {
		pos := config.Pos{File: "ctl", Line: i + 1}
		q, isQuery, err := ParseQuery(line)
		if err != nil {
			resp.Errors = append(resp.Errors, fmt.Sprintf("%s: %v", pos, err))
			continue
		}
		if isQuery {
			queries = append(queries, query{i + 1, q})
			continue
		}
		cmd, ok, err := config.ParseLine(pos, line)
		if err != nil {
			resp.Errors = append(resp.Errors, fmt.Sprintf("%s: %v", pos, err))
			continue
		}
		if ok {
			cmds = append(cmds, cmd)
		}
	}
	if len(resp.Errors) > 0 {
		return resp
	}
	if len(cmds) > 0 {
		if err := h.Ctl.Apply(cmds); err != nil {
			resp.Errors = splitErrors(err)
			return resp
		}
	}
	var out strings.Builder
	for _, q := range queries {
		if q.q.Kind == "reload" {
			if h.Reload == nil {
				resp.Errors = append(resp.Errors, fmt.Sprintf("ctl:%d: reload: no config file to reload", q.line))
				continue
			}
			if err := h.Reload(); err != nil {
				resp.Errors = append(resp.Errors, splitErrors(err)...)
			}
			continue
		}
		if err := q.q.Answer(&out, h.Ctl, req.JSON); err != nil {
			resp.Errors = append(resp.Errors, fmt.Sprintf("ctl:%d: %v", q.line, err))
		}
	}
	resp.Output = out.String()
	resp.OK = len(resp.Errors) == 0
	return resp
}

// splitErrors turns a joined error into one string per line.
func splitErrors(err error) []string {
	var out []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
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

// Do sends lines to the daemon at socket and returns its output. A refused
// request is a *RequestError; anything else is a connection problem.
func Do(socket string, lines []string, asJSON bool) (string, error) {
	c, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if err := json.NewEncoder(c).Encode(Request{Lines: lines, JSON: asJSON}); err != nil {
		return "", err
	}
	if uc, ok := c.(*net.UnixConn); ok {
		uc.CloseWrite()
	}
	var resp Response
	if err := json.NewDecoder(c).Decode(&resp); err != nil {
		return "", fmt.Errorf("reading the daemon's answer: %w", err)
	}
	if !resp.OK {
		if len(resp.Errors) == 0 {
			resp.Errors = []string{"ctl: request failed"}
		}
		return resp.Output, &RequestError{Errors: resp.Errors, Output: resp.Output}
	}
	return resp.Output, nil
}

// IsRequestError reports whether err is a refusal by the daemon.
func IsRequestError(err error) bool {
	var re *RequestError
	return errors.As(err, &re)
}
