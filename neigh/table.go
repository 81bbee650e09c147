package l3

// The neighbour (ARP) table: IPv4 next hops resolved to Ethernet addresses,
// with the state machine, timers and limits of Linux's net/core/neighbour.c
// and net/ipv4/arp.c (docs/neigh.md lists every deliberate difference).
//
// Flow:
//   - forwarding path: NeighWorker.Output(ifindex, ip, hdr) looks the entry up
//     without locks and, when it is usable, writes the 14-byte Ethernet header
//     (the adjacency) into the frame. Anything else goes to the slow path,
//     NeighWorker.Resolve, which creates an INCOMPLETE entry, queues a copy
//     of the packet and asks for an ARP request.
//   - ARP input: NeighWorker.InputARP validates a received frame, learns as
//     arp_process does and writes the reply to requests for our addresses.
//   - housekeeping: one goroutine calls NeighTable.Tick(now) (no timer or
//     goroutine per entry); Tick runs the expired entry timers and the
//     periodic gc and returns what to do in a NeighActions.
//   - admin: Add/Replace/Change/Delete/FlushDev, Dump and the show formats.
//
// Locking: datapath readers never lock. They load the current index
// (neighIndex, an open-addressing hash published through an atomic pointer)
// and read an entry's packed word (state + lladdr) with one atomic load. The
// only thing the datapath writes is an entry's touched flag (a STALE entry
// was used): it pushes the entry on a lock-free stack, and the next writer
// call moves it to DELAY with that call's clock. Everything else, every
// entry's writer-side fields, the timers, the gc list, the index's writes
// and the table counters, is guarded by NeighTable.mu; functions that expect
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
)

// NeighState is a NUD state, with the kernel's bit values (so masks and
// `ip neigh show nud` filters work the same way).
type NeighState uint8

