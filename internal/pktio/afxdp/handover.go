package afxdp

// handover: passing AF_XDP ports and workers, with the frames in their
// rings, to another process (a hot restart, internal/handover).
//
// What the kernel holds survives in the new process as it does for
// AF_PACKET: an XDP socket, its four rings and the UMEM registration
// belong to the socket, so a process that holds the same socket (its fd
// duplicated with pidfd_getfd) maps the very rings (same mmap offsets)
// and, through the same memfd, the very UMEM pages; the descriptors in the
// rings are offsets into those pages, so they stay valid. The XSKMAP, the
// program and the bpf_link are taken over the same way: the program stays
// attached as long as some process holds the link.
//
// What user space holds is read while the owners are paused (Describe,
// with the worker parked between batches) and written into the new
// process's worker (AdoptWorker): the per-frame state and owner arrays,
// the free list, and per socket the frames given to its fill ring and its
// slot. The rings' own indexes come from the shared producer and consumer
// words: the old process published what it produced and released what it
// consumed (Describe releases the socket's last batch first). Frames in
// flight (on a TX ring or awaiting their completion) keep their state;
// the new worker reaps their completions as usual.
//
// Ownership of kernel state: a Port marked shared (HandOver in the old
// process; AdoptPort's Port until Own) leaves the map entries and the NAPI
// settings alone when it closes, and closes only its own descriptors: the
// other process uses them.
//
// Locking: Describe runs while the worker's owner is parked (the caller
// orders that, as for afpacket.Port.QueuePositions); AdoptWorker before
// the new owner runs.

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/pktio"
)

// PortState is what another process needs to take a Port over: the
// interface, its layout, and the descriptors (in the handing process) of
// the socket map, the program and the link.
type PortState struct {
	Name         string
	Index        int
	Queues       int
	Attach       Attach
	RestoresVLAN bool
	Config       PortConfig
	MapFD        int
	ProgFD       int
	LinkFD       int
	// NAPI is the deferral the interface had before NAPIDefer: written
	// back by whichever process closes the port last.
	NAPI []NAPISetting `json:",omitempty"`
}

// NAPISetting is one NAPI instance's deferral (napidefer.go).
type NAPISetting struct {
	ID, HardIRQs uint32
	Timeout      uint64 // ns
}

// WorkerState is what another process needs to continue a Worker: its
// UMEM (the memfd, in the handing process), configuration, frame states
// and free list, and its sockets.
type WorkerState struct {
	MemFD    int
	Config   WorkerConfig
	ZeroCopy bool
	State    []uint8
	Owner    []uint16
	Free     []uint32 // the free list, bottom first
	Sockets  []SocketState
}

// SocketState is one socket of a worker.
type SocketState struct {
	Port    string // the port's name
	Queue   int
	Slot    int
	FD      int // in the handing process
	FillOut int
	NAPISet bool
}

// Describe reports the port's kernel objects for a handover.
func (p *Port) Describe() (PortState, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.lnk == nil || p.xsks == nil || p.prog == nil {
		return PortState{}, fmt.Errorf("pktio: %s: %w", p.Name, pktio.ErrClosed)
	}
	rl, ok := p.lnk.(interface{ FD() int })
	if !ok {
		return PortState{}, fmt.Errorf("pktio: %s: the XDP link has no descriptor", p.Name)
	}
	st := PortState{Name: p.Name, Index: p.Index, Queues: p.queues, Attach: p.attach, RestoresVLAN: p.restoresVLAN,
		Config: p.cfg, MapFD: p.xsks.FD(), ProgFD: p.prog.FD(), LinkFD: rl.FD()}
	for _, o := range p.napiOld {
		st.NAPI = append(st.NAPI, NAPISetting{ID: o.id, HardIRQs: o.hardIRQs, Timeout: o.timeout})
	}
	return st, nil
}

// HandOver marks the port as taken over by another process: from now on
// Close and its workers' Close only close this process's descriptors
// (the program stays attached, the sockets stay in the map, the NAPI
// deferral stays). Any goroutine.
func (p *Port) HandOver() { p.shared.Store(true) }

// Own makes an adopted port this process's alone (the handing process is
// gone or going): its Close detaches and restores as Open's would.
func (p *Port) Own() { p.shared.Store(false) }

