// Package kmirror is the kernel mirror (`netfwd run --mirror-kernel`): it
// follows the IPv4 routes of every table, the nexthop objects, the
// addresses and the neighbours of the kernel in netfwd's namespace over
// rtnetlink, so any routing daemon that programs the kernel (BIRD, FRR
// without FPM, keepalived, a person typing `ip route`) programs netfwd too.
// Routes become learned routes of owner fib.OwnerKernel.
//
// What is mirrored: every IPv4 route of every table, each in its own table
// (BIRD's `kernel table 100` lands in netfwd's table 100, which netfwd's
// own rules select), as the kernel has it (protocol, type, scope, metric,
// preferred source), except a `proto kernel` route identical to one netfwd
// derived from its own configured addresses (the same address configured
// on both sides would otherwise show twice). Table local included: the
// namespace's own addresses and loopback (127.0.0.0/8 dev lo) are local
// routes there, as in the kernel. The kernel's rules are not mirrored (a
// rule of netfwd's config selects a mirrored table). Addresses are
// recorded for source selection only (they derive no routes: the kernel's
// derived routes are mirrored as such). Neighbours go to a hook (the
// daemon installs them). IPv6, multicast and anycast routes are counted
// and skipped.
//
// Flow: a NETLINK_ROUTE socket subscribed to links, IPv4 addresses, IPv4
// routes, nexthops and neighbours, with a large receive buffer
// (SO_RCVBUFFORCE), and a second socket for dumps (an overrun of the
// subscribed one would make the kernel refuse a dump running on it). A
// resync cycle stamps a new mark and dumps links, addresses, nexthop
// objects, routes and neighbours in that order; the notifications that
// arrive meanwhile are held and applied after the last dump, in order, in
// the same transaction as the sweep of whatever still carries an older
// mark. (The dump never shows a state older than what was applied before
// it started, and the held notifications bring it up to date: the last
// one about a route wins.) A cycle runs at start, after a receive buffer
// overrun (ENOBUFS: notifications were lost), and after events the kernel
// follows with silent flushes (a link going down or away, an address
// deleted). A trigger during a cycle makes it start over once done,
// without sweeping.
//
// Messages are applied in batches (gather): what arrives until the stream
// pauses for IdleCommit, 1/8 of the FIB's size arrived, or MaxBatchDelay
// passed, in one FIB transaction (in place while routes are dumped or when
// the batch is large against the FIB).
//
// Locking: Run owns the socket and the state; Stats are atomic.
package kmirror

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/fpm"
	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/rtnl"
)

// Options configure a Mirror.
type Options struct {
	FIB *fib.FIB
	// Netns is the namespace to follow ("" = the caller's).
	Netns string
	// Iface maps kernel interface indices to netfwd devices (nil: the
	// kernel's interface names).
	Iface fpm.IfaceFunc
	// Rename maps a kernel interface name to a netfwd device when Iface
	// is nil (the host path's twins to their ports); nil: the same name.
	Rename func(string) string
	// Neigh receives neighbour changes (nil: neighbours are not mirrored).
	// It is called outside FIB transactions.
	Neigh func(NeighUpdate) error
	// ReceiveBuffer is the socket's receive buffer in bytes (0: 64 MiB).
	ReceiveBuffer int
	// MaxBatchDelay bounds the time one transaction gathers (0: 1 s).
	MaxBatchDelay time.Duration
	// IdleCommit applies what was gathered once the socket stayed empty
	// this long (0: 100 ms).
	IdleCommit time.Duration
	Logger     *slog.Logger
}

// NeighUpdate is one neighbour change for the Neigh hook. State is the
// iproute2 name netfwd uses: permanent, noarp, reachable or stale.
type NeighUpdate struct {
	Dev    string
	IP     netip.Addr
	MAC    [6]byte
	State  string
	Delete bool
}

// Stats are the mirror's counters (atomic).
type Stats struct {
	Resyncs     atomic.Uint64 // cycles started (the first one included)
	Overruns    atomic.Uint64 // ENOBUFS: notifications lost, resync
	Sweeps      atomic.Uint64 // cycles completed with a sweep
	SweptRoutes atomic.Uint64
	Messages    atomic.Uint64
	Batches     atomic.Uint64
	NeighErrors atomic.Uint64
	// Synced is set once a first cycle completed: the FIB holds the
	// kernel's table.
	Synced atomic.Bool
	// Resyncing is set while a resync cycle runs.
	Resyncing atomic.Bool
	C         fpm.Counters // route and nexthop messages
}

