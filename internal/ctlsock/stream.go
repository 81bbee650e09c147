package ctlsock

// The streaming client: `netfwd ctl` prints the daemon's output as it
// arrives instead of after the whole answer, which `monitor` needs (its
// answer never ends) and which keeps a large listing out of the client's
// memory. The server writes the response as `{"output":"` + the output,
// escaped as it is rendered + `","errors":[...],"ok":...}` (protocol.go);
// Stream unescapes the string on the fly and decodes the rest.
//
// The client keeps its write side open: the server reads one JSON object
// and does not need the end of it, and a monitor ends when the client's
// side does (Ctrl-C closes the socket).

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
	"unicode/utf8"
)

const outputPrefix = `{"output":"`

// Stream sends lines to the daemon at socket and copies its output to out
// as it comes; it returns the request's exit status (Response.Status: non-zero
// when a query was answered with a failure). A refused request is a
// *RequestError (its Output empty: the output went to out); anything else is
// a connection problem.
func Stream(socket string, lines []string, asJSON bool, out io.Writer) (int, error) {
	status, _, err := StreamNotes(socket, lines, asJSON, out)
	return status, err
}

// StreamNotes is Stream that also returns the answer's notes (for stderr:
// capture's summary).
func StreamNotes(socket string, lines []string, asJSON bool, out io.Writer) (int, []string, error) {
	status, resp, err := stream(socket, lines, asJSON, out)
	return status, resp.Notes, err
}

func stream(socket string, lines []string, asJSON bool, out io.Writer) (int, Response, error) {
	var resp Response
	c, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		return 0, resp, err
	}
	defer c.Close()
	if err := json.NewEncoder(c).Encode(Request{Lines: lines, JSON: asJSON}); err != nil {
		return 0, resp, err
	}
	r := bufio.NewReaderSize(c, 64<<10)
	bw := bufio.NewWriterSize(out, 32<<10)
	rest, err := copyOutput(r, bw)
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return 0, resp, fmt.Errorf("reading the daemon's answer: %w", err)
	}
	if err := json.Unmarshal(rest, &resp); err != nil {
		return 0, resp, fmt.Errorf("reading the daemon's answer: %w", err)
	}
	if !resp.OK {
		if len(resp.Errors) == 0 {
			resp.Errors = []string{"ctl: request failed"}
		}
		return resp.Status, resp, &RequestError{Errors: resp.Errors}
	}
	return resp.Status, resp, nil
}

// copyOutput reads the response up to the end of its output string,
// writing the unescaped output to w (flushed whenever the connection has
// nothing more buffered), and returns the rest of the response as a JSON
// object.
func copyOutput(r *bufio.Reader, w *bufio.Writer) ([]byte, error) {
	head := make([]byte, len(outputPrefix))
	if _, err := io.ReadFull(r, head); err != nil {
		return nil, err
	}
	if string(head) != outputPrefix {
		return nil, errors.New("unexpected response")
	}
	for {
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return nil, err
			}
		}
		c, err := r.ReadByte()
		if err != nil {
			return nil, err
		}
		switch c {
		case '"':
			rest, err := io.ReadAll(r)
			if err != nil {
				return nil, err
			}
			if len(rest) == 0 || rest[0] != ',' {
				return nil, errors.New("unexpected end of response")
			}
			return append([]byte{'{'}, rest[1:]...), nil
		case '\\':
			e, err := r.ReadByte()
			if err != nil {
				return nil, err
			}
			switch e {
			case 'n':
				w.WriteByte('\n')
			case 't':
				w.WriteByte('\t')
			case 'r':
				w.WriteByte('\r')
			case 'b':
				w.WriteByte('\b')
			case 'f':
				w.WriteByte('\f')
			case 'u':
				var hex [4]byte
				if _, err := io.ReadFull(r, hex[:]); err != nil {
					return nil, err
				}
				var v rune
				for _, h := range hex {
					v <<= 4
					switch {
					case h >= '0' && h <= '9':
						v |= rune(h - '0')
					case h >= 'a' && h <= 'f':
						v |= rune(h - 'a' + 10)
					case h >= 'A' && h <= 'F':
						v |= rune(h - 'A' + 10)
					default:
						return nil, errors.New("bad escape in response")
					}
				}
				var buf [utf8.UTFMax]byte
				w.Write(buf[:utf8.EncodeRune(buf[:], v)])
			default: // \" \\ \/
				w.WriteByte(e)
			}
		default:
			w.WriteByte(c)
		}
	}
}
