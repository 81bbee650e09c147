package hostpath

// Twin: one dataplane L3 interface's TAP twin, and its two goroutines.
//
// Punt side: datapath workers call Punt/PuntPacket. A punt is classified
// (Classify), charged to the class's Limiter, and copied into the twin's
// puntQueue; the twin's writer goroutine takes frames out of the queue and
// writes each into the TAP, where the kernel receives it as if it had
// arrived on the twin. A full queue drops (counted); the worker never
// waits, never takes a lock and never allocates.
//
// Inject side: the twin's reader goroutine reads every frame the kernel
// transmits on the twin (parked in the netpoller between frames: no thread
// per twin), into one buffer it reuses, and hands it to Options.Inject.
//
// The Twin object is stable for its port as long as the port has a twin:
// when the device has to be re-created (its name changed, it was deleted
// behind our back), the Manager swaps the device under it (dev) and keeps
// the queue, limiters and counters. A worker holding a Twin whose device is
// gone (removed, or re-creation pending) has its punts dropped and counted.
//
// Locking: dev is an atomic pointer (datapath readers); spec and the
// device's life cycle belong to the Manager's lock. Each device's reader
// and writer goroutines stop when the device is closed (closeDev waits for
// them).

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/wire"
)

// Twin is the kernel-side twin of one dataplane L3 interface.
type Twin struct {
	m       *Manager
	port    string
	q       *puntQueue
	lim     [NumClasses]*Limiter
	dev     atomic.Pointer[tapDev]
	carrier atomic.Bool // wanted carrier, applied to every new device
	c       twinCounters

	spec Spec // guarded by m.mu: the spec last applied
}

// tapDev is one open TAP device of a twin.
type tapDev struct {
	name   string
	index  int
	f      *os.File
	fd     int // f's descriptor, for the keeper (keeper.go)
	stop   chan struct{}
	wg     sync.WaitGroup
	broken atomic.Bool // the reader saw an error: re-create on the next Sync
}

func newTwin(m *Manager, port string) *Twin {
	t := &Twin{m: m, port: port, q: newPuntQueue(m.opts.QueueBytes)}
	for c := range NumClasses {
		t.lim[c], _ = NewLimiter(DefaultLimits[c])
	}
	t.carrier.Store(true)
	return t
}

// Port is the dataplane interface the twin belongs to.
func (t *Twin) Port() string { return t.port }

// Name is the twin's interface name, "" while it has no device.
func (t *Twin) Name() string {
	if d := t.dev.Load(); d != nil {
		return d.name
	}
	return ""
}

// Ifindex is the twin's interface index in its namespace, 0 while it has
// no device.
func (t *Twin) Ifindex() int {
	if d := t.dev.Load(); d != nil {
		return d.index
	}
	return 0
}

// Limits returns the rate limits in force.
func (t *Twin) Limits() Limits {
	var l Limits
	for c := range NumClasses {
		l[c] = t.lim[c].Limit()
	}
	return l
}

// Punt hands one Ethernet frame to the kernel as if it had arrived on the
// twin, exactly as given (so untagged: the twin of a VLAN interface wants
// the frame without its tag; PuntPacket removes tags). It returns false when
// the frame was dropped: rate limited, queue full, too big, or no device
// (each counted). It never blocks and does not allocate; the frame may be
// reused when it returns. Safe for concurrent use by any number of workers.
func (t *Twin) Punt(frame []byte) bool {
	if len(frame) < 14 {
		t.c.puntErrors.Add(1)
		return false
	}
	return t.punt(frame[:12], frame[12:], Classify(frame, l3Offset(frame)), pktio.Offload{})
}

// PuntPacket is Punt for a frame whose network header is at frame[l3:]:
// the twin receives the MAC addresses followed by the EtherType and the
// packet (frame[l3-2:]), so VLAN tags in between are removed. off is the
// frame's offload state as pktio reports it (a GSO super-frame, a partial
// checksum; the zero value for a complete frame): the kernel receives the
// frame with it, as from a virtio NIC. A GSO frame is charged to the rate
// limit for each of its segments (at most one burst).
func (t *Twin) PuntPacket(frame []byte, l3 int, off pktio.Offload) bool {
	if l3 < 14 || l3 > len(frame) {
		t.c.puntErrors.Add(1)
		return false
	}
	return t.punt(frame[:12], frame[l3-2:], Classify(frame, l3), off)
}

