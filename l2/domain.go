package l2

// The domain: every port of the engine (dense IDs), the bridges among them,
// the clock they share and the per-worker counters.
//
// Locking: Domain.mu is the one configuration writer lock (config ops,
// neighbour and mdb updates, port creation). The datapath never takes it.
// wmu guards the list of worker counters (NewTx, Stats).

import (
	"crypto/rand"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/netfwd/netfwd/wire"
)

// Domain holds ports and bridges.
type Domain struct {
	mu      sync.Mutex
	clock   Clock
	ports   atomic.Pointer[[]*Port] // by ID, copy on write; guarded by mu for writes
	byName  map[string]*Port        // guarded by mu
	bridges map[string]*Bridge      // guarded by mu
	gen     uint64                  // configuration generation; guarded by mu

	wmu     sync.Mutex
	workers []*workerStats // guarded by wmu
}

// DomainOptions configure a domain.
type DomainOptions struct {
	Clock Clock // default: the runtime's monotonic clock
}

// NewDomain returns an empty domain.
func NewDomain(opts DomainOptions) *Domain {
	if opts.Clock == nil {
		opts.Clock = newMonotonicClock()
	}
	d := &Domain{clock: opts.Clock, byName: map[string]*Port{}, bridges: map[string]*Bridge{}}
	empty := []*Port{}
	d.ports.Store(&empty)
	return d
}

// Clock returns the domain's clock.
func (d *Domain) Clock() Clock { return d.clock }

// Port returns the port named name, or nil.
func (d *Domain) Port(name string) *Port {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.byName[name]
}

// PortByID returns the port with the given ID, or nil. Lock-free.
func (d *Domain) PortByID(id PortID) *Port {
	ps := *d.ports.Load()
	if int(id) < len(ps) {
		return ps[id]
	}
	return nil
}

// Ports returns all ports in ID order.
func (d *Domain) Ports() []*Port { return append([]*Port(nil), *d.ports.Load()...) }

// Bridge returns the bridge named name, or nil.
func (d *Domain) Bridge(name string) *Bridge {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.bridges[name]
}

// Bridges returns the bridges sorted by name.
func (d *Domain) Bridges() []*Bridge {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]*Bridge, 0, len(d.bridges))
	for _, b := range d.bridges {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// EnsurePort returns the port named name, creating it (routed, not in any
// bridge) if needed. A non-zero mac sets the address of a new port. It is
// an error if name is a bridge.
func (d *Domain) EnsurePort(name string, mac wire.MAC) (*Port, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, isBr := d.bridges[name]; isBr {
		return nil, fmt.Errorf("%s is a bridge, not a port", name)
	}
	return d.ensurePortLocked(name, mac), nil
}

func (d *Domain) ensurePortLocked(name string, mac wire.MAC) *Port {
	if p := d.byName[name]; p != nil {
		return p
	}
	old := *d.ports.Load()
	p := newPort(PortID(len(old)), name, mac)
	n := make([]*Port, len(old)+1)
	copy(n, old)
	n[len(old)] = p
	d.ports.Store(&n)
	d.byName[name] = p
	d.gen++
	return p
}

// Stats sums the counters of all workers and bridges.
func (d *Domain) Stats() Stats {
	s := Stats{Ports: map[string]PortStats{}}
	ports := *d.ports.Load()
	d.wmu.Lock()
	workers := append([]*workerStats(nil), d.workers...)
	d.wmu.Unlock()
	for _, w := range workers {
		for i := range w.drops {
			s.Drops[i] += w.drops[i].Load()
		}
		s.FloodInline += w.floodInline.Load()
		s.FloodDeferred += w.floodDeferred.Load()
		s.HostDelivered += w.hostDelivered.Load()
		s.ProxyReplies += w.proxyReplies.Load()
		s.LearnSkipped += w.learnSkipped.Load()
		if pc := w.ports.Load(); pc != nil {
			for id := range *pc {
				if id >= len(ports) {
					break
				}
				c := &(*pc)[id]
				ps := s.Ports[ports[id].Name]
				ps.RxPackets += c.rxPackets.Load()
				ps.RxBytes += c.rxBytes.Load()
				ps.TxPackets += c.txPackets.Load()
				ps.TxBytes += c.txBytes.Load()
				ps.RxDrops += c.rxDrops.Load()
				ps.TxDrops += c.txDrops.Load()
				s.Ports[ports[id].Name] = ps
			}
		}
	}
	for _, b := range d.Bridges() {
		s.FDBLearned += b.fdb.learned.Load()
		s.FDBMoved += b.fdb.moved.Load()
		s.FDBAged += b.fdb.aged.Load()
		s.FDBLimitHit += b.fdb.limitHit.Load()
	}
	return s
}

// Age runs FDB ageing on every bridge; it returns the time until the next
// entry may expire (call again then, or earlier).
func (d *Domain) Age() (next int64) {
	next = int64(1) << 62
	for _, b := range d.Bridges() {
		_, n := b.Age()
		next = min(next, n)
	}
	return next
}

func randomMAC() wire.MAC {
	var m wire.MAC
	if _, err := rand.Read(m[:]); err != nil {
		panic("l2: no randomness: " + err.Error())
	}
	m[0] = m[0]&^1 | 2 // unicast, locally administered
	return m
}
