package neigh

// The neighbour (ARP) table: IPv4 next hops resolved to Ethernet addresses,
// with the state machine, timers and limits of Linux's net/core/neighbour.c
// and net/ipv4/arp.c (docs/neigh.md lists every deliberate difference).
//
// Flow:
//   - forwarding path: Worker.Output(ifindex, ip, hdr) looks the entry up
//     without locks and, when it is usable, writes the 14-byte Ethernet header
//     (the adjacency) into the frame. Anything else goes to the slow path,
//     Worker.Resolve, which creates an INCOMPLETE entry, queues a copy
//     of the packet and asks for an ARP request.
//   - ARP input: Worker.InputARP validates a received frame, learns as
//     arp_process does and writes the reply to requests for our addresses.
//   - housekeeping: one goroutine calls Table.Tick(now) (no timer or
//     goroutine per entry); Tick runs the expired entry timers and the
//     periodic gc and returns what to do in an Actions.
//   - admin: Add/Replace/Change/Delete/FlushDev, Dump and the show formats.
//
// Locking: datapath readers never lock. They search the index (package
// hashindex: lock-free readers, one writer) and read an entry's packed word (state + lladdr) with one atomic load. The
// datapath writes only two things: an entry's sent time (the table's coarse
// clock, when it differs: the forced gc spares entries in use), and its
// touched flag (a STALE entry was used): it pushes the entry on a lock-free
// stack, and the next writer call moves it to DELAY with that call's clock.
// InputARP also reads learnPaused (an atomic mirror of "gc_thresh2 reached")
// to skip unknown senders without the lock. Everything else, every
// entry's writer-side fields, the timers, the gc list, the index's writes
// and the table counters, is guarded by Table.mu; functions that expect
// it held end in Locked.

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netfwd/netfwd/internal/hashindex"
	"github.com/netfwd/netfwd/wire"
)

// State is a NUD state, with the kernel's bit values (so masks and
// `ip neigh show nud` filters work the same way).
type State uint8

const (
	NUDNone       State = 0x00
	NUDIncomplete State = 0x01
	NUDReachable  State = 0x02
	NUDStale      State = 0x04
	NUDDelay      State = 0x08
	NUDProbe      State = 0x10
	NUDFailed     State = 0x20
	NUDNoARP      State = 0x40
	NUDPermanent  State = 0x80
)

// The kernel's state classes.
const (
	// nudInTimer: states that run the entry timer.
	nudInTimer = NUDIncomplete | NUDReachable | NUDDelay | NUDProbe
	// nudValid: states with a usable lladdr; the datapath sends in all of them.
	nudValid = NUDPermanent | NUDNoARP | NUDReachable | NUDProbe | NUDStale | NUDDelay
	// nudConnected: states that need no confirmation.
	nudConnected = NUDPermanent | NUDNoARP | NUDReachable
)

var stateNames = [...]struct {
	s    State
	name string
}{
	{NUDIncomplete, "INCOMPLETE"}, {NUDReachable, "REACHABLE"}, {NUDStale, "STALE"},
	{NUDDelay, "DELAY"}, {NUDProbe, "PROBE"}, {NUDFailed, "FAILED"},
	{NUDNoARP, "NOARP"}, {NUDPermanent, "PERMANENT"},
}

// String is the name `ip neigh show` prints ("NONE" for the empty state).
func (s State) String() string {
	for _, n := range stateNames {
		if s == n.s {
			return n.name
		}
	}
	if s == NUDNone {
		return "NONE"
	}
	return fmt.Sprintf("NUD(%#x)", uint8(s))
}

// Valid reports whether the state has a usable link-layer address.
func (s State) Valid() bool { return s&nudValid != 0 }

// ParseState parses an iproute2 `nud` keyword.
func ParseState(s string) (State, error) {
	switch s {
	case "permanent":
		return NUDPermanent, nil
	case "reachable":
		return NUDReachable, nil
	case "stale":
		return NUDStale, nil
	case "noarp":
		return NUDNoARP, nil
	case "delay":
		return NUDDelay, nil
	case "probe":
		return NUDProbe, nil
	case "incomplete":
		return NUDIncomplete, nil
	case "failed":
		return NUDFailed, nil
	case "none":
		return NUDNone, nil
	}
	return 0, fmt.Errorf("nud state %q is bad", s)
}