func (t *Twin) punt(macs, rest []byte, class Class, off pktio.Offload) bool {
	if t.dev.Load() == nil {
		t.c.puntDrops.Add(1)
		return false
	}
	segs := 1
	if off.GSOType != pktio.GSONone && off.GSOSize > 0 {
		segs = (len(rest) - 2 + int(off.GSOSize) - 1) / int(off.GSOSize)
	}
	if !t.lim[class].AllowN(monoNow(), segs) {
		return false
	}
	var hdr [wire.VirtioNetHdrLen]byte
	off.VirtioNetHdr(wire.EthernetHeaderLen).Encode(hdr[:])
	ok, tooBig := t.q.push(hdr[:], macs, rest)
	switch {
	case tooBig:
		t.c.puntErrors.Add(1)
	case !ok:
		t.c.puntDrops.Add(1)
	}
	return ok
}

// SetCarrier sets the twin's carrier (TUNSETCARRIER), so the kernel's view
// of the link follows the port's: without carrier the twin is
// NO-CARRIER/operstate DOWN and the kernel's routes through it are linkdown.
// The setting is kept for a re-created device.
func (t *Twin) SetCarrier(up bool) error {
	t.carrier.Store(up)
	d := t.dev.Load()
	if d == nil {
		return fmt.Errorf("hostpath: twin of %s has no device", t.port)
	}
	return setCarrier(d.f, up)
}

// Stats returns a snapshot of the twin's counters.
func (t *Twin) Stats() Stats {
	s := Stats{
		Punted:         t.c.punted.Load(),
		PuntDrops:      t.c.puntDrops.Load(),
		PuntErrors:     t.c.puntErrors.Load(),
		Injected:       t.c.injected.Load(),
		InjectErrors:   t.c.injectErrors.Load(),
		InjectFiltered: t.c.injectFiltered.Load(),
	}
	for c := range NumClasses {
		s.RateLimited[c] = t.lim[c].Refused()
	}
	return s
}

// startDev makes d the twin's device and starts its goroutines.
func (t *Twin) startDev(d *tapDev) {
	d.stop = make(chan struct{})
	d.wg.Add(2)
	go t.writeLoop(d)
	go t.readLoop(d)
	t.dev.Store(d)
}

// closeDev closes the twin's device and waits for its goroutines. Frames
// still queued are dropped and counted. A non-persistent device vanishes
// with the file; a persistent one (Options.Persist) is deleted if remove,
// else left for the next process. Called under the Manager's lock.
func (t *Twin) closeDev(remove bool) {
	d := t.dev.Swap(nil)
	if d == nil {
		return
	}
	if remove && t.m.opts.Persist {
		// Only the device we opened: its name may be someone else's now.
		if li, err := t.m.nl.linkByName(d.name); err == nil && li.index == d.index {
			if err := t.m.nl.delLink(d.index); err != nil {
				t.m.log.Error("hostpath: cannot delete a twin", "twin", d.name, "err", err)
			}
		}
	}
	close(d.stop)
	d.f.Close()
	d.wg.Wait()
	t.drainQueue()
}

// drainQueue drops (and counts) what is queued; only while no writer runs.
func (t *Twin) drainQueue() {
	for {
		if _, ok := t.q.peek(); !ok {
			return
		}
		t.q.release()
		t.c.puntDrops.Add(1)
	}
}

// writeLoop writes queued frames into the TAP until the device closes.
func (t *Twin) writeLoop(d *tapDev) {
	defer d.wg.Done()
	for {
		rec, ok := t.q.peek()
		if !ok {
			if !t.q.wait(d.stop) {
				return
			}
			continue
		}
		_, err := d.f.Write(rec)
		t.q.release()
		switch {
		case err == nil:
			t.c.punted.Add(1)
		case errors.Is(err, os.ErrClosed):
			t.c.puntDrops.Add(1)
			return
		default:
			t.c.puntErrors.Add(1)
		}
	}
}

// maxReadFrame bounds a frame read from the TAP: the largest MTU plus its
// Ethernet header, with room to spare.
const maxReadFrame = 1 << 16

// readLoop hands every frame the kernel sends on the twin to the Inject
// callback, until the device closes.
func (t *Twin) readLoop(d *tapDev) {
	defer d.wg.Done()
	buf := make([]byte, wire.VirtioNetHdrLen+maxReadFrame)
	inject, keepARP := t.m.opts.Inject, t.m.opts.KeepKernelARPReplies
	for {
		n, err := d.f.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				d.broken.Store(true)
				t.m.log.Warn("hostpath: twin read failed; re-created on the next sync", "twin", d.name, "port", t.port, "err", err)
			}
			return
		}
		if n < wire.VirtioNetHdrLen+14 {
			t.c.injectErrors.Add(1)
			continue
		}
		frame := buf[wire.VirtioNetHdrLen:n]
		switch {
		case !finishVnetFrame(buf[:wire.VirtioNetHdrLen], frame):
			t.c.injectErrors.Add(1)
		case !keepARP && isARPReply(frame):
			t.c.injectFiltered.Add(1)
		case inject(t, frame):
			t.c.injected.Add(1)
		default:
			t.c.injectErrors.Add(1)
		}
	}
}
