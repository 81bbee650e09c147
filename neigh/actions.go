package neigh

// What the table asks its owner to do: every writer call (Resolve, InputARP,
// Tick, the admin calls) appends to a caller-owned Actions, which the
// caller acts on and then Resets (its slices keep their capacity, so a
// reused Actions costs no allocations in steady state).
//
//   Requests:    ARP requests to send (broadcast while INCOMPLETE, unicast
//                probes in PROBE); the caller picks the sender IP.
//   Transmit:    queued packets whose neighbour resolved: complete Ethernet
//                frames, header included, to send on IfIndex.
//   Unreachable: queued packets whose resolution failed (the IPv4 packet,
//                without L2 header): answer with ICMP host unreachable, as
//                Linux's arp_error_report does.
//   Dropped:     queued packets dropped otherwise: the oldest ones, for the
//                queue's byte limit, and those of a removed entry (no data).
// Every packet Resolve queued comes back exactly once, in Transmit,
// Unreachable or Dropped, with the caller's mark.
//   Events:      resolutions, lladdr changes, failures and removals, in the
//                order they happened, for the bridge's neighbour-suppression
//                table and cached adjacencies.
//
// Locking: a Actions belongs to one caller at a time. Frames handed out
// belong to the caller from then on. A nil *Actions discards
// everything (the table still counts it).

import "github.com/netfwd/netfwd/wire"

// EventKind says what happened to an entry.
type EventKind uint8

const (
	// EventResolved: the entry became valid; LLAddr is its address.
	EventResolved EventKind = iota + 1
	// EventLLAddrChanged: the entry stayed valid with a new LLAddr.
	EventLLAddrChanged
	// EventFailed: resolution failed (INCOMPLETE or PROBE ran out of probes,
	// or an admin set FAILED); the entry is not usable.
	EventFailed
	// EventRemoved: the entry left the table (Reason says why).
	EventRemoved
)

var eventNames = [...]string{"", "resolved", "lladdr-changed", "failed", "removed"}

func (k EventKind) String() string {
	if int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "event(?)"
}

// RemoveReason says why an entry was removed.
type RemoveReason uint8

const (
	RemovedNone     RemoveReason = iota
	RemovedGC                    // periodic gc: FAILED or unused for gc_stale_time
	RemovedForcedGC              // forced gc when the table reached its limits
	RemovedFlush                 // interface down or address change
	RemovedAdmin                 // `neigh del`
)

var removeNames = [...]string{"", "gc", "forced-gc", "flush", "admin"}

func (r RemoveReason) String() string {
	if int(r) < len(removeNames) {
		return removeNames[r]
	}
	return "reason(?)"
}

// Event is one change the owner may want to mirror.
type Event struct {
	Kind    EventKind
	IfIndex uint32
	IP      wire.Addr4
	LLAddr  wire.MAC
	State   State // state after the change (NUDNone for removals)
	Reason  RemoveReason
}

// ARPRequest is an ARP request the table wants sent.
type ARPRequest struct {
	IfIndex uint32
	Target  wire.Addr4 // the address being resolved
	SrcMAC  wire.MAC   // the interface MAC given when the entry was created
	DstMAC  wire.MAC   // broadcast, or the known lladdr for a unicast probe
	Unicast bool
	// SrcHint is the source address of the newest queued packet (0 if none).
	// Linux's arp_solicit (arp_announce 0) uses it as the sender IP when it
	// is one of the router's addresses, else the interface's address for
	// the target's subnet.
	SrcHint wire.Addr4
}

// Build writes the request as an Ethernet frame into b (at least
// ARPFrameLen bytes) with senderIP as the ARP sender address, and returns
// its length (0 if b is too short).
func (r *ARPRequest) Build(b []byte, senderIP wire.Addr4) int {
	return wire.BuildARPRequest(b, r.SrcMAC, senderIP, r.Target, r.DstMAC)
}

// Frame is a packet that left a neighbour's queue.
type Frame struct {
	IfIndex uint32
	IP      wire.Addr4 // the neighbour
	Data    []byte     // Transmit: whole Ethernet frame; Unreachable: the IPv4 packet; Dropped: nil
	Mark    uint8      // the caller's mark given to Resolve
}

// Actions collects what one or more writer calls ask the caller to do.
type Actions struct {
	Requests    []ARPRequest
	Transmit    []Frame
	Unreachable []Frame
	Dropped     []Frame
	Events      []Event
}

// Reset empties the lists, keeping their capacity and dropping the frames.
func (a *Actions) Reset() {
	clear(a.Transmit)
	clear(a.Unreachable)
	a.Requests = a.Requests[:0]
	a.Transmit = a.Transmit[:0]
	a.Unreachable = a.Unreachable[:0]
	a.Dropped = a.Dropped[:0]
	a.Events = a.Events[:0]
}

// Empty reports whether there is nothing to do.
func (a *Actions) Empty() bool {
	return len(a.Requests)+len(a.Transmit)+len(a.Unreachable)+len(a.Dropped)+len(a.Events) == 0
}

