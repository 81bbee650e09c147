package nexthop

// The Registry owns every nexthop: the user's (`ip nexthop` ids), the implicit
// ones shared by routes (one per distinct kind, gateway, device and onlink
// flag, or per distinct member list for a multipath route), and their dense
// indices. It also knows which devices are down, which makes the nexthops on
// them dead.
//
// Flow: the FIB writer calls Begin, then any number of operations, then Commit
// or Rollback. Rollback restores every map, reference count, liveness flag and
// index exactly as they were at Begin, so a config file that fails on line 900
// leaves nothing behind.
//
// Locking: not safe for concurrent use; the FIB writer lock serialises all
// calls except ByIndex, which readers may call at any time.

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// indexGrace is how long a released index stays unused. Datapath readers hold
// an index for the time of one batch (microseconds); a second is generous.
const indexGrace = time.Second

// Spec describes a single (non-group) nexthop.
type Spec struct {
	Kind    Kind
	Gateway netip.Addr
	Dev     string
	OnLink  bool
	// LocalGateway: the gateway is one of the router's own addresses (it
	// resolved through a local route), so, as in the kernel (nexthop scope
	// host), it is not used: destinations are reached directly on Dev.
	LocalGateway bool
}

type implicitKey struct {
	spec  Spec
	group string // canonical member list of an implicit multipath group
}

// Registry holds all nexthops. The zero value is not usable; use NewRegistry.
type Registry struct {
	byID     map[uint32]*Nexthop
	implicit map[implicitKey]*Nexthop
	devDown  map[string]bool
	index    indexTable

	// Transaction journal.
	inTxn    bool
	undo     []func()
	refDelta map[*Nexthop]int32
	allocd   []uint32 // indices allocated in this transaction
	freed    []uint32 // indices released in this transaction
	// groups whose member liveness changed: selection rebuilt at Commit
	rebalance []*Nexthop

	devIndex func(string) uint32 // immutable; nil: DevIndex stays 0
}

// NewRegistry returns an empty registry. now is the clock for index reuse
// (nil: time.Now).
func NewRegistry(now func() time.Time) *Registry {
	return NewRegistryWithDevIndex(now, nil)
}

// NewRegistryWithDevIndex is NewRegistry with a function that maps device
// names to interface indices, stored in every nexthop as DevIndex.
func NewRegistryWithDevIndex(now func() time.Time, devIndex func(string) uint32) *Registry {
	if now == nil {
		now = time.Now
	}
	r := &Registry{
		byID:     map[uint32]*Nexthop{},
		implicit: map[implicitKey]*Nexthop{},
		devDown:  map[string]bool{},
		refDelta: map[*Nexthop]int32{},
	}
	r.index.init(indexGrace, now)
	r.devIndex = devIndex
	return r
}

// ByIndex returns the nexthop with the given index (nil for 0 or unused).
// Safe to call concurrently with the writer.
func (r *Registry) ByIndex(i uint32) *Nexthop { return r.index.get(i) }

// Len returns the number of live nexthops (implicit and explicit).
func (r *Registry) Len() int { return r.index.live() }

// ByID returns the user nexthop with id, or nil.
func (r *Registry) ByID(id uint32) *Nexthop { return r.byID[id] }

// IDs returns the user nexthop ids, sorted.
func (r *Registry) IDs() []uint32 {
	return slices.Sorted(maps.Keys(r.byID))
}

// DevUp reports whether a device is up (devices are up unless set down).
func (r *Registry) DevUp(dev string) bool { return !r.devDown[dev] }

// Begin starts recording changes so that Rollback can undo them.
func (r *Registry) Begin() {
	if r.inTxn {
		panic("nexthop: nested transaction")
	}
	r.inTxn = true
}

// Commit makes the transaction's changes permanent. Call it after the FIB
// snapshot that no longer references released nexthops is published: their
// indices start their grace period now.
func (r *Registry) Commit() {
	for _, i := range r.freed {
		r.index.release(i)
	}
	for _, g := range r.rebalance {
		g.Group.rebalance()
	}
	r.endTxn()
}

// Rollback undoes every change since Begin.
func (r *Registry) Rollback() {
	for i := len(r.undo) - 1; i >= 0; i-- {
		r.undo[i]()
	}
	for nh, d := range r.refDelta {
		nh.refs -= d
	}
	for _, i := range r.allocd {
		r.index.unallocate(i)
	}
	r.endTxn()
}

func (r *Registry) endTxn() {
	r.inTxn = false
	r.undo = r.undo[:0]
	clear(r.refDelta)
	r.allocd = r.allocd[:0]
	r.freed = r.freed[:0]
	r.rebalance = r.rebalance[:0]
}

func (r *Registry) record(f func()) {
	if r.inTxn {
		r.undo = append(r.undo, f)
	}
}

// setUndoable sets m[k] = v when set, else deletes k, and records how to
// undo it.
func setUndoable[K comparable, V any](r *Registry, m map[K]V, k K, v V, set bool) {
	old, had := m[k]
	if set {
		m[k] = v
	} else {
		delete(m, k)
	}
	r.record(func() {
		if had {
			m[k] = old
		} else {
			delete(m, k)
		}
	})
}