// dump phases of a cycle, in order.
var phases = [...]uint16{rtnl.RTM_GETLINK, rtnl.RTM_GETADDR, rtnl.RTM_GETNEXTHOP, rtnl.RTM_GETROUTE, rtnl.RTM_GETNEIGH}

type addrKey struct {
	dev string
	p   netip.Prefix
}

type neighKey struct {
	dev string
	ip  netip.Addr
}

// Mirror follows the kernel.
type Mirror struct {
	opts  Options
	log   *slog.Logger
	conn  *rtnl.Conn // subscribed
	dumpc *rtnl.Conn // dump requests
	// either waits for conn or dumpc, waits[c] for one of them: in the
	// netpoller (pktio.Poller), not in poll(2), which would hold a P from
	// the forwarding workers for the whole wait.
	either *pktio.Poller
	waits  map[*rtnl.Conn]*pktio.Poller
	links  *rtnl.LinkTable
	tr     *fpm.Translator
	stats  Stats

	started bool // the first cycle was requested (Sync or Run)
	mark    uint8
	phase   int // index into phases of the running dump; -1: no cycle
	dumpSeq uint32
	dirty   bool // a trigger during the cycle: start over, no sweep
	again   bool // start a cycle once the current one ends

	up     map[uint32]bool // link up states, to see them go down
	addrs  map[addrKey]uint8
	neighs map[neighKey]uint8
	nq     []NeighUpdate // neighbour changes for after the transaction

	raw  []byte // the batch's messages
	held []byte // notifications received during a cycle
	// first is when the batch's first message was read: its lag
	// (fpm.Lag) ends at the commit.
	first time.Time

	// A burst: messages applied since the socket was last idle for a
	// second (logged when large: how long a big change took).
	burstStart, burstLast time.Time
	burstMsgs             int

	closeOnce sync.Once
}

