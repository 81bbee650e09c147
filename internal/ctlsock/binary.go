package ctlsock

// Binary answers (capture's pcap) in the output string, which carries
// text: one standard base64 line (padded, newline-terminated) per flush or
// per 48 KiB, so that every line decodes on its own and a frame written
// before a flush reaches the client whole, at once (a streaming base64
// encoder would hold a frame's last bytes back until the next one).
// BinaryDecoder undoes it on the client.
//
// Locking: an encoder or decoder belongs to one goroutine.

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
)

const binaryLine = 48 << 10 // bytes of data per line at most (a multiple of 3)

// binaryEncoder writes base64 lines to w.
type binaryEncoder struct {
	w   io.Writer
	buf []byte
	out []byte
}

func (e *binaryEncoder) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(binaryLine-len(e.buf), len(p))
		e.buf = append(e.buf, p[:k]...)
		p = p[k:]
		if len(e.buf) == binaryLine {
			if err := e.line(); err != nil {
				return n - len(p), err
			}
		}
	}
	return n, nil
}

// line writes what is buffered as one line.
func (e *binaryEncoder) line() error {
	if len(e.buf) == 0 {
		return nil
	}
	e.out = base64.StdEncoding.AppendEncode(e.out[:0], e.buf)
	e.out = append(e.out, '\n')
	e.buf = e.buf[:0]
	_, err := e.w.Write(e.out)
	return err
}

// BinaryDecoder copies the data of base64 lines read from r to w.
func BinaryDecoder(w io.Writer, r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 128<<10), 1<<20)
	var out []byte
	for sc.Scan() {
		var err error
		if out, err = base64.StdEncoding.AppendDecode(out[:0], sc.Bytes()); err != nil {
			return fmt.Errorf("binary answer: %w", err)
		}
		if _, err := w.Write(out); err != nil {
			return err
		}
		if f, ok := w.(interface{ Flush() error }); ok {
			if err := f.Flush(); err != nil {
				return err
			}
		}
	}
	return sc.Err()
}
