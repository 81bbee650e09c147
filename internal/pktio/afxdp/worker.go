package afxdp

// xdpworker: an Worker is what one worker goroutine owns for AF_XDP: one
// UMEM (an mmapped array of FrameSize frames, from a memfd so that a hot
// restart's successor maps the same pages: handover.go) shared by all of its XDP
// sockets, one per (port, queue) it serves (XDP_SHARED_UMEM across
// devices: each socket has its own fill and completion rings), the free
// list of frames, and the wait over all its sockets at once.
//
// Because every socket of the worker receives into the same UMEM, a frame
// received on one port and rewritten in place can leave on another port of
// the same worker by descriptor, without a copy (xdptx.go). What the worker
// owns is exactly what one goroutine touches, so nothing takes a lock.
//
// Frame life cycle (state per frame, owner goroutine only):
//
//	free --refill--> kernel (a fill ring, or being received into)
//	kernel --Recv--> held (in a batch the engine may still read)
//	held --Release--> free
//	held --Send by descriptor--> sentHeld --Release--> sent
//	                             sentHeld --completion--> doneHeld --Release--> free
//	free --Send copy--> sent --completion--> free
//
// A frame is never reused while a batch that may still reference it is
// open: a completion that arrives before the batch's Release parks it in
// doneHeld. A frame already sent once (a flood's second output) is copied.
//
// Waiting (Wait): spin over the sockets' RX rings for cfg.Spin, then park
// the goroutine in the Go netpoller (a pktio.Poller: one epoll instance
// holding the sockets' fds, the watched queues' and an eventfd that Wake and
// Shutdown write), never in a blocking poll(2): a goroutine blocked in a
// system call keeps its P, and with as many Ps as workers a worker woken
// meanwhile waits for sysmon to take it back (up to 10 ms on a quiet
// process) while its ring fills. With
// cfg.NAPIBusyPoll every spin round first asks the kernel to busy-poll
// each socket's NAPI instance (recvfrom), which fills the RX rings in the
// worker's thread.
//
// Locking: none on the datapath; one owner goroutine calls Bind, Wait, the
// sockets' Recv/TryRecv/Release/Send and Close. Shutdown (any goroutine)
// sets an atomic flag and wakes the poller (evmu orders that before Close
// closes it). Counters are atomics.

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/wire"
)

// Frame states.
const (
	frameFree uint8 = iota
	frameKernel
	frameHeld
	frameSent
	frameSentHeld
	frameDoneHeld
)

// Worker owns one UMEM and the XDP sockets bound on it.
type Worker struct {
	cfg   WorkerConfig
	umem  []byte
	memfd int // the UMEM's pages (handover.go)
	base  uintptr
	shift uint // log2(FrameSize)

	state []uint8  // per frame
	owner []uint16 // per frame: socket slot while frameKernel or frameSent
	free  []uint32 // stack of free frame indexes, free[:nfree]
	nfree int
	// reserve is the number of free frames refill leaves for copies
	// (generated frames: ARP replies, ICMP): sockets bound one after the
	// other fill their rings before the fill target shrinks, and took
	// every frame.
	reserve int

	socks      []*Socket        // by slot; nil: slot unused
	live       int              // non-nil socks
	list       []*Socket        // the non-nil socks in slot order (Sockets)
	fillTarget int              // frames each socket keeps in its fill ring
	zeroCopy   bool             // the UMEM's mode, fixed by its first socket
	poller     *pktio.Poller    // the sockets and watched queues; Wait parks in it
	watched    []pktio.Waitable // queues of other backends Wait also waits for (Add)

	evmu      sync.Mutex // orders Wake's and Shutdown's poller wake-ups before Close closes it
	pollDone  bool       // the poller is closed (under evmu)
	closed    atomic.Bool
	unmapped  bool
	spinIters int // Wait's spin rounds between clock reads
	lastBusy  time.Time
	waits     atomic.Uint64
	blocks    atomic.Uint64
	napiPolls atomic.Uint64
}