// New opens the mirror's socket in the namespace. Run starts it.
func New(opts Options) (*Mirror, error) {
	if opts.FIB == nil {
		return nil, errors.New("kmirror: no FIB")
	}
	if opts.ReceiveBuffer <= 0 {
		opts.ReceiveBuffer = 64 << 20
	}
	if opts.MaxBatchDelay <= 0 {
		opts.MaxBatchDelay = time.Second
	}
	if opts.IdleCommit <= 0 {
		opts.IdleCommit = 100 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	m := &Mirror{opts: opts, log: opts.Logger, links: rtnl.NewLinkTable(), phase: -1,
		up: map[uint32]bool{}, addrs: map[addrKey]uint8{}, neighs: map[neighKey]uint8{}}
	err := pktio.InNetns(opts.Netns, func() (err error) {
		m.conn, err = rtnl.Open(rtnl.RTNLGRP_LINK, rtnl.RTNLGRP_IPV4_IFADDR, rtnl.RTNLGRP_IPV4_ROUTE,
			rtnl.RTNLGRP_NEXTHOP, rtnl.RTNLGRP_NEIGH)
		if err != nil {
			return err
		}
		if m.dumpc, err = rtnl.Open(); err != nil {
			m.conn.Close()
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("kmirror: %w", err)
	}
	if err := m.conn.SetReceiveBuffer(opts.ReceiveBuffer); err != nil {
		m.Close()
		return nil, fmt.Errorf("kmirror: receive buffer: %w", err)
	}
	m.dumpc.SetReceiveBuffer(4 << 20)
	iface := opts.Iface
	if iface == nil {
		iface = m.links.Name
		if rename := opts.Rename; rename != nil {
			iface = func(i uint32) (string, bool) {
				name, ok := m.links.Name(i)
				return rename(name), ok
			}
		}
	}
	m.tr = fpm.NewTranslator(fib.OwnerKernel, 0, iface, &m.stats.C)
	m.tr.KeepKernelProto = true
	m.tr.Skip = skipDerivedDuplicate
	return m, nil
}

// Stats returns the mirror's counters.
func (m *Mirror) Stats() *Stats { return &m.stats }

// Links returns the mirror's interface table of the namespace.
func (m *Mirror) Links() *rtnl.LinkTable { return m.links }

// Close closes the sockets (after Run returned, or instead of Run).
func (m *Mirror) Close() error {
	var err error
	m.closeOnce.Do(func() {
		err = errors.Join(m.conn.Close(), m.dumpc.Close())
		if m.either != nil {
			m.either.Close()
		}
		for _, w := range m.waits {
			w.Close()
		}
	})
	return err
}

// skipDerivedDuplicate refuses a proto kernel route identical to one netfwd
// derived from its own addresses.
func skipDerivedDuplicate(tx *fib.Txn, r *fib.LearnedRoute) string {
	if r.Proto != fib.ProtoKernel || r.NH == nil {
		return ""
	}
	if tx.ConfigDerives(r) {
		// The reflection of netfwd's own address on its twin: netfwd
		// derives the route itself when the port is up, and withdraws it
		// when the port is down (a copy taken then would stay beside
		// netfwd's own when the port came back).
		return "derived_duplicate"
	}
	for _, o := range tx.RoutesAt(r.Table, r.Prefix) {
		if o.Owner == fib.OwnerConfig && o.Proto == fib.ProtoKernel && o.Type == r.Type && o.Metric == r.Metric &&
			o.Src == r.Src && o.NH != nil && o.NH.Dev == r.NH.Dev && o.NH.Gateway == r.NH.Gateway {
			return "derived_duplicate"
		}
	}
	return ""
}

// Run mirrors until stop is closed. It closes the sockets when it returns.
func (m *Mirror) Run(stop <-chan struct{}) error {
	defer m.Close()
	if !m.started {
		m.started = true
		if err := m.startCycle("start"); err != nil {
			return err
		}
	}
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		if err := m.step(200); err != nil {
			return err
		}
	}
}

// Sync runs the first cycle to its end before Run: the FIB then holds the
// kernel's routes of every table. A hot restart's successor calls it while
// the running daemon still forwards, so no mirrored route is missing when
// it takes over. Run goes on from where Sync left (the notifications that
// arrive in between wait in the socket).
func (m *Mirror) Sync(timeout time.Duration) error {
	if !m.started {
		m.started = true
		if err := m.startCycle("start"); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(timeout)
	for !m.stats.Synced.Load() || m.phase >= 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("kmirror: the kernel's tables not read within %v", timeout)
		}
		if err := m.step(50); err != nil {
			return err
		}
	}
	return nil
}

// step waits up to wait ms for messages on either socket and applies them.
func (m *Mirror) step(wait int) error {
	if err := m.initWaits(); err != nil {
		return err
	}
	ready, err := m.either.WaitFor(time.Duration(wait) * time.Millisecond)
	if err != nil {
		return fmt.Errorf("kmirror: wait: %w", err)
	}
	if !ready {
		m.burstEnded()
		return nil
	}
	if pktio.Readable(m.dumpc.Fd()).Ready() {
		overrun, err := m.gather(m.dumpc)
		if err != nil {
			return fmt.Errorf("kmirror: dump: %w", err)
		}
		if overrun { // a dump socket has no groups: cannot happen
			m.trigger("dump socket overrun")
		}
		if err := m.apply(true); err != nil {
			return err
		}
	}
	if pktio.Readable(m.conn.Fd()).Ready() {
		overrun, err := m.gather(m.conn)
		if err != nil {
			return fmt.Errorf("kmirror: %w", err)
		}
		if m.phase >= 0 {
			m.held = append(m.held, m.raw...)
		} else if err := m.apply(false); err != nil {
			return err
		}
		if overrun {
			m.overrun()
		}
	}
	return nil
}

// initWaits makes the waiters on first use.
func (m *Mirror) initWaits() error {
	if m.either != nil {
		return nil
	}
	mk := func(cs ...*rtnl.Conn) (*pktio.Poller, error) {
		w, err := pktio.NewPoller()
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			if err := w.Add(pktio.Readable(c.Fd())); err != nil {
				w.Close()
				return nil, err
			}
		}
		return w, nil
	}
	m.waits = map[*rtnl.Conn]*pktio.Poller{}
	for _, c := range []*rtnl.Conn{m.conn, m.dumpc} {
		w, err := mk(c)
		if err != nil {
			return fmt.Errorf("kmirror: %w", err)
		}
		m.waits[c] = w
	}
	w, err := mk(m.conn, m.dumpc)
	if err != nil {
		return fmt.Errorf("kmirror: %w", err)
	}
	m.either = w
	return nil
}