// Params are the ARP table's tunables (Linux's net.ipv4.neigh.default.*
// sysctls, with their defaults from DefaultParams).
type Params struct {
	BaseReachableTime   time.Duration // base_reachable_time: REACHABLE lasts 0.5x-1.5x this
	RetransTime         time.Duration // retrans_time: between ARP requests
	DelayFirstProbeTime time.Duration // delay_first_probe_time: DELAY before PROBE
	UcastProbes         int           // ucast_solicit: unicast probes in PROBE
	McastProbes         int           // mcast_solicit: broadcast requests in INCOMPLETE
	McastReprobes       int           // mcast_resolicit: broadcast probes after the unicast ones in PROBE
	GCStaleTime         time.Duration // gc_stale_time: unused entries older than this are collected
	Locktime            time.Duration // locktime: an lladdr is not overridden sooner than this
	UnresQlenBytes      int           // unres_qlen_bytes: packets queued per unresolved entry
	// UnresQlenBytesTotal bounds the packets queued in all unresolved
	// entries together (netfwd's; Linux has only the per-entry limit, so a
	// flood to unresolved hosts could hold gc_thresh3 x unres_qlen_bytes).
	// 0: no global limit.
	UnresQlenBytesTotal int
	GCThresh1           int // gc_thresh1: no periodic gc below this many entries
	GCThresh2           int // gc_thresh2: soft limit, forced gc at most every 5 s above it
	GCThresh3           int // gc_thresh3: hard limit on non-permanent entries
}

// DefaultParams returns Linux's defaults for the ARP table. Linux's
// gc_interval (30 s) has no effect since the periodic gc became a work item
// run every base_reachable_time/2; the same is true here.
func DefaultParams() Params {
	return Params{
		BaseReachableTime:   30 * time.Second,
		RetransTime:         1 * time.Second,
		DelayFirstProbeTime: 5 * time.Second,
		UcastProbes:         3,
		McastProbes:         3,
		McastReprobes:       0,
		GCStaleTime:         60 * time.Second,
		Locktime:            1 * time.Second,
		UnresQlenBytes:      212992,
		UnresQlenBytesTotal: DefaultUnresQlenBytesTotal,
		GCThresh1:           128,
		GCThresh2:           512,
		GCThresh3:           1024,
	}
}

func (p Params) validate() error {
	switch {
	case p.BaseReachableTime <= 0 || p.RetransTime <= 0 || p.DelayFirstProbeTime <= 0 ||
		p.GCStaleTime <= 0 || p.Locktime < 0:
		return errors.New("neigh: times must be positive")
	case p.UcastProbes < 0 || p.McastProbes < 0 || p.McastReprobes < 0:
		return errors.New("neigh: probe counts must not be negative")
	case p.UnresQlenBytes < 0 || p.UnresQlenBytesTotal < 0:
		return errors.New("neigh: unres_qlen_bytes must not be negative")
	case p.GCThresh1 < 0 || p.GCThresh2 < 0 || p.GCThresh3 <= 0:
		return errors.New("neigh: gc thresholds must be positive")
	}
	return nil
}

// DefaultUnresQlenBytesTotal is the default global budget of queued
// packets: 4 MiB, about 2,800 full-size packets or twenty entries' worth of
// unres_qlen_bytes.
const DefaultUnresQlenBytesTotal = 4 << 20

// Config configures a table.
type Config struct {
	Params Params
	// Seed seeds the reachable-time randomisation (0: random). Tests fix it
	// to compare against the reference model.
	Seed uint64
}

// Kernel constants that are not sysctls.
const (
	timerMin           = 10 * int64(time.Millisecond) // HZ/100: shortest timer
	forcedGCAge        = 5 * int64(time.Second)       // forced gc spares entries updated this recently
	randInterval       = 300 * int64(time.Second)     // reachable_time is re-randomised this often
	queuedPacketHeader = 64                           // bookkeeping charged per queued packet, on top of its buffer
)

// Key packing: ifindex in the high 32 bits, the IPv4 address in the low 32.
// ifindex 0 is invalid, so keys below 1<<32 are free for the index's markers.
func entryKey(ifindex uint32, ip wire.Addr4) uint64 { return uint64(ifindex)<<32 | uint64(ip) }

// Word packing: state in bits 0-7, dead flag in bit 8, lladdr in bits 16-63
// (little-endian, so word>>16 stored little-endian is the MAC in wire order).
const wordDead = 1 << 8

func macToWord(m wire.MAC) uint64 {
	var b [8]byte
	copy(b[:6], m[:])
	return binary.LittleEndian.Uint64(b[:]) << 16
}

func wordMAC(w uint64) (m wire.MAC) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], w>>16)
	copy(m[:], b[:6])
	return m
}