// NewWorker maps a UMEM of cfg.Frames frames. Bind sockets on it, then
// run the worker loop in one goroutine.
func NewWorker(cfg WorkerConfig) (*Worker, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	size := cfg.Frames * cfg.FrameSize
	memfd, err := unix.MemfdCreate("netfwd-umem", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("pktio: UMEM memfd: %w", err)
	}
	if err := unix.Ftruncate(memfd, int64(size)); err != nil {
		unix.Close(memfd)
		return nil, fmt.Errorf("pktio: UMEM of %d bytes: %w", size, err)
	}
	w, err := newWorkerOn(cfg, memfd, nil)
	if err != nil {
		unix.Close(memfd)
		return nil, err
	}
	for i := range w.free {
		w.free[i] = uint32(cfg.Frames - 1 - i) // low frames first
	}
	w.setFillTarget()
	return w, nil
}

// newWorkerOn maps the UMEM from memfd (cfg.Frames*cfg.FrameSize bytes;
// the worker's from then on) and sets up a worker with every frame free.
// A memfd, MAP_SHARED, so that another process can map the very pages
// (a hot restart, handover.go): the descriptors are offsets into them.
//
// mem, if not nil, is memfd's mapping already made (MapUMEM), of at least
// that size; the worker's from then on.
func newWorkerOn(cfg WorkerConfig, memfd int, mem []byte) (*Worker, error) {
	size := cfg.Frames * cfg.FrameSize
	mapped := mem == nil
	if mapped {
		var err error
		if mem, err = unix.Mmap(memfd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
			return nil, fmt.Errorf("pktio: UMEM of %d bytes: %w", size, err)
		}
		pktio.Prefault(mem) // before frames go through it (pktio/prefault.go)
	}
	if len(mem) != size {
		return nil, fmt.Errorf("pktio: UMEM of %d bytes for %d frames of %d", len(mem), cfg.Frames, cfg.FrameSize)
	}
	poller, err := pktio.NewPoller()
	if err != nil {
		if mapped {
			unix.Munmap(mem) // else the caller's
		}
		return nil, fmt.Errorf("pktio: AF_XDP worker's poller: %w", err)
	}
	w := &Worker{cfg: cfg, umem: mem, memfd: memfd, base: uintptr(unsafe.Pointer(&mem[0])),
		shift: uint(bits.TrailingZeros(uint(cfg.FrameSize))),
		state: make([]uint8, cfg.Frames), owner: make([]uint16, cfg.Frames),
		free: make([]uint32, cfg.Frames), nfree: cfg.Frames, poller: poller, spinIters: 64,
		reserve: max(64, cfg.Frames/8)}
	return w, nil
}

// Config returns the effective configuration (defaults filled).
func (w *Worker) Config() WorkerConfig { return w.cfg }

// ZeroCopy reports whether the worker's sockets run in zero-copy mode (the
// driver DMAs into the UMEM) rather than copy mode (the kernel copies each
// frame). Decided by the first Bind; false before.
func (w *Worker) ZeroCopy() bool { return w.zeroCopy }

// Sockets returns the worker's sockets in slot order, without allocating:
// the slice is the worker's own, valid until the next Bind or CloseSocket
// (owner goroutine; do not modify it).
func (w *Worker) Sockets() []*Socket { return w.list }

