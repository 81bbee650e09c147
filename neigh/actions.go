package l3

// What the table asks its owner to do: every writer call (Resolve, InputARP,
// Tick, the admin calls) appends to a caller-owned NeighActions, which the
// caller acts on and then Resets (its slices keep their capacity, so a
// reused NeighActions costs no allocations in steady state).
//
//   Requests:    ARP requests to send (broadcast while INCOMPLETE, unicast
//                probes in PROBE); the caller picks the sender IP.
//   Transmit:    queued packets whose neighbour resolved: complete Ethernet
//                frames, header included, to send on IfIndex.
//   Unreachable: queued packets whose resolution failed (the IPv4 packet,
//                without L2 header): answer with ICMP host unreachable, as
//                Linux's arp_error_report does.
//   Events:      resolutions, lladdr changes, failures and removals, in the
//                order they happened, for the bridge's neighbour-suppression
//                table and cached adjacencies.
//
// Locking: a NeighActions belongs to one caller at a time. Frames handed out
// belong to the caller from then on. A nil *NeighActions discards
// everything (the table still counts it).

import "encoding/binary"

// NeighEventKind says what happened to an entry.
type NeighEventKind uint8

const (
	// NeighResolved: the entry became valid; LLAddr is its address.
	NeighResolved NeighEventKind = iota + 1
	// NeighLLAddrChanged: the entry stayed valid with a new LLAddr.
	NeighLLAddrChanged
	// NeighFailed: resolution failed (INCOMPLETE or PROBE ran out of probes,
	// or an admin set FAILED); the entry is not usable.
	NeighFailed
	// NeighRemoved: the entry left the table (Reason says why).
	NeighRemoved
)

var neighEventNames = [...]string{"", "resolved", "lladdr-changed", "failed", "removed"}

func (k NeighEventKind) String() string {
	if int(k) < len(neighEventNames) {
		return neighEventNames[k]
	}
	return "event(?)"
}

// NeighRemoveReason says why an entry was removed.
type NeighRemoveReason uint8

const (
	NeighRemovedNone     NeighRemoveReason = iota
	NeighRemovedGC                         // periodic gc: FAILED or unused for gc_stale_time
	NeighRemovedForcedGC                   // forced gc when the table reached its limits
	NeighRemovedFlush                      // interface down or address change
	NeighRemovedAdmin                      // `neigh del`
)

var neighRemoveNames = [...]string{"", "gc", "forced-gc", "flush", "admin"}

func (r NeighRemoveReason) String() string {
	if int(r) < len(neighRemoveNames) {
		return neighRemoveNames[r]
	}
	return "reason(?)"
}

// NeighEvent is one change the owner may want to mirror.
type NeighEvent struct {
	Kind    NeighEventKind
	IfIndex uint32
	IP      uint32
	LLAddr  [6]byte
	State   NeighState // state after the change (NUDNone for removals)
	Reason  NeighRemoveReason
}

// ARPRequest is an ARP request the table wants sent.
type ARPRequest struct {
	IfIndex uint32
	Target  uint32  // the address being resolved
	SrcMAC  [6]byte // the interface MAC given when the entry was created
	DstMAC  [6]byte // broadcast, or the known lladdr for a unicast probe
	Unicast bool
	// SrcHint is the source address of the newest queued packet (0 if none).
	// Linux's arp_solicit (arp_announce 0) uses it as the sender IP when it
	// is one of the router's addresses, else the interface's address for
	// the target's subnet.
	SrcHint uint32
}

// Build writes the request as an Ethernet frame into b (at least
// ARPFrameLen bytes) with senderIP as the ARP sender address, and returns
// its length (0 if b is too short).
func (r *ARPRequest) Build(b []byte, senderIP uint32) int {
	return BuildARPRequest(b, r.SrcMAC, senderIP, r.Target, r.DstMAC)
}

// NeighFrame is a packet released from a neighbour's queue.
type NeighFrame struct {
	IfIndex uint32
	IP      uint32 // the neighbour
	Data    []byte // Transmit: whole Ethernet frame; Unreachable: the IPv4 packet
}

// NeighActions collects what one or more writer calls ask the caller to do.
type NeighActions struct {
	Requests    []ARPRequest
	Transmit    []NeighFrame
	Unreachable []NeighFrame
	Events      []NeighEvent
}

// Reset empties the lists, keeping their capacity and dropping the frames.
func (a *NeighActions) Reset() {
	clear(a.Transmit)
	clear(a.Unreachable)
	a.Requests = a.Requests[:0]
	a.Transmit = a.Transmit[:0]
	a.Unreachable = a.Unreachable[:0]
	a.Events = a.Events[:0]
}

// Empty reports whether there is nothing to do.
func (a *NeighActions) Empty() bool {
	return len(a.Requests)+len(a.Transmit)+len(a.Unreachable)+len(a.Events) == 0
}

func (a *NeighActions) event(e NeighEvent) {
	if a != nil {
		a.Events = append(a.Events, e)
	}
}

func (a *NeighActions) request(r ARPRequest) {
	if a != nil {
		a.Requests = append(a.Requests, r)
	}
}

// neighQueue is a FIFO of packet copies (Linux's arp_queue). Each buffer has
// ethHeaderLen bytes of headroom for the header written when it resolves.
type neighQueue struct {
	bufs  [][]byte // ring
	head  int
	n     int
	bytes int // charged bytes (truesize)
}

// queuedTruesize is what a queued packet is charged: its buffer (packet +
// header room) and the bookkeeping.
func queuedTruesize(b []byte) int { return len(b) + queuedPacketHeader }

func (q *neighQueue) push(b []byte) {
	if q.n == len(q.bufs) {
		nb := make([][]byte, max(2, 2*len(q.bufs)))
		for i := 0; i < q.n; i++ {
			nb[i] = q.bufs[(q.head+i)%len(q.bufs)]
		}
		q.bufs, q.head = nb, 0
	}
	q.bufs[(q.head+q.n)%len(q.bufs)] = b
	q.n++
	q.bytes += queuedTruesize(b)
}

func (q *neighQueue) pop() []byte {
	if q.n == 0 {
		return nil
	}
	b := q.bufs[q.head]
	q.bufs[q.head] = nil
	q.head = (q.head + 1) % len(q.bufs)
	q.n--
	q.bytes -= queuedTruesize(b)
	return b
}

// newest returns the most recently queued packet, or nil.
func (q *neighQueue) newest() []byte {
	if q.n == 0 {
		return nil
	}
	return q.bufs[(q.head+q.n-1)%len(q.bufs)]
}

// packetSource returns an IPv4 packet's source address, 0 if it has none.
func packetSource(pkt []byte) uint32 {
	if len(pkt) < 20 || pkt[0]>>4 != 4 {
		return 0
	}
	return binary.BigEndian.Uint32(pkt[12:16])
}
