package afpacket

// handover: passing a Port's receive sockets, with their rings and the
// frames in them, to another process (a hot restart, internal/handover).
//
// A packet socket's receive ring belongs to the socket, not to the process
// that mapped it: a second process that holds the same socket (its fd
// duplicated with pidfd_getfd or SCM_RIGHTS) maps the very ring, frames
// already received included, and the socket stays in the port's fanout
// group and promiscuous membership throughout. Only the reader's position
// is process state: the old process stops its owners at a batch boundary
// (everything returned so far released), reads the positions
// (QueuePositions) and the new one continues from them (SetQueuePositions).
// Frames that arrive between the two wait in the ring, as they do while a
// worker is off the CPU: nothing is lost unless the pause outlasts the
// ring's depth.
//
// The old process then closes its copies: the sockets live on in the new
// one. Transmit handles are not handed over (each process opens its own).
//
// Locking: Describe and QueuePositions are called with the queues' owners
// paused; Adopt builds a new Port before any owner runs.

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/pktio"
)

// PortState is what another process needs to take a Port's receive
// sockets over: the ring layout they were set up with and the fds (in the
// handing process) of the queues, in order.
type PortState struct {
	Name   string
	Index  int
	Config Config
	Fanout int
	FDs    []int
}

// QueuePosition is a receive queue's reader position in its ring.
type QueuePosition struct {
	Cur     int  `json:"cur"`
	Off     int  `json:"off,omitempty"`  // V3: offset of the next frame in block Cur
	Left    int  `json:"left,omitempty"` // V3: frames left in block Cur
	InBlock bool `json:"in_block,omitempty"`
}

// Describe reports the port's receive sockets for a handover.
func (p *Port) Describe() (PortState, error) {
	st := PortState{Name: p.Name, Index: p.Index, Config: p.cfg, Fanout: p.fanoutID}
	for _, q := range p.queues {
		fd := -1
		if err := q.sock.control(func(f int) error { fd = f; return nil }); err != nil {
			return PortState{}, fmt.Errorf("pktio: %s queue %d: %w", p.Name, q.idx, err)
		}
		st.FDs = append(st.FDs, fd)
	}
	return st, nil
}

// QueuePositions reads where each queue's owner stopped. The owners must
// be paused with their batches released.
func (p *Port) QueuePositions() ([]QueuePosition, error) {
	pos := make([]QueuePosition, len(p.queues))
	for i, q := range p.queues {
		if q.v2 != nil {
			if q.v2.held != 0 {
				return nil, fmt.Errorf("pktio: %s queue %d: %d frames not released", p.Name, i, q.v2.held)
			}
			pos[i] = QueuePosition{Cur: q.v2.cur}
			continue
		}
		if q.held != 0 {
			return nil, fmt.Errorf("pktio: %s queue %d: %d blocks not released", p.Name, i, q.held)
		}
		pos[i] = QueuePosition{Cur: q.cur, Off: q.off, Left: q.left, InBlock: q.inBlock}
	}
	return pos, nil
}

// SetQueuePositions makes the queues continue where another process's
// reader stopped (QueuePositions there), and puts an adopted port's
// sockets into this process's netpoller (Adopt left them out). Before the
// owners run.
func (p *Port) SetQueuePositions(pos []QueuePosition) error {
	if len(pos) != len(p.queues) {
		return fmt.Errorf("pktio: %s: %d positions for %d queues", p.Name, len(pos), len(p.queues))
	}
	for i, q := range p.queues {
		if err := q.sock.poll(); err != nil {
			return fmt.Errorf("pktio: %s queue %d: %w", p.Name, i, err)
		}
	}
	for i, q := range p.queues {
		ps := pos[i]
		if q.v2 != nil {
			if ps.Cur < 0 || ps.Cur >= q.v2.slots {
				return fmt.Errorf("pktio: %s queue %d: slot %d outside the ring", p.Name, i, ps.Cur)
			}
			q.v2.cur = ps.Cur
			continue
		}
		if ps.Cur < 0 || ps.Cur >= q.blocks || ps.Off < 0 || ps.Off >= q.blockSize || ps.Left < 0 {
			return fmt.Errorf("pktio: %s queue %d: position %+v outside the ring", p.Name, i, ps)
		}
		q.cur, q.off, q.left, q.inBlock = ps.Cur, ps.Off, ps.Left, ps.InBlock
	}
	return nil
}