// Bind opens an XDP socket on queue q of port p, sharing the worker's UMEM,
// and registers it in the port's map: from then on the frames p receives
// on queue q come to this socket, and the socket transmits on p. Call it
// from the owner goroutine (or before it starts).
//
// The first socket of a worker decides its mode: zero-copy if the driver
// takes XDP_ZEROCOPY (and cfg.NoZeroCopy is unset), else copy; later
// sockets share the UMEM in the same mode (a zero-copy UMEM cannot take a
// device without zero-copy: Bind then fails).
func (w *Worker) Bind(p *Port, q int) (*Socket, error) {
	if w.closed.Load() {
		return nil, pktio.ErrClosed
	}
	if q < 0 || q >= p.queues {
		return nil, fmt.Errorf("pktio: %s: queue %d out of range 0..%d", p.Name, q, p.queues-1)
	}
	if max := w.cfg.FrameSize - xdpPacketHeadroom; p.MTU+wire.EthernetHeaderLen+2*wire.VLANTagLen > max {
		return nil, fmt.Errorf("pktio: %s: MTU %d does not fit AF_XDP frames of %d bytes (largest frame %d): raise FrameSize",
			p.Name, p.MTU, w.cfg.FrameSize, max)
	}
	for _, s := range w.socks {
		if s != nil && s.port == p && s.queue == q {
			return nil, fmt.Errorf("pktio: %s queue %d: already bound by this worker", p.Name, q)
		}
	}
	slot := 0
	for slot < len(w.socks) && w.socks[slot] != nil {
		slot++
	}
	if slot >= 1<<16 {
		return nil, errors.New("pktio: too many XDP sockets on one worker")
	}
	var s *Socket
	err := pktio.InNetnsFile(p.netns, p.Name, func() error {
		var err error
		s, err = w.openSocket(p, q, slot)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pktio: %s queue %d: %w", p.Name, q, err)
	}
	if slot == len(w.socks) {
		w.socks = append(w.socks, nil)
	}
	w.socks[slot] = s
	w.live++
	w.setFillTarget()
	s.refill()
	if err := w.poller.Add(s); err != nil {
		w.closeSocket(s)
		return nil, fmt.Errorf("pktio: %s queue %d: %w", p.Name, q, err)
	}
	if err := p.addSocket(s); err != nil {
		w.closeSocket(s)
		return nil, fmt.Errorf("pktio: %s queue %d: %w", p.Name, q, err)
	}
	w.rebuildList()
	return s, nil
}

// anySocket returns a bound socket whose UMEM registration a new socket
// can share, or nil.
func (w *Worker) anySocket() *Socket {
	for _, s := range w.socks {
		if s != nil {
			return s
		}
	}
	return nil
}

// setFillTarget divides three quarters of the frames among the sockets'
// fill rings (capped at FillPerSocket); the rest serves held batches,
// copies and frames in flight.
//
// Frames in a fill ring cannot be taken back, so the share is computed for
// at least cfg.Sockets sockets: sockets bound one after the other would
// otherwise each fill their ring for the count so far and leave the last
// ones nothing.
func (w *Worker) setFillTarget() {
	w.fillTarget = w.cfg.FillPerSocket
	if n := max(w.live, w.cfg.Sockets); n > 0 {
		w.fillTarget = min(w.fillTarget, w.cfg.Frames*3/4/n)
	}
}

// rebuildList renews the socket list after a change.
func (w *Worker) rebuildList() {
	w.list = make([]*Socket, 0, w.live) // a new array: a caller may still range over the old one
	for _, s := range w.socks {
		if s != nil {
			w.list = append(w.list, s)
		}
	}
}

// pushFree returns frame f to the free list.
func (w *Worker) pushFree(f uint32) {
	w.state[f] = frameFree
	w.free[w.nfree] = f
	w.nfree++
}

// frameOf returns the index of the UMEM frame that b starts in, and
// whether b lies in this worker's UMEM at all.
func (w *Worker) frameOf(b []byte) (off uint64, ok bool) {
	if len(b) == 0 {
		return 0, false
	}
	o := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))) - w.base)
	return o, o < uint64(len(w.umem))
}

// reapAll takes the completions of every socket (frames back to the free
// list) and returns how many came back.
func (w *Worker) reapAll() int {
	n := 0
	for _, s := range w.socks {
		if s != nil {
			n += s.reapCompletions()
		}
	}
	return n
}