// Hold adds a reference (a route or group now uses nh).
func (r *Registry) Hold(nh *Nexthop) {
	nh.refs++
	if r.inTxn {
		r.refDelta[nh]++
	}
}

// Release drops a reference; an implicit nexthop without references is
// removed, releasing its index and its members.
func (r *Registry) Release(nh *Nexthop) {
	nh.refs--
	if r.inTxn {
		r.refDelta[nh]--
	}
	if nh.refs < 0 {
		panic(fmt.Sprintf("nexthop: reference count of %v below zero", nh))
	}
	if nh.refs == 0 && nh.ID == 0 {
		key := implicitKeyOf(nh)
		delete(r.implicit, key)
		r.record(func() { r.implicit[key] = nh })
		r.freeIndex(nh)
		if nh.Group != nil {
			for _, m := range nh.Group.Members {
				r.Release(m.NH)
			}
		}
	}
}

func (r *Registry) newNexthop(nh *Nexthop) (*Nexthop, error) {
	if r.devIndex != nil && nh.Dev != "" {
		nh.DevIndex = r.devIndex(nh.Dev)
	}
	i, ok := r.index.alloc(nh)
	if !ok {
		return nil, errors.New("nexthop table full")
	}
	nh.Index = i
	if r.inTxn {
		r.allocd = append(r.allocd, i)
	}
	return nh, nil
}

func (r *Registry) freeIndex(nh *Nexthop) {
	if r.inTxn {
		r.freed = append(r.freed, nh.Index)
	} else {
		r.index.release(nh.Index)
	}
}

func (r *Registry) setDead(nh *Nexthop, dead bool) {
	if nh.dead.Load() == dead {
		return
	}
	nh.dead.Store(dead)
	r.record(func() { nh.dead.Store(!dead) })
}

// specDead: forwarding nexthops on a down device are dead. Local and
// broadcast nexthops never are: the kernel keeps local routes usable when a
// link goes down (their nexthop scope is "nowhere").
func specDead(r *Registry, s Spec) bool {
	return s.Kind == Unicast && s.Dev != "" && r.devDown[s.Dev]
}

// Implicit returns the shared nexthop for spec, creating it if needed, and
// holds a reference for the caller.
func (r *Registry) Implicit(s Spec) (*Nexthop, error) {
	key := implicitKey{spec: s}
	if nh := r.implicit[key]; nh != nil {
		r.Hold(nh)
		return nh, nil
	}
	nh, err := r.newNexthop(withDead(&Nexthop{Kind: s.Kind, Gateway: s.Gateway, Dev: s.Dev, OnLink: s.OnLink, LocalGateway: s.LocalGateway}, specDead(r, s)))
	if err != nil {
		return nil, err
	}
	r.implicit[key] = nh
	r.record(func() { delete(r.implicit, key) })
	r.Hold(nh)
	return nh, nil
}

// ImplicitGroup returns the shared group nexthop of a multipath route with
// these paths, creating it (and its implicit members) if needed, and holds a
// reference for the caller.
func (r *Registry) ImplicitGroup(paths []Spec, weights []uint16) (*Nexthop, error) {
	if len(paths) == 0 || len(paths) != len(weights) {
		return nil, errors.New("multipath route needs at least one nexthop")
	}
	var sig strings.Builder
	for i, p := range paths {
		fmt.Fprintf(&sig, "%d|%s|%s|%t|%t|%d;", p.Kind, p.Gateway, p.Dev, p.OnLink, p.LocalGateway, weights[i])
	}
	key := implicitKey{group: sig.String()}
	if nh := r.implicit[key]; nh != nil {
		r.Hold(nh)
		return nh, nil
	}
	members := make([]Member, len(paths))
	for i, p := range paths {
		m, err := r.Implicit(p)
		if err != nil {
			for _, done := range members[:i] {
				r.Release(done.NH)
			}
			return nil, err
		}
		members[i] = Member{NH: m, Weight: weights[i]}
	}
	g := newGroup(members)
	nh, err := r.newNexthop(withDead(&Nexthop{Kind: Unicast, Group: g}, g.Live() == 0))
	if err != nil {
		for _, m := range members {
			r.Release(m.NH)
		}
		return nil, err
	}
	r.implicit[key] = nh
	r.record(func() { delete(r.implicit, key) })
	r.Hold(nh)
	return nh, nil
}

func implicitKeyOf(nh *Nexthop) implicitKey {
	if nh.Group == nil {
		return implicitKey{spec: Spec{Kind: nh.Kind, Gateway: nh.Gateway, Dev: nh.Dev, OnLink: nh.OnLink, LocalGateway: nh.LocalGateway}}
	}
	var sig strings.Builder
	for _, m := range nh.Group.Members {
		fmt.Fprintf(&sig, "%d|%s|%s|%t|%t|%d;", m.NH.Kind, m.NH.Gateway, m.NH.Dev, m.NH.OnLink, m.NH.LocalGateway, m.Weight)
	}
	return implicitKey{group: sig.String()}
}
