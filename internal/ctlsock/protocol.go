package ctlsock

// The protocol: one JSON request, one JSON response per connection, and
// the response writer that streams the output into the response's JSON
// string as the answers are rendered.
//
// The response object is written in the order output, errors, ok, so that
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
}

// responseWriter writes one Response as a stream: Write appends to the
// output string (JSON-escaped on the fly), finish closes the object.
type responseWriter struct {
	bw      *bufio.Writer
	started bool
	err     error // the first write error: the client is gone or too slow
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
	return len(p), r.flushErr()
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

// finish writes the errors and the outcome and flushes.
func (r *responseWriter) finish(errs []string) error {
	if r.err != nil {
		return r.err
	}
	r.start()
	if errs == nil {
		errs = []string{}
	}
	b, _ := json.Marshal(errs)
	r.bw.WriteString(`","errors":`)
	r.bw.Write(b)
	r.bw.WriteString(`,"ok":` + strconv.FormatBool(len(errs) == 0) + "}\n")
	if err := r.bw.Flush(); err != nil {
		r.err = err
	}
	return r.err
}