const (
	NUDNone       NeighState = 0x00
	NUDIncomplete NeighState = 0x01
	NUDReachable  NeighState = 0x02
	NUDStale      NeighState = 0x04
	NUDDelay      NeighState = 0x08
	NUDProbe      NeighState = 0x10
	NUDFailed     NeighState = 0x20
	NUDNoARP      NeighState = 0x40
	NUDPermanent  NeighState = 0x80
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

var neighStateNames = [...]struct {
	s    NeighState
	name string
}{
	{NUDIncomplete, "INCOMPLETE"}, {NUDReachable, "REACHABLE"}, {NUDStale, "STALE"},
	{NUDDelay, "DELAY"}, {NUDProbe, "PROBE"}, {NUDFailed, "FAILED"},
	{NUDNoARP, "NOARP"}, {NUDPermanent, "PERMANENT"},
}

// String is the name `ip neigh show` prints ("NONE" for the empty state).
func (s NeighState) String() string {
	for _, n := range neighStateNames {
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
func (s NeighState) Valid() bool { return s&nudValid != 0 }

// ParseNeighState parses an iproute2 `nud` keyword.
func ParseNeighState(s string) (NeighState, error) {
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

// NeighParams are the ARP table's tunables (Linux's net.ipv4.neigh.default.*
// sysctls, with their defaults from DefaultNeighParams).
type NeighParams struct {
	BaseReachableTime   time.Duration // base_reachable_time: REACHABLE lasts 0.5x-1.5x this
	RetransTime         time.Duration // retrans_time: between ARP requests
	DelayFirstProbeTime time.Duration // delay_first_probe_time: DELAY before PROBE
	UcastProbes         int           // ucast_solicit: unicast probes in PROBE
	McastProbes         int           // mcast_solicit: broadcast requests in INCOMPLETE
	McastReprobes       int           // mcast_resolicit: broadcast probes after the unicast ones in PROBE
	GCStaleTime         time.Duration // gc_stale_time: unused entries older than this are collected
	Locktime            time.Duration // locktime: an lladdr is not overridden sooner than this
	UnresQlenBytes      int           // unres_qlen_bytes: packets queued per unresolved entry
	GCThresh1           int           // gc_thresh1: no periodic gc below this many entries
	GCThresh2           int           // gc_thresh2: soft limit, forced gc at most every 5 s above it
	GCThresh3           int           // gc_thresh3: hard limit on non-permanent entries
}

// DefaultNeighParams returns Linux's defaults for the ARP table. Linux's
// gc_interval (30 s) has no effect since the periodic gc became a work item
// run every base_reachable_time/2; the same is true here.
func DefaultNeighParams() NeighParams {
	return NeighParams{
		BaseReachableTime:   30 * time.Second,
		RetransTime:         1 * time.Second,
		DelayFirstProbeTime: 5 * time.Second,
		UcastProbes:         3,
		McastProbes:         3,
		McastReprobes:       0,
		GCStaleTime:         60 * time.Second,
		Locktime:            1 * time.Second,
		UnresQlenBytes:      212992,
		GCThresh1:           128,
		GCThresh2:           512,
		GCThresh3:           1024,
	}
}

func (p NeighParams) validate() error {
	switch {
	case p.BaseReachableTime <= 0 || p.RetransTime <= 0 || p.DelayFirstProbeTime <= 0 ||
		p.GCStaleTime <= 0 || p.Locktime < 0:
		return errors.New("neigh: times must be positive")
	case p.UcastProbes < 0 || p.McastProbes < 0 || p.McastReprobes < 0:
		return errors.New("neigh: probe counts must not be negative")
	case p.UnresQlenBytes < 0:
		return errors.New("neigh: unres_qlen_bytes must not be negative")
	case p.GCThresh1 < 0 || p.GCThresh2 < 0 || p.GCThresh3 <= 0:
		return errors.New("neigh: gc thresholds must be positive")
	}
	return nil
}

// NeighConfig configures a table.
type NeighConfig struct {
	Params NeighParams
	// Seed seeds the reachable-time randomisation (0: random). Tests fix it
	// to compare against the reference model.
	Seed uint64
}

// Kernel constants that are not sysctls.
const (
	neighTimerMin      = 10 * int64(time.Millisecond) // HZ/100: shortest timer
	neighForcedGCAge   = 5 * int64(time.Second)       // forced gc spares entries updated this recently
	neighRandInterval  = 300 * int64(time.Second)     // reachable_time is re-randomised this often
	ethHeaderLen       = 14
	etherTypeIPv4      = 0x0800
	queuedPacketHeader = 64 // bookkeeping charged per queued packet, on top of its buffer
)

// Key packing: ifindex in the high 32 bits, the IPv4 address in the low 32.
// ifindex 0 is invalid, so keys below 1<<32 are free for the index's markers.
func neighKey(ifindex, ip uint32) uint64 { return uint64(ifindex)<<32 | uint64(ip) }

// Word packing: state in bits 0-7, dead flag in bit 8, lladdr in bits 16-63
// (little-endian, so word>>16 stored little-endian is the MAC in wire order).
const neighWordDead = 1 << 8

func macToWord(m [6]byte) uint64 {
	var b [8]byte
	copy(b[:6], m[:])
	return binary.LittleEndian.Uint64(b[:]) << 16
}

func wordMAC(w uint64) (m [6]byte) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], w>>16)
	copy(m[:], b[:6])
	return m
}

// Neigh is one neighbour entry. Its lock-free accessors (State, LLAddr,
// WriteHeader, Adjacency) may be called from any goroutine; a removed entry
// reports NUDNone and is never usable again (look the key up again).
type Neigh struct {
	// Datapath-visible.
	key         uint64                // immutable
	word        atomic.Uint64         // lladdr<<16 | dead<<8 | state; stored by the writer only
	hdrTail     uint64                // immutable: header bytes 6..13 (source MAC, EtherType) little-endian
	touched     atomic.Uint32         // 1 while on the table's touched stack
	nextTouched atomic.Pointer[Neigh] // touched stack link

	// Writer-side, guarded by NeighTable.mu.
	ifMAC     [6]byte
	confirmed int64 // last reachability confirmation
	updated   int64 // last state or lladdr change (locktime, forced gc)
	used      int64 // last use that the table saw (gc)
	probes    int
	timerAt   int64
	timerSeq  uint64 // tie-break for timers due at the same time
	heapIdx   int    // index in the timer heap, -1 when no timer is armed
	queue     neighQueue
	gcPrev    *Neigh
	gcNext    *Neigh
	onGC      bool // on the gc list: every non-permanent entry is
	dead      bool // removed from the table
}

// IfIndex is the entry's interface.
func (n *Neigh) IfIndex() uint32 { return uint32(n.key >> 32) }

// IP is the entry's IPv4 address (host order).
func (n *Neigh) IP() uint32 { return uint32(n.key) }

// State is the entry's current state (one atomic load).
func (n *Neigh) State() NeighState {
	w := n.word.Load()
	if w&neighWordDead != 0 {
		return NUDNone
	}
	return NeighState(w)
}

// LLAddr is the entry's link-layer address and whether it is valid.
func (n *Neigh) LLAddr() ([6]byte, bool) {
	w := n.word.Load()
	return wordMAC(w), w&neighWordDead == 0 && NeighState(w)&nudValid != 0
}

// WriteHeader writes the adjacency (destination MAC, source MAC, EtherType
// IPv4) into b[0:14] and reports true when the entry is usable; it writes
// nothing otherwise. It costs one atomic load and two 8-byte stores.
func (n *Neigh) WriteHeader(b []byte) bool {
	w := n.word.Load()
	if NeighState(w)&nudValid == 0 || w&neighWordDead != 0 {
		return false
	}
	writeHeader(b, w, n.hdrTail)
	return true
}

// Adjacency returns the 14-byte Ethernet header the forwarding path copies,
// and whether the entry is usable.
func (n *Neigh) Adjacency() (h [14]byte, ok bool) {
	ok = n.WriteHeader(h[:])
	return h, ok
}

// writeHeader stores the header as two overlapping 8-byte words: bytes 0..7
// (dst MAC + garbage in 6..7), then bytes 6..13 (src MAC + EtherType).
func writeHeader(b []byte, w, tail uint64) {
	_ = b[13]
	binary.LittleEndian.PutUint64(b[0:8], w>>16)
	binary.LittleEndian.PutUint64(b[6:14], tail)
}

func headerTail(ifMAC [6]byte) uint64 {
	var b [8]byte
	copy(b[:6], ifMAC[:])
	binary.BigEndian.PutUint16(b[6:], etherTypeIPv4)
	return binary.LittleEndian.Uint64(b[:])
}

// state is the writer's view (dead entries report NUDNone).
func (n *Neigh) state() NeighState { return n.State() }

func (n *Neigh) mac() [6]byte { return wordMAC(n.word.Load()) }

// NeighTable is the ARP table of one router.
type NeighTable struct {
	// Datapath-visible.
	index       atomic.Pointer[neighIndex]
	touchedHead atomic.Pointer[Neigh]

	mu sync.Mutex
	// Everything below is guarded by mu.
	p             neighParamsNs
	rng           *mrand.Rand
	reachableTime int64 // current randomised reachable time
	lastRand      int64
	lastFlush     int64 // last forced gc
	nextGC        int64 // next periodic gc
	entries       int   // all entries
	gcEntries     int   // entries on the gc list (non-permanent)
	gcHead        *Neigh
	gcTail        *Neigh
	// forcedGCIdleUntil: a forced gc now would find nothing to remove (every
	// entry on the gc list was updated within 5 s and none is FAILED or
	// NOARP). Exact, so skipping the scan changes nothing but its cost.
	forcedGCIdleUntil int64
	timers            neighTimerHeap
	timerSeq          uint64
	stateCount        [9]int // entries by state (bit index + 1; 0 = NONE)
	c                 neighTableCounters
	workers           []*NeighWorker
}

// neighParamsNs holds the parameters in nanoseconds for the arithmetic.
type neighParamsNs struct {
	NeighParams
	base, retrans, delay, stale, locktime int64
}

// NewNeighTable makes an empty table; now is the monotonic clock in
// nanoseconds that every later call continues.
func NewNeighTable(cfg NeighConfig, now int64) (*NeighTable, error) {
	if cfg.Params == (NeighParams{}) {
		cfg.Params = DefaultNeighParams()
	}
	if err := cfg.Params.validate(); err != nil {
		return nil, err
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = randomSeed()
	}
	p := cfg.Params
	t := &NeighTable{
		p: neighParamsNs{NeighParams: p,
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
	t.index.Store(newNeighIndex(neighIndexMinSlots))
	return t, nil
}

const minTime = -1 << 63

// randReachableTimeLocked is neigh_rand_reach_time: uniform in [base/2, 3base/2).
func (t *NeighTable) randReachableTimeLocked() int64 {
	b := t.p.base
	return int64(t.rng.Uint64N(uint64(b))) + b>>1
}

// Params returns the table's parameters.
func (t *NeighTable) Params() NeighParams { return t.p.NeighParams }

// ReachableTime is the current randomised reachable time.
func (t *NeighTable) ReachableTime() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return time.Duration(t.reachableTime)
}

// Len is the number of entries.
func (t *NeighTable) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.entries
}

// Lookup returns the entry for (ifindex, ip), or nil. Lock-free; the entry
// may be removed at any time after (its State then reports NUDNone).
func (t *NeighTable) Lookup(ifindex, ip uint32) *Neigh {
	return t.index.Load().lookup(neighKey(ifindex, ip))
}

// lockAt takes the writer lock and applies the datapath's pending STALE
// touches with the caller's clock, so every writer sees settled states.
func (t *NeighTable) lockAt(now int64) {
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

func stateSlot(s NeighState) int {
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
func (t *NeighTable) storeLocked(n *Neigh, s NeighState, mac [6]byte, out *NeighActions) {
	old := n.word.Load()
	oldState, oldMAC := NeighState(old), wordMAC(old)
	if oldState == s && oldMAC == mac {
		return
	}
	n.word.Store(macToWord(mac) | uint64(s))
	if oldState != s {
		t.stateCount[stateSlot(oldState)]--
		t.stateCount[stateSlot(s)]++
		if (s == NUDFailed || s == NUDNoARP) && n.onGC {
			t.forcedGCIdleUntil = minTime
		}
	}
	switch {
	case !oldState.Valid() && s.Valid():
		out.event(NeighEvent{Kind: NeighResolved, IfIndex: n.IfIndex(), IP: n.IP(), LLAddr: mac, State: s})
	case oldState.Valid() && s.Valid() && oldMAC != mac:
		out.event(NeighEvent{Kind: NeighLLAddrChanged, IfIndex: n.IfIndex(), IP: n.IP(), LLAddr: mac, State: s})
	case s == NUDFailed && oldState != NUDFailed:
		out.event(NeighEvent{Kind: NeighFailed, IfIndex: n.IfIndex(), IP: n.IP(), LLAddr: mac, State: s})
	}
}

func (t *NeighTable) setStateLocked(n *Neigh, s NeighState, out *NeighActions) {
	t.storeLocked(n, s, n.mac(), out)
}