// Adopt builds a Port around receive sockets another process set up
// (Describe there); fds are this process's copies, in queue order, and
// become the Port's (closed by Close, also when Adopt fails). It runs in the
// namespace of the interface, as Open does. The readers start at the
// rings' first slot: SetQueuePositions moves them. The sockets stay out of
// this process's netpoller until then: the running daemon still reads
// them, and each frame it receives would wake this process's netpoller
// (as the successor's frames woke the paused predecessor's: 19 ms of a
// CPU in 60 ms), for the whole of the successor's start.
func Adopt(st PortState, fds []int) (p *Port, err error) {
	var socks []*rawSocket
	defer func() {
		if err != nil {
			for _, s := range socks {
				s.close()
			}
			for _, fd := range fds[len(socks):] {
				unix.Close(fd)
			}
		}
	}()
	if len(fds) != len(st.FDs) || len(fds) == 0 {
		return nil, fmt.Errorf("pktio: %s: %d sockets handed over for %d queues", st.Name, len(fds), len(st.FDs))
	}
	for _, fd := range fds {
		s, err := adoptedSocket(fd, st.Name)
		if err != nil {
			return nil, err
		}
		socks = append(socks, s)
	}
	cfg := st.Config
	if cfg.Queues != len(fds) {
		return nil, fmt.Errorf("pktio: %s: the handed-over layout has %d queues, %d sockets came", st.Name, cfg.Queues, len(fds))
	}
	ifi, err := net.InterfaceByName(st.Name)
	if err != nil {
		return nil, fmt.Errorf("pktio: interface %q: %w", st.Name, err)
	}
	if ifi.Index != st.Index {
		return nil, fmt.Errorf("pktio: %s: ifindex %d, the handed-over sockets are bound to %d", st.Name, ifi.Index, st.Index)
	}
	ns, err := pktio.CurrentNetns()
	if err != nil {
		return nil, fmt.Errorf("pktio: %s: %w", st.Name, err)
	}
	p = &Port{Name: ifi.Name, Index: ifi.Index, MAC: ifi.HardwareAddr, MTU: ifi.MTU,
		cfg: cfg, ifi: ifi, netns: ns, fanoutID: st.Fanout}
	p.mtu.Store(int32(ifi.MTU))
	for i, s := range socks {
		q := &Queue{port: p, idx: i, sock: s, blockSize: cfg.BlockSize, blocks: cfg.Blocks,
			headroom: cfg.Headroom, vnet: !cfg.NoOffload, keepPartial: cfg.KeepPartialChecksum}
		q.waitFn = q.wait
		if cfg.Ring == RingV2 {
			q.initV2(&cfg)
			err = q.mapV2(s, &cfg)
		} else {
			q.ring, err = s.mmap(cfg.BlockSize * cfg.Blocks)
		}
		if err != nil {
			for _, q := range p.queues {
				q.unmap()
			}
			return nil, fmt.Errorf("pktio: %s queue %d: %w", st.Name, i, err)
		}
		p.queues = append(p.queues, q)
	}
	socks = nil // the Port's now: Close closes them
	return p, nil
}

// adoptedSocket wraps a handed-over packet socket (non-blocking, as the
// handing process opened it): a bare fd until poll puts it into the Go
// netpoller.
func adoptedSocket(fd int, name string) (*rawSocket, error) {
	dom, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil || dom != unix.AF_PACKET {
		return nil, fmt.Errorf("pktio: %s: fd %d is not a packet socket (%v)", name, fd, err)
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, err
	}
	return &rawSocket{fd: fd, name: name, adopted: true}, nil
}
