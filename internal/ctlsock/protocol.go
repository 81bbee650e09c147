package ctlsock

// The protocol: one JSON request, one JSON response per connection, and
// the response writer that streams the output into the response's JSON
// string as the answers are rendered.
//
// The response object is written in the order output, errors, ok, status, so that
// the output (possibly tens of megabytes) can go out while it is produced
// and the errors of the queries answered along the way follow it; JSON
// readers do not depend on the order of keys.
//
// Locking: a responseWriter belongs to one connection's goroutine.

import (
	"bufio"
	"encoding/json"
	"io"
	"strconv"
	"unicode/utf8"
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
	// Status is the exit status of the request's queries (server.go): 0,
	// or that of a query answered with a failure.
	Status int `json:"status,omitempty"`
	// Notes are for the client's stderr, beside an answer that is data
	// (capture: what was captured and dropped).
	Notes []string `json:"notes,omitempty"`
}

// responseWriter writes one Response as a stream: Write appends to the
// output string (JSON-escaped on the fly), finish closes the object.
type responseWriter struct {
	bw      *bufio.Writer
	started bool
	carry   []byte   // the start of a UTF-8 sequence that the next Write completes
	err     error    // the first write error: the client is gone or too slow
	status  int      // Response.Status, written by finish
	notes   []string // Response.Notes, written by finish
	// monitorStart, on a socket connection, lifts the answer's deadline
	// and returns a channel closed when the client goes (monitor).
	monitorStart func() <-chan struct{}
}

func newResponseWriter(w io.Writer, bufSize int) *responseWriter {
	return &responseWriter{bw: bufio.NewWriterSize(w, bufSize)}
}

func (r *responseWriter) start() {
	if !r.started {
		r.started = true
		r.bw.WriteString(`{"output":"`)
	}
}

// Write appends p to the output, escaped as encoding/json escapes strings
// (invalid UTF-8 becomes U+FFFD).
func (r *responseWriter) Write(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	r.start()
	n := len(p)
	if len(r.carry) > 0 {
		// Complete the sequence the last Write ended in the middle of.
		k := min(utf8.UTFMax-len(r.carry), len(p))
		head := append(r.carry, p[:k]...)
		r.carry = nil
		size := len(head)
		if utf8.FullRune(head) {
			_, size = utf8.DecodeRune(head)
		} else if k == len(p) {
			r.carry = head // still incomplete
			return n, r.flushErr()
		}
		used := size - (len(head) - k)
		if used <= 0 { // the carried bytes alone were invalid
			r.escape(head[:len(head)-k])
			used = 0
		} else {
			r.escape(head[:size])
		}
		p = p[used:]
	}
	// Keep an incomplete sequence at the end for the next Write.
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(p[i]) {
			if p[i] >= utf8.RuneSelf && !utf8.FullRune(p[i:]) {
				r.carry = append([]byte(nil), p[i:]...)
				p = p[:i]
			}
			break
		}
	}
	r.escape(p)
	return n, r.flushErr()
}

// escape writes p as the inside of a JSON string.
func (r *responseWriter) escape(p []byte) {
	bw := r.bw
	for i := 0; i < len(p); {
		c := p[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			j := i + 1
			for j < len(p) && p[j] >= 0x20 && p[j] != '"' && p[j] != '\\' && p[j] < utf8.RuneSelf {
				j++
			}
			bw.Write(p[i:j])
			i = j
			continue
		}
		switch c {
		case '"':
			bw.WriteString(`\"`)
		case '\\':
			bw.WriteString(`\\`)
		case '\n':
			bw.WriteString(`\n`)
		case '\t':
			bw.WriteString(`\t`)
		case '\r':
			bw.WriteString(`\r`)
		default:
			if c < 0x20 {
				bw.WriteString(`\u00`)
				bw.WriteByte("0123456789abcdef"[c>>4])
				bw.WriteByte("0123456789abcdef"[c&0xf])
				break
			}
			rn, size := utf8.DecodeRune(p[i:])
			switch {
			case rn == utf8.RuneError && size == 1:
				bw.WriteString(`\ufffd`)
			case rn == '\u2028' || rn == '\u2029':
				bw.WriteString(`\u202` + strconv.Itoa(int(rn&0xf)))
			default:
				bw.Write(p[i : i+size])
			}
			i += size
			continue
		}
		i++
	}
}

// flushErr notes a write error of the buffered writer (the buffer flushes
// to the connection whenever it fills).
func (r *responseWriter) flushErr() error {
	if r.err == nil {
		if _, err := r.bw.Write(nil); err != nil {
			r.err = err
		}
	}
	return r.err
}

// flush sends what is buffered (a monitor's events as they happen).
func (r *responseWriter) flush() error {
	if r.err == nil {
		if err := r.bw.Flush(); err != nil {
			r.err = err
		}
	}
	return r.err
}

// finish writes the errors and the outcome and flushes.
func (r *responseWriter) finish(errs []string) error {
	if r.err != nil {
		return r.err
	}
	r.start()
	r.escape(r.carry) // a sequence the output never completed: invalid
	r.carry = nil
	if errs == nil {
		errs = []string{}
	}
	b, _ := json.Marshal(errs)
	r.bw.WriteString(`","errors":`)
	r.bw.Write(b)
	r.bw.WriteString(`,"ok":` + strconv.FormatBool(len(errs) == 0))
	if r.status != 0 {
		r.bw.WriteString(`,"status":` + strconv.Itoa(r.status))
	}
	if len(r.notes) > 0 {
		nb, _ := json.Marshal(r.notes)
		r.bw.WriteString(`,"notes":`)
		r.bw.Write(nb)
	}
	r.bw.WriteString("}\n")
	if err := r.bw.Flush(); err != nil {
		r.err = err
	}
	return r.err
}