// Ready reports whether any socket of the worker has received frames that
// TryRecv would return now. It does not block and does not allocate.
func (w *Worker) Ready() bool {
	for _, s := range w.socks {
		if s != nil && s.rx.peekReady() {
			return true
		}
	}
	for _, q := range w.watched {
		if q.Ready() {
			return true
		}
	}
	return false
}

// Wait returns when a socket of the worker has frames (then TryRecv each
// socket), after a while without any (nil, nothing ready), or with
// ErrClosed after Shutdown. It spins for cfg.Spin before it parks in the
// netpoller; frames left on a transmit ring by a busy device are kicked
// again on the way.
func (w *Worker) Wait() error {
	if w.closed.Load() {
		return pktio.ErrClosed
	}
	if w.Ready() {
		w.lastBusy = time.Now()
		return nil
	}
	w.waits.Add(1)
	if spin := w.spinFor(); spin > 0 {
		deadline := time.Now().Add(spin)
		iters := w.spinIters
		if w.cfg.NAPIBusyPoll > 0 {
			iters = 1 // a round is a system call per socket: read the clock every round
		}
		for {
			for range iters {
				w.pollNAPI()
				if w.Ready() {
					w.lastBusy = time.Now()
					return nil
				}
			}
			if w.closed.Load() {
				return pktio.ErrClosed
			}
			if time.Now().After(deadline) {
				break
			}
		}
	}
	w.blocks.Add(1)
	timeout := time.Second
	for _, s := range w.socks {
		if s != nil && s.tx.pending() != 0 {
			s.kick()
			timeout = time.Millisecond
		}
	}
	err := w.park(timeout)
	if w.Ready() {
		w.lastBusy = time.Now()
	}
	return err
}

