package pktio

// backend: what the two packet I/O backends have in common, so that a
// worker loop can hold AF_PACKET queues and AF_XDP sockets side by side.
//
//	            receive              transmit
//	AF_PACKET   *Queue (per port)    *Tx (per owner and port)
//	AF_XDP      *XDPSocket (per worker, port and queue: both directions)
//
// Locking: none; interfaces only.

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

var (
	_ Receiver = (*Queue)(nil)
	_ Receiver = (*XDPSocket)(nil)
	_ Sender   = (*Tx)(nil)
	_ Sender   = (*XDPSocket)(nil)
)