// AdoptPort builds a Port around the socket map, program and link another
// process set up (Describe there); mapFD, progFD and linkFD are this
// process's copies and become the Port's (closed by Close, also when
// AdoptPort fails). It runs in the namespace of the interface, as Open
// does. The Port starts shared (see HandOver) until Own.
func AdoptPort(st PortState, mapFD, progFD, linkFD int) (_ *Port, err error) {
	fds := []int{mapFD, progFD, linkFD}
	defer func() {
		for _, fd := range fds {
			if err != nil && fd >= 0 {
				unix.Close(fd)
			}
		}
	}()
	ifi, err := net.InterfaceByName(st.Name)
	if err != nil {
		return nil, fmt.Errorf("pktio: interface %q: %w", st.Name, err)
	}
	if ifi.Index != st.Index {
		return nil, fmt.Errorf("pktio: %s: ifindex %d, the handed-over program is attached to %d", st.Name, ifi.Index, st.Index)
	}
	if st.Queues <= 0 || st.Queues > pktio.MaxQueues {
		return nil, fmt.Errorf("pktio: %s: %d queues handed over", st.Name, st.Queues)
	}
	ns, err := pktio.CurrentNetns()
	if err != nil {
		return nil, fmt.Errorf("pktio: %s: %w", st.Name, err)
	}
	p := &Port{Name: ifi.Name, Index: ifi.Index, MAC: ifi.HardwareAddr, MTU: ifi.MTU,
		cfg: st.Config, ifi: ifi, netns: ns, queues: st.Queues, attach: st.Attach, restoresVLAN: st.RestoresVLAN,
		socks: map[*Socket]struct{}{}}
	p.shared.Store(true)
	for _, o := range st.NAPI {
		p.napiOld = append(p.napiOld, napiSetting{id: o.ID, hardIRQs: o.HardIRQs, timeout: o.Timeout})
	}
	fail := func(err error) (*Port, error) {
		p.closeObjects()
		return nil, fmt.Errorf("pktio: %s: %w", st.Name, err)
	}
	if p.xsks, err = ebpf.NewMapFromFD(mapFD); err != nil {
		return fail(fmt.Errorf("XSKMAP handed over: %w", err))
	}
	fds[0] = -1
	if info, err := p.xsks.Info(); err != nil || info.Type != ebpf.XSKMap {
		return fail(fmt.Errorf("the map handed over is not an XSKMAP (%v)", err))
	}
	if p.prog, err = ebpf.NewProgramFromFD(progFD); err != nil {
		return fail(fmt.Errorf("XDP program handed over: %w", err))
	}
	fds[1] = -1
	if p.lnk, err = link.NewFromFD(linkFD); err != nil {
		return fail(fmt.Errorf("XDP link handed over: %w", err))
	}
	fds[2] = -1
	registerXDP(p)
	return p, nil
}

// Describe reports the worker's UMEM, frames and sockets for a handover,
// after releasing each socket's last batch. The owner must be parked
// between batches (its frames no longer read) and the sockets' rings
// published; the worker may go on afterwards if the handover is called off.
func (w *Worker) Describe() (WorkerState, error) {
	if w.unmapped {
		return WorkerState{}, pktio.ErrClosed
	}
	for _, s := range w.list {
		s.Release()
		s.rx.release()
		s.comp.release()
		s.fill.publish()
		s.tx.publish()
	}
	st := WorkerState{MemFD: w.memfd, Config: w.cfg, ZeroCopy: w.zeroCopy,
		State: append([]uint8(nil), w.state...), Owner: append(U16s(nil), w.owner...),
		Free: append(U32s(nil), w.free[:w.nfree]...)}
	for _, s := range w.list {
		st.Sockets = append(st.Sockets, SocketState{Port: s.port.Name, Queue: s.queue, Slot: s.slot, FD: s.fd,
			FillOut: s.fillOut, NAPISet: s.napiSet})
	}
	return st, nil
}

// AdoptedSocket is one socket of a WorkerState to take over: its port in
// this process and this process's copy of its fd.
type AdoptedSocket struct {
	Port *Port
	FD   int
}

// MemFD is the descriptor of the worker's UMEM (a memfd), for a
// handover: fixed for the worker's life. Any goroutine.
func (w *Worker) MemFD() int { return w.memfd }

// UMEM is another process's UMEM mapped here ahead of AdoptWorker (a hot
// restart maps it before the pause, which then costs less).
type UMEM struct {
	memfd int
	mem   []byte
}