// entry is one neighbour entry. Its lock-free accessors (State, LLAddr,
// WriteHeader) may be called from any goroutine; a removed entry
// reports NUDNone and is never usable again (look the key up again).
type entry struct {
	// Datapath-visible.
	key         uint64                // immutable
	word        atomic.Uint64         // lladdr<<16 | dead<<8 | state; stored by the writer only
	hdrTail     uint64                // immutable: header bytes 6..13 (source MAC, EtherType) little-endian
	touched     atomic.Uint32         // 1 while on the table's touched stack
	nextTouched atomic.Pointer[entry] // touched stack link
	// sent is when the entry last carried traffic: the datapath stores the
	// table's coarse clock (set by Tick) when it differs, the writer its
	// clock when it sends or releases through the entry; minTime: never.
	// The forced gc spares entries that sent within gc_stale_time.
	sent atomic.Int64

	// Writer-side, guarded by Table.mu.
	ifMAC     wire.MAC
	confirmed int64 // last reachability confirmation
	updated   int64 // last state or lladdr change (locktime, forced gc)
	used      int64 // last use that the table saw (gc)
	probes    int
	timerAt   int64
	timerSeq  uint64 // tie-break for timers due at the same time
	heapIdx   int    // index in the timer heap, -1 when no timer is armed
	queue     packetQueue
	// links: its places on the gc list (every non-permanent entry is on
	// it) and the pending list (while packets are queued), list.go.
	links [numLists]listLink
	dead  bool // removed from the table
}

// IfIndex is the entry's interface.
func (n *entry) IfIndex() uint32 { return uint32(n.key >> 32) }

// IP is the entry's IPv4 address (host order).
func (n *entry) IP() wire.Addr4 { return wire.Addr4(n.key) }

// State is the entry's current state (one atomic load).
func (n *entry) State() State {
	w := n.word.Load()
	if w&wordDead != 0 {
		return NUDNone
	}
	return State(w)
}

// LLAddr is the entry's link-layer address and whether it is valid.
func (n *entry) LLAddr() (wire.MAC, bool) {
	w := n.word.Load()
	return wordMAC(w), w&wordDead == 0 && State(w)&nudValid != 0
}

// WriteHeader writes the adjacency (destination MAC, source MAC, EtherType
// IPv4) into b[0:14] and reports true when the entry is usable; it writes
// nothing otherwise. It costs one atomic load and two 8-byte stores.
func (n *entry) WriteHeader(b []byte) bool {
	w := n.word.Load()
	if State(w)&nudValid == 0 || w&wordDead != 0 {
		return false
	}
	writeHeader(b, w, n.hdrTail)
	return true
}

// writeHeader stores the header as two overlapping 8-byte words: bytes 0..7
// (dst MAC + garbage in 6..7), then bytes 6..13 (src MAC + EtherType).
func writeHeader(b []byte, w, tail uint64) {
	_ = b[13]
	binary.LittleEndian.PutUint64(b[0:8], w>>16)
	binary.LittleEndian.PutUint64(b[6:14], tail)
}

func headerTail(ifMAC wire.MAC) uint64 {
	var b [8]byte
	copy(b[:6], ifMAC[:])
	binary.BigEndian.PutUint16(b[6:], wire.EtherTypeIPv4)
	return binary.LittleEndian.Uint64(b[:])
}

// state is the writer's view (dead entries report NUDNone).
func (n *entry) state() State { return n.State() }

func (n *entry) mac() wire.MAC { return wordMAC(n.word.Load()) }

// Table is the ARP table of one router.
type Table struct {
	// Datapath-visible.
	index       hashindex.Index[entry]
	touchedHead atomic.Pointer[entry]
	coarseNow   atomic.Int64 // Tick's clock, for entry.sent
	// learnPaused: the table is at gc_thresh2 or more, so ARP requests
	// from unknown senders create nothing (read lock-free by InputARP).
	learnPaused atomic.Bool

	mu sync.Mutex
	// Everything below is guarded by mu.
	p             paramsNs
	rng           *mrand.Rand
	reachableTime int64 // current randomised reachable time
	lastRand      int64
	lastFlush     int64               // last forced gc
	nextGC        int64               // next periodic gc
	entries       int                 // all entries
	gcEntries     int                 // entries on the gc list (non-permanent)
	lists         [numLists]entryList // the gc and pending lists (list.go)
	// forcedGCIdleUntil: a forced gc now would find nothing to remove (no
	// entry on the gc list is FAILED, NOARP or INCOMPLETE, and every one was
	// updated within 5 s or sent within gc_stale_time). Exact, so skipping
	// the scan changes nothing but its cost.
	forcedGCIdleUntil int64
	// Packets queued in all entries (charged bytes) and the entries that
	// hold them, in the order their queues became non-empty (the global
	// budget drops from the head, round robin).
	queuedBytes, queuedPackets int      // the pending list is lists[pendList]
	freeBufs                   [][]byte // recycled packet buffers (recycleLocked)
	freeBytes                  int
	timers                     timerHeap
	timerSeq                   uint64
	stateCount                 [9]int // entries by state (bit index + 1; 0 = NONE)
	c                          tableCounters
	workers                    []*Worker
}