// gather reads what arrives on c into m.raw until the batch is due: it
// holds 1/8 of the FIB's prefixes (at least 4096 messages: in place pays),
// or the socket stayed empty for IdleCommit, or MaxBatchDelay passed. The
// socket is drained all along (the kernel drops what does not fit). It
// reports an overrun seen on the way.
func (m *Mirror) gather(c *rtnl.Conn) (bool, error) {
	m.raw, m.first = m.raw[:0], time.Time{}
	start := time.Now()
	target := max(4096, m.opts.FIB.Size()/8)
	n := 0
	if err := m.initWaits(); err != nil {
		return false, err
	}
	wait := m.waits[c]
	for time.Since(start) < m.opts.MaxBatchDelay && n < target && len(m.raw) < 64<<20 {
		b, err := c.TryReceive()
		if errors.Is(err, rtnl.ErrOverrun) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if b == nil {
			if ok, err := wait.WaitFor(m.opts.IdleCommit); err != nil || !ok {
				break // idle: the burst is over
			}
			continue
		}
		if len(m.raw) == 0 {
			m.first = time.Now()
		}
		m.raw = append(m.raw, b...)
		n += countMessages(b)
	}
	return false, nil
}

// burstLog is the size from which a burst of changes is logged.
const burstLog = 10000

// noteBurst records n messages applied now.
func (m *Mirror) noteBurst(n int) {
	now := time.Now()
	if m.burstMsgs == 0 {
		m.burstStart = now
	}
	m.burstMsgs += n
	m.burstLast = now
}

// burstEnded logs a large burst once the socket has been idle for a second.
func (m *Mirror) burstEnded() {
	if m.burstMsgs == 0 || time.Since(m.burstLast) < time.Second {
		return
	}
	if m.burstMsgs >= burstLog {
		m.log.Info("kmirror: applied a burst of kernel changes", "messages", m.burstMsgs,
			"from", m.burstStart.Format(time.RFC3339Nano), "to", m.burstLast.Format(time.RFC3339Nano),
			"took", m.burstLast.Sub(m.burstStart).Round(time.Millisecond))
	}
	m.burstMsgs = 0
}

// overrun handles lost notifications: a new cycle.
func (m *Mirror) overrun() {
	m.stats.Overruns.Add(1)
	m.log.Warn("kmirror: netlink receive buffer overrun (ENOBUFS): notifications lost, resyncing",
		"receive_buffer", m.conn.ReceiveBuffer(), "during_resync", m.phase >= 0)
	m.trigger("overrun")
}

// trigger asks for a resync cycle (now, or after the current one).
func (m *Mirror) trigger(why string) {
	if m.phase >= 0 {
		m.dirty, m.again = true, true
		return
	}
	if err := m.startCycle(why); err != nil {
		m.log.Error("kmirror: resync", "err", err)
	}
}

// startCycle stamps a new mark and requests the first dump.
func (m *Mirror) startCycle(why string) error {
	m.mark++
	m.tr.Mark = m.mark
	m.phase, m.dirty, m.again = 0, false, false
	m.stats.Resyncs.Add(1)
	m.stats.Resyncing.Store(true)
	if why != "start" {
		m.log.Info("kmirror: resync", "reason", why, "mark", m.mark)
	}
	return m.requestPhase()
}

func (m *Mirror) requestPhase() error {
	family := uint8(rtnl.AF_INET)
	if phases[m.phase] == rtnl.RTM_GETLINK || phases[m.phase] == rtnl.RTM_GETNEXTHOP {
		family = rtnl.AF_UNSPEC
	}
	seq, err := m.dumpc.DumpRequest(phases[m.phase], family)
	m.dumpSeq = seq
	return err
}