// MapUMEM maps the whole memfd (this process's copy of another's
// Worker.MemFD); it becomes the UMEM's (closed by Close or by the
// AdoptWorker it goes to, also when MapUMEM fails).
func MapUMEM(memfd int) (*UMEM, error) {
	size, err := fstatSize(memfd)
	if err == nil && size <= 0 {
		err = fmt.Errorf("%d bytes", size)
	}
	if err != nil {
		unix.Close(memfd)
		return nil, fmt.Errorf("pktio: UMEM handed over: %w", err)
	}
	mem, err := unix.Mmap(memfd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		unix.Close(memfd)
		return nil, fmt.Errorf("pktio: UMEM handed over (%d bytes): %w", size, err)
	}
	// This mapping is new, its frames the predecessor's: touched now, before
	// the pause, not frame by frame while the rings' backlog waits
	// (pktio/prefault.go).
	pktio.Prefault(mem)
	return &UMEM{memfd: memfd, mem: mem}, nil
}

// Close releases a UMEM no AdoptWorker took.
func (u *UMEM) Close() error {
	if u == nil || u.mem == nil {
		return nil
	}
	err := unix.Munmap(u.mem)
	u.mem = nil
	return errors.Join(err, unix.Close(u.memfd))
}

// AdoptWorker builds a Worker around another process's UMEM and sockets
// (Describe there): memfd and the fds of socks (by the index of
// st.Sockets; a nil Port or negative FD: not taken over, its frames stay
// out of use) become the Worker's, closed by Close, also when AdoptWorker
// fails. The sockets are counted in their ports but not put in their maps:
// they are in them already.
func AdoptWorker(st WorkerState, memfd int, socks []AdoptedSocket) (*Worker, error) {
	return adoptWorker(st, memfd, nil, socks)
}

// AdoptWorkerUMEM is AdoptWorker with the UMEM mapped already (MapUMEM);
// u becomes the Worker's.
func AdoptWorkerUMEM(st WorkerState, u *UMEM, socks []AdoptedSocket) (*Worker, error) {
	memfd, mem := u.memfd, u.mem
	u.mem = nil // the worker's now
	return adoptWorker(st, memfd, mem, socks)
}

