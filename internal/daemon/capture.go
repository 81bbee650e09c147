package daemon

// Live capture: `netfwd ctl capture PORT [in|out|both] [count N] [filter
// EXPR]` streams a port's frames as pcap, as received (the receive ring's
// bytes, VLAN tag restored: as on the wire) and as sent (the bytes handed
// to the transmit handle), since the kernel never sees them for tcpdump.
//
// Flow: the ctl request registers a captureSession on the port (one at a
// time); the workers look at port.capture once per batch (received) and
// once per port batch sent (txSet.send) — off, that is the whole cost.
// On, each frame in the session's direction runs the filter (a tcpdump
// expression compiled to classic BPF by `tcpdump -ddd`, run in
// golang.org/x/net/bpf's VM) and is copied into one of the session's
// buffers and queued; with no buffer free (the reader is slow) it is
// dropped and counted, never waited for. The ctl goroutine writes the
// queue as pcap and ends when count frames are written, the client goes,
// the port goes or the daemon stops; the frames dropped are reported then.
//
// Locking: port.capture is an atomic pointer; a session's queue and free
// list are channels (the workers never block on them); counters atomics.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/pcapfile"
	"golang.org/x/net/bpf"
)

// Capture buffers: what a session holds for a slow reader (2 MiB).
const (
	captureBuffers = 1024
	captureSnaplen = 2048 // longer frames (GSO super-frames, jumbo) are cut, with their length
)

// capturedFrame is one queued frame.
type capturedFrame struct {
	buf  []byte // captureSnaplen, from the free list
	n    int    // bytes captured
	orig int    // the frame's length
	ts   time.Time
}

// captureSession is one running capture on a port.
type captureSession struct {
	in, out bool
	filter  *bpf.VM // nil: every frame
	limit   uint64  // frames to capture (0: no limit)

	taken   atomic.Uint64 // frames queued
	dropped atomic.Uint64 // frames that found no free buffer
	free    chan []byte
	queue   chan capturedFrame
	full    chan struct{} // closed when limit frames are queued
	once    sync.Once
}

func newCaptureSession(q config.Capture) (*captureSession, error) {
	c := &captureSession{in: q.In, out: q.Out, limit: q.Count, free: make(chan []byte, captureBuffers),
		queue: make(chan capturedFrame, captureBuffers), full: make(chan struct{})}
	if q.Filter != "" {
		vm, err := compileFilter(q.Filter)
		if err != nil {
			return nil, err
		}
		c.filter = vm
	}
	for range captureBuffers {
		c.free <- make([]byte, captureSnaplen)
	}
	return c, nil
}

// compileFilter compiles a tcpdump expression for Ethernet frames with
// tcpdump itself (libpcap's compiler: the expression means exactly what it
// means to tcpdump).
func compileFilter(expr string) (*bpf.VM, error) {
	path, err := exec.LookPath("tcpdump")
	if err != nil {
		return nil, errors.New("capture: a filter is compiled by tcpdump, which is not installed (apt-get install tcpdump)")
	}
	var stderr bytes.Buffer
	cmd := exec.Command(path, "-y", "EN10MB", "-s", strconv.Itoa(captureSnaplen), "-ddd", expr)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("capture: filter %q: %s", expr, msg)
	}
	lines := strings.Fields(string(out))
	if len(lines) < 1 {
		return nil, fmt.Errorf("capture: filter %q: tcpdump printed no program", expr)
	}
	n, err := strconv.Atoi(lines[0])
	if err != nil || len(lines) != 1+4*n {
		return nil, fmt.Errorf("capture: filter %q: unexpected tcpdump -ddd output", expr)
	}
	raw := make([]bpf.RawInstruction, n)
	for i := range raw {
		var v [4]uint64
		for j := range v {
			if v[j], err = strconv.ParseUint(lines[1+4*i+j], 10, 32); err != nil {
				return nil, fmt.Errorf("capture: filter %q: unexpected tcpdump -ddd output", expr)
			}
		}
		raw[i] = bpf.RawInstruction{Op: uint16(v[0]), Jt: uint8(v[1]), Jf: uint8(v[2]), K: uint32(v[3])}
	}
	insns, ok := bpf.Disassemble(raw)
	if !ok {
		return nil, fmt.Errorf("capture: filter %q: a BPF instruction netfwd cannot run", expr)
	}
	return bpf.NewVM(insns)
}