func (a *Actions) event(e Event) {
	if a != nil {
		a.Events = append(a.Events, e)
	}
}

func (a *Actions) request(r ARPRequest) {
	if a != nil {
		a.Requests = append(a.Requests, r)
	}
}

// dropped reports a packet that left n's queue unsent and unanswered.
func (a *Actions) dropped(n *entry, p queuedPacket) {
	a.Dropped = append(a.Dropped, Frame{IfIndex: n.IfIndex(), IP: n.IP(), Mark: p.mark})
}

// packetQueue is a FIFO of packet copies (Linux's arp_queue). Each buffer has
// wire.EthernetHeaderLen bytes of headroom for the header written when it resolves.
type packetQueue struct {
	first [2]queuedPacket // the ring's first storage: most queues never hold more
	bufs  []queuedPacket  // ring
	head  int
	n     int
	bytes int // charged bytes (truesize)
}

// queuedTruesize is what a queued packet is charged: its buffer (packet +
// header room) and the bookkeeping.
func queuedTruesize(b []byte) int { return len(b) + queuedPacketHeader }

// queuedPacket is one packet waiting: its buffer (header room, then the
// IPv4 packet) and the caller's mark.
type queuedPacket struct {
	buf  []byte
	mark uint8
}

// packet is the IPv4 packet, without the header room.
func (p queuedPacket) packet() []byte { return p.buf[wire.EthernetHeaderLen:] }

func (q *packetQueue) push(p queuedPacket) {
	if q.bufs == nil {
		q.bufs = q.first[:]
	}
	if q.n == len(q.bufs) {
		nb := make([]queuedPacket, 2*len(q.bufs))
		for i := 0; i < q.n; i++ {
			nb[i] = q.bufs[(q.head+i)%len(q.bufs)]
		}
		q.bufs, q.head = nb, 0
	}
	q.bufs[(q.head+q.n)%len(q.bufs)] = p
	q.n++
	q.bytes += queuedTruesize(p.buf)
}

// pop takes the oldest packet; ok is false when the queue is empty.
func (q *packetQueue) pop() (p queuedPacket, ok bool) {
	if q.n == 0 {
		return p, false
	}
	p = q.bufs[q.head]
	q.bufs[q.head] = queuedPacket{}
	q.head = (q.head + 1) % len(q.bufs)
	q.n--
	q.bytes -= queuedTruesize(p.buf)
	return p, true
}

// queuePushLocked appends p to n's queue and charges the global budget;
// an entry whose queue becomes non-empty joins the tail of the pending list.
func (t *Table) queuePushLocked(n *entry, p queuedPacket) {
	n.queue.push(p)
	t.queuedBytes += queuedTruesize(p.buf)
	t.queuedPackets++
	if !n.links[pendList].on {
		t.listPushLocked(pendList, n)
	}
}

// queuePopLocked takes n's oldest packet, uncharging the global budget.
func (t *Table) queuePopLocked(n *entry) (queuedPacket, bool) {
	p, ok := n.queue.pop()
	if !ok {
		return p, false
	}
	t.queuedBytes -= queuedTruesize(p.buf)
	t.queuedPackets--
	if n.queue.n == 0 {
		t.listUnlinkLocked(pendList, n)
	}
	return p, true
}

// maxFreeBytes bounds the recycled packet buffers when there is no global
// budget (with one, they are bounded by it).
const maxFreeBytes = DefaultUnresQlenBytesTotal

// recycleLocked keeps the buffer of a packet that left a queue without being
// handed to the caller, for the next packet queued: a flood to unresolved
// hosts then churns no memory. The buffers kept are bounded in bytes by the
// global budget, so queued and recycled buffers together hold at most twice it.
func (t *Table) recycleLocked(b []byte) {
	limit := t.p.UnresQlenBytesTotal
	if limit == 0 {
		limit = maxFreeBytes
	}
	if b != nil && t.freeBytes+cap(b) <= limit {
		t.freeBufs = append(t.freeBufs, b)
		t.freeBytes += cap(b)
	}
}

// bufLocked returns a buffer of n bytes, recycled when the newest recycled
// one is large enough.
func (t *Table) bufLocked(n int) []byte {
	if k := len(t.freeBufs); k > 0 && cap(t.freeBufs[k-1]) >= n {
		b := t.freeBufs[k-1]
		t.freeBufs[k-1] = nil
		t.freeBufs = t.freeBufs[:k-1]
		t.freeBytes -= cap(b)
		return b[:n]
	}
	return make([]byte, n)
}

// newest returns the most recently queued packet, or nil.
func (q *packetQueue) newest() []byte {
	if q.n == 0 {
		return nil
	}
	return q.bufs[(q.head+q.n-1)%len(q.bufs)].packet()
}

// packetSource returns an IPv4 packet's source address, 0 if it has none.
func packetSource(pkt []byte) wire.Addr4 {
	if len(pkt) < 20 || pkt[0]>>4 != 4 {
		return 0
	}
	return wire.IPv4(pkt).Src()
}