// pollNAPI asks the kernel to busy-poll the NAPI instance of each socket
// that has received before (cfg.NAPIBusyPoll; nothing otherwise): the
// device's receive work for up to NAPIBudget frames runs here, now.
func (w *Worker) pollNAPI() {
	if w.cfg.NAPIBusyPoll <= 0 {
		return
	}
	for _, s := range w.list {
		if s.napiSet {
			unix.Syscall6(unix.SYS_RECVFROM, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
			w.napiPolls.Add(1)
		}
	}
}

// spinFor is how long Wait spins before it blocks: BusyPoll while frames
// came within the last BusyPoll (traffic flows: the next burst is
// probably a few microseconds away, and a wake-up from the netpoller costs a
// context switch, more on a loaded machine), Spin otherwise.
func (w *Worker) spinFor() time.Duration {
	if w.cfg.BusyPoll > w.cfg.Spin && time.Since(w.lastBusy) < w.cfg.BusyPoll {
		return w.cfg.BusyPoll
	}
	return max(w.cfg.Spin, 0)
}

// WaitStats count the worker's Waits that found nothing ready at once
// (Waits) and those of them that parked in the netpoller after spinning
// (Blocked): a wake-up each. Any goroutine.
type WaitStats struct {
	Waits, Blocked uint64
	// NAPIPolls are the busy polls Wait asked the kernel for
	// (NAPIBusyPoll), one per socket and spin round.
	NAPIPolls uint64
}

// WaitStats returns the worker's wait counters. Any goroutine.
func (w *Worker) WaitStats() WaitStats {
	return WaitStats{Waits: w.waits.Load(), Blocked: w.blocks.Load(), NAPIPolls: w.napiPolls.Load()}
}

// park waits in the netpoller until a socket or a watched queue is ready,
// Wake or Shutdown was called, or timeout passed (nil then too).
func (w *Worker) park(timeout time.Duration) error {
	_, err := w.poller.WaitFor(timeout)
	if w.closed.Load() {
		return pktio.ErrClosed
	}
	return err
}

// Wake makes a current or the next Wait return (nil) without shutting the
// worker down: its owner has something else to look at. Any goroutine.
func (w *Worker) Wake() {
	w.evmu.Lock()
	defer w.evmu.Unlock()
	if !w.pollDone {
		w.poller.Wake()
	}
}

// Add makes Wait also return when q, a receive queue of another backend
// (an AF_PACKET Queue of a port that could not take AF_XDP), has frames
// (pktio.Waiter). Owner goroutine.
func (w *Worker) Add(q pktio.Waitable) error {
	if err := w.poller.Add(q); err != nil {
		return err
	}
	w.watched = append(w.watched, q)
	return nil
}

// Remove forgets a queue given to Add. Owner goroutine.
func (w *Worker) Remove(q pktio.Waitable) {
	for i, x := range w.watched {
		if x == q {
			w.watched = append(w.watched[:i], w.watched[i+1:]...)
			w.poller.Remove(q)
			return
		}
	}
}

// Detach takes the sockets and watched queues out of the poller's epoll
// set until Attach (pktio.Waiter): a hot restart's predecessor, whose
// sockets the successor reads, is not woken by its frames. Owner goroutine.
func (w *Worker) Detach() { w.poller.Detach() }

// Attach undoes Detach. Owner goroutine.
func (w *Worker) Attach() error { return w.poller.Attach() }

// Shutdown makes Wait, Recv, TryRecv and Send return ErrClosed (a blocked
// owner wakes at once). Any goroutine, any number of times; UMEM and rings
// stay mapped until Close.
func (w *Worker) Shutdown() {
	if w.closed.Swap(true) {
		return
	}
	w.Wake()
}

// Close shuts the worker down, closes its sockets (taking them out of
// their ports' maps) and unmaps the UMEM. Call it from the owner goroutine
// after its loop ended, or after the owner returned: frames handed out by
// Recv become invalid memory.
func (w *Worker) Close() error {
	w.Shutdown()
	if w.unmapped {
		return nil
	}
	// Releasing an XDP socket waits for an RCU grace period in the kernel
	// (xsk_release): unregister them all, then close them concurrently.
	var socks []*Socket
	for i, s := range w.socks {
		if s != nil {
			s.Release()
			s.port.removeSocket(s)
			socks = append(socks, s)
			w.socks[i] = nil
		}
	}
	w.live = 0
	errs := make([]error, len(socks), len(socks)+2)
	var wg sync.WaitGroup
	for i, s := range socks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.close()
		}()
	}
	wg.Wait()
	w.unmapped = true
	errs = append(errs, unix.Munmap(w.umem), unix.Close(w.memfd))
	w.umem = nil
	w.evmu.Lock()
	errs = append(errs, w.poller.Close())
	w.pollDone = true
	w.evmu.Unlock()
	return errors.Join(errs...)
}

// closeSocket unregisters and closes s and takes back the frames the
// kernel held for it (fill ring, frames in flight): after close the kernel
// touches none of them.
func (w *Worker) closeSocket(s *Socket) error {
	s.Release()
	s.port.removeSocket(s)
	// Out of the epoll set before the fd closes: a handed-over socket's
	// file lives on in the successor, and epoll would keep a closed fd's
	// registration for as long as its file lives.
	w.poller.Remove(s)
	err := s.close()
	for f, st := range w.state {
		if int(w.owner[f]) != s.slot {
			continue
		}
		switch st {
		case frameKernel, frameSent:
			w.pushFree(uint32(f))
		case frameSentHeld:
			w.state[f] = frameHeld // never completes now; its batch's Release frees it
		}
	}
	w.socks[s.slot] = nil
	w.live--
	w.setFillTarget()
	w.rebuildList()
	return err
}

// CloseSocket closes one socket of the worker (its port was removed) and
// keeps the others running. Owner goroutine.
func (w *Worker) CloseSocket(s *Socket) error {
	if s.w != w || w.socks[s.slot] != s {
		return errors.New("pktio: not a socket of this worker")
	}
	return w.closeSocket(s)
}

var (
	_ pktio.Receiver = (*Socket)(nil)
	_ pktio.Sender   = (*Socket)(nil)
	_ pktio.Waiter   = (*Worker)(nil)
)