// take queues the frames that match, dropping what finds no buffer.
func (c *captureSession) take(frames [][]byte, headroom int) {
	now := time.Now()
	for _, f := range frames {
		f = f[headroom:]
		if c.filter != nil {
			if n, err := c.filter.Run(f); err != nil || n == 0 {
				continue
			}
		}
		if c.limit > 0 && c.taken.Load() >= c.limit {
			return
		}
		var buf []byte
		select {
		case buf = <-c.free:
		default:
			c.dropped.Add(1)
			continue
		}
		n := copy(buf, f)
		c.queue <- capturedFrame{buf: buf, n: n, orig: len(f), ts: now} // never blocks: as many slots as buffers
		if t := c.taken.Add(1); c.limit > 0 && t >= c.limit {
			c.once.Do(func() { close(c.full) })
		}
	}
}

// captureRx offers a received batch to the port's capture, if any.
func (p *port) captureRx(frames [][]byte, headroom int) {
	if c := p.capture.Load(); c != nil && c.in {
		c.take(frames, headroom)
	}
}

// captureTx offers frames about to be sent on the port.
func (p *port) captureTx(frames [][]byte) {
	if c := p.capture.Load(); c != nil && c.out {
		c.take(frames, 0)
	}
}

// Capture serves a capture query (ctlsock.Handler.Capture): pcap to w
// until the session ends; the notes say what was captured and dropped.
func (d *Daemon) Capture(q config.Capture, w io.Writer, flush func() error, gone <-chan struct{}) ([]string, error) {
	p := d.ports.Load().byName(q.Port)
	if p == nil {
		if d.e.Router().Iface(q.Port) != nil || d.e.Domain().Port(q.Port) != nil {
			return nil, fmt.Errorf("capture: %s is not a port (capture the port whose frames carry it)", q.Port)
		}
		return nil, fmt.Errorf("Cannot find device %q", q.Port)
	}
	c, err := newCaptureSession(q)
	if err != nil {
		return nil, err
	}
	if !p.capture.CompareAndSwap(nil, c) {
		return nil, fmt.Errorf("capture: %s: a capture is running on it already", q.Port)
	}
	defer p.capture.CompareAndSwap(c, nil)
	pw, err := pcapfile.NewWriter(w, captureSnaplen)
	if err != nil {
		return nil, err
	}
	if err := flush(); err != nil {
		return nil, err
	}
	var written uint64
	write := func(f capturedFrame) error {
		err := pw.WritePacket(f.ts, f.buf[:f.n], f.orig)
		c.free <- f.buf
		written++
		return err
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var werr error
loop:
	for {
		select {
		case f := <-c.queue:
			if werr = write(f); werr != nil {
				break loop
			}
			if len(c.queue) == 0 {
				if werr = flush(); werr != nil {
					break loop
				}
			}
			if c.limit > 0 && written >= c.limit {
				break loop
			}
		case <-gone:
			break loop
		case <-d.stop:
			break loop
		case <-tick.C:
			if d.ports.Load().byName(q.Port) != p { // the port went
				break loop
			}
		}
	}
	p.capture.CompareAndSwap(c, nil)
	if werr == nil {
		werr = flush()
	}
	note := fmt.Sprintf("capture %s: %d frames captured, %d dropped (the reader was slower than the port)", q.Port, written, c.dropped.Load())
	d.log.Info("capture ended", "dev", q.Port, "captured", written, "dropped", c.dropped.Load(), "client_gone", werr != nil)
	if werr != nil {
		return nil, nil // the client is gone: nobody reads a note
	}
	return []string{note}, nil
}
