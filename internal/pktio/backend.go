package pktio

// backend: what the two packet I/O backends have in common, so that a
// worker loop can hold AF_PACKET queues and AF_XDP sockets side by side
// without naming either.
//
//	                     receive                 transmit
//	afpacket (AF_PACKET) *Queue (per port)       *Tx (per owner and port)
//	afxdp (AF_XDP)       *Socket (per worker, port and queue: both directions)
//
// Waiting: an owner of AF_PACKET queues parks in a Poller (epoll in the Go
// netpoller); an owner of AF_XDP sockets in its afxdp.Worker, which also
// waits for AF_PACKET queues given to it (Add). Both are Waiters, and an
// AF_PACKET queue is Waitable for either.
//
// Locking: none; interfaces only.

import "net"

// ErrClosed is returned by receives and sends after the port shut down,
// and by Wait after the waiter closed.
var ErrClosed = net.ErrClosed

// MaxQueues bounds the receive queues of a port, in either backend.
const MaxQueues = 64

// Receiver is a receive queue with one owner goroutine: Recv waits, TryRecv
// does not; frames stay valid until the next Recv, TryRecv or Release on
// the same Receiver; frames[i][Headroom():] is the frame.
type Receiver interface {
	Recv(frames [][]byte, meta []Meta) (int, error)
	TryRecv(frames [][]byte, meta []Meta) (int, error)
	Release()
	Headroom() int
}

// Sender transmits batches on one port for one owner goroutine.
type Sender interface {
	Send(frames [][]byte, offl []Offload) (int, error)
}

// Waitable is a receive queue a Waiter can wait for.
type Waitable interface {
	// Ready reports, without a system call, whether a receive would return
	// frames (or ErrClosed) now.
	Ready() bool
	// PollFd is the fd whose readability signals new frames (-1: none).
	PollFd() int
}

// Waiter parks its owner goroutine until one of its queues has frames or
// Wake is called. Add, Remove, Wait, Detach and Attach belong to the
// owner; Wake to any goroutine.
type Waiter interface {
	Add(q Waitable) error
	Remove(q Waitable)
	Wait() error
	Wake()
	// Detach stops the queues' wake-ups from reaching the waiter (their
	// fds leave its epoll set) until Attach; owner goroutine.
	Detach()
	Attach() error
}

var _ Waiter = (*Poller)(nil)