// paramsNs holds the parameters in nanoseconds for the arithmetic.
type paramsNs struct {
	Params
	base, retrans, delay, stale, locktime int64
}

// NewTable makes an empty table; now is the monotonic clock in
// nanoseconds that every later call continues.
func NewTable(cfg Config, now int64) (*Table, error) {
	if cfg.Params == (Params{}) {
		cfg.Params = DefaultParams()
	}
	if err := cfg.Params.validate(); err != nil {
		return nil, err
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = randomSeed()
	}
	p := cfg.Params
	t := &Table{
		p: paramsNs{Params: p,
			base: int64(p.BaseReachableTime), retrans: int64(p.RetransTime),
			delay: int64(p.DelayFirstProbeTime), stale: int64(p.GCStaleTime),
			locktime: int64(p.Locktime)},
		rng:               mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		forcedGCIdleUntil: minTime,
	}
	t.reachableTime = t.randReachableTimeLocked()
	t.lastFlush = now
	t.lastRand = now + t.reachableTime*20
	t.nextGC = now + t.reachableTime
	t.index.Init()
	t.coarseNow.Store(now)
	return t, nil
}

const minTime = -1 << 63

// randReachableTimeLocked is neigh_rand_reach_time: uniform in [base/2, 3base/2).
func (t *Table) randReachableTimeLocked() int64 {
	b := t.p.base
	return int64(t.rng.Uint64N(uint64(b))) + b>>1
}

// Params returns the table's parameters.
func (t *Table) Params() Params { return t.p.Params }

// ReachableTime is the current randomised reachable time.
func (t *Table) ReachableTime() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return time.Duration(t.reachableTime)
}

// Len is the number of entries.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.entries
}

// lookup returns the entry for (ifindex, ip), or nil. Lock-free; the entry
// may be removed at any time after (its State then reports NUDNone).
func (t *Table) lookup(ifindex uint32, ip wire.Addr4) *entry {
	return t.index.Get(entryKey(ifindex, ip))
}

// lockAt takes the writer lock and applies the datapath's pending STALE
// touches with the caller's clock, so every writer sees settled states.
func (t *Table) lockAt(now int64) {
	t.mu.Lock()
	t.drainTouchedLocked(now)
}

func randomSeed() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return uint64(time.Now().UnixNano())
	}
	return binary.LittleEndian.Uint64(b[:]) | 1
}

func stateSlot(s State) int {
	for i := 0; i < 8; i++ {
		if s == 1<<i {
			return i + 1
		}
	}
	return 0
}

// storeLocked publishes a new state and lladdr with one atomic store (so the
// datapath never sees a new state with an old address), keeps the per-state
// counts, records the owner's events and keeps the forced-gc shortcut exact.
func (t *Table) storeLocked(n *entry, s State, mac wire.MAC, out *Actions) {
	old := n.word.Load()
	oldState, oldMAC := State(old), wordMAC(old)
	if oldState == s && oldMAC == mac {
		return
	}
	n.word.Store(macToWord(mac) | uint64(s))
	if oldState != s {
		t.stateCount[stateSlot(oldState)]--
		t.stateCount[stateSlot(s)]++
		if forcedGCAlwaysRemovable(s) && n.links[gcList].on {
			t.forcedGCIdleUntil = minTime
		}
	}
	switch {
	case !oldState.Valid() && s.Valid():
		out.event(Event{Kind: EventResolved, IfIndex: n.IfIndex(), IP: n.IP(), LLAddr: mac, State: s})
	case oldState.Valid() && s.Valid() && oldMAC != mac:
		out.event(Event{Kind: EventLLAddrChanged, IfIndex: n.IfIndex(), IP: n.IP(), LLAddr: mac, State: s})
	case s == NUDFailed && oldState != NUDFailed:
		out.event(Event{Kind: EventFailed, IfIndex: n.IfIndex(), IP: n.IP(), LLAddr: mac, State: s})
	}
}

func (t *Table) setStateLocked(n *entry, s State, out *Actions) {
	t.storeLocked(n, s, n.mac(), out)
}