func adoptWorker(st WorkerState, memfd int, mem []byte, socks []AdoptedSocket) (_ *Worker, err error) {
	closeFDs := func() {
		if mem != nil {
			unix.Munmap(mem)
		}
		unix.Close(memfd)
		for _, a := range socks {
			if a.FD >= 0 {
				unix.Close(a.FD)
			}
		}
	}
	cfg, err := st.Config.withDefaults()
	if err != nil {
		closeFDs()
		return nil, err
	}
	n := cfg.Frames
	if len(st.State) != n || len(st.Owner) != n || len(st.Free) > n || len(socks) != len(st.Sockets) {
		closeFDs()
		return nil, fmt.Errorf("pktio: AF_XDP worker handed over: %d frames, %d states, %d owners, %d free, %d of %d sockets",
			n, len(st.State), len(st.Owner), len(st.Free), len(socks), len(st.Sockets))
	}
	if size, err := fstatSize(memfd); err != nil || size != int64(n*cfg.FrameSize) {
		closeFDs()
		return nil, fmt.Errorf("pktio: UMEM handed over: %d bytes for %d frames (%v)", size, n, err)
	}
	w, err := newWorkerOn(cfg, memfd, mem)
	if err != nil {
		closeFDs()
		return nil, err
	}
	copy(w.state, st.State)
	copy(w.owner, st.Owner)
	w.nfree = copy(w.free, st.Free)
	w.zeroCopy = st.ZeroCopy
	for _, f := range w.free[:w.nfree] {
		if int(f) >= n {
			err = fmt.Errorf("pktio: AF_XDP worker handed over: free frame %d of %d", f, n)
		}
	}
	for i, ss := range st.Sockets {
		a := socks[i]
		if err != nil || a.Port == nil || a.FD < 0 {
			if a.FD >= 0 {
				unix.Close(a.FD)
			}
			continue
		}
		var s *Socket
		if s, err = w.adoptSocket(a.Port, ss, a.FD); err != nil {
			continue
		}
		for len(w.socks) <= ss.Slot {
			w.socks = append(w.socks, nil)
		}
		if w.socks[ss.Slot] != nil {
			s.close()
			err = fmt.Errorf("pktio: AF_XDP worker handed over: slot %d twice", ss.Slot)
			continue
		}
		w.socks[ss.Slot] = s
		w.live++
		if aerr := w.poller.Add(s); aerr != nil {
			err = aerr
		}
		a.Port.mu.Lock()
		a.Port.socks[s] = struct{}{}
		a.Port.mu.Unlock()
	}
	w.setFillTarget()
	w.rebuildList()
	if err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

func fstatSize(fd int) (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	return st.Size, nil
}

// adoptSocket maps the rings of a handed-over XDP socket and continues
// each where the other process left it.
func (w *Worker) adoptSocket(p *Port, ss SocketState, fd int) (_ *Socket, err error) {
	if dom, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN); err != nil || dom != unix.AF_XDP {
		unix.Close(fd)
		return nil, fmt.Errorf("pktio: %s queue %d: fd %d is not an XDP socket (%v)", p.Name, ss.Queue, fd, err)
	}
	if ss.Queue < 0 || ss.Queue >= p.queues || ss.Slot < 0 || ss.Slot >= 1<<16 || ss.FillOut < 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("pktio: %s: socket of queue %d, slot %d handed over", p.Name, ss.Queue, ss.Slot)
	}
	unix.CloseOnExec(fd)
	s := &Socket{w: w, port: p, queue: ss.Queue, slot: ss.Slot, fd: fd, headroom: w.cfg.Headroom,
		zeroCopy: w.zeroCopy, fillOut: ss.FillOut, napiSet: ss.NAPISet, batch: make([]uint32, 0, w.cfg.RingSize)}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if err := s.mapRings(w.cfg.RingSize); err != nil {
		return nil, fmt.Errorf("pktio: %s queue %d: %w", p.Name, ss.Queue, err)
	}
	// Consumer rings continue at what the other process released,
	// producer rings at what it published.
	for _, r := range []*xdpRing{&s.rx.xdpRing, &s.comp.xdpRing} {
		r.local = loadShared(r.consumer)
		r.cached = r.local
	}
	for _, r := range []*xdpRing{&s.fill.xdpRing, &s.tx.xdpRing} {
		r.local = loadShared(r.producer)
		r.cached = loadShared(r.consumer)
	}
	return s, nil
}

// Socket returns the worker's socket on queue q of p (nil: none), e.g.
// one AdoptWorker took over. Owner goroutine.
func (w *Worker) Socket(p *Port, q int) *Socket {
	for _, s := range w.list {
		if s.port == p && s.queue == q {
			return s
		}
	}
	return nil
}

// U16s and U32s encode in JSON as base64 of their little-endian bytes:
// the pause carries a worker's arrays (tens of thousands of entries), and
// decoding them as JSON numbers took 2.6 ms a worker, base64 a tenth.
type (
	U16s []uint16
	U32s []uint32
)

func (a U16s) MarshalJSON() ([]byte, error) {
	b := make([]byte, 2*len(a))
	for i, v := range a {
		binary.LittleEndian.PutUint16(b[2*i:], v)
	}
	return json.Marshal(b)
}

func (a *U16s) UnmarshalJSON(d []byte) error {
	var b []byte
	if err := json.Unmarshal(d, &b); err != nil {
		return err
	}
	if len(b)%2 != 0 {
		return fmt.Errorf("pktio: %d bytes of 16-bit entries", len(b))
	}
	*a = make(U16s, len(b)/2)
	for i := range *a {
		(*a)[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return nil
}

func (a U32s) MarshalJSON() ([]byte, error) {
	b := make([]byte, 4*len(a))
	for i, v := range a {
		binary.LittleEndian.PutUint32(b[4*i:], v)
	}
	return json.Marshal(b)
}

func (a *U32s) UnmarshalJSON(d []byte) error {
	var b []byte
	if err := json.Unmarshal(d, &b); err != nil {
		return err
	}
	if len(b)%4 != 0 {
		return fmt.Errorf("pktio: %d bytes of 32-bit entries", len(b))
	}
	*a = make(U32s, len(b)/4)
	for i := range *a {
		(*a)[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return nil
}

// loadShared reads a ring index the kernel (or the other process) writes.
func loadShared(p *uint32) uint32 { return atomic.LoadUint32(p) }
