package l3

// The Router: interfaces, the FIB, the neighbour table and the ICMP budget,
// shared by every worker. Workers (worker.go) run the datapath; this file is
// the control side.
//
// Locking: mu serialises interface changes (the datapath reads the published
// interface table); namesMu guards the name -> index registry, which the FIB
// calls while it holds its own writer lock, so it never waits for mu.

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/neigh"
	"github.com/netfwd/netfwd/wire"
)

// routerOptions configure a Router.
type routerOptions struct {
	Trie      fib.TrieKind
	Compiled  bool
	RateLimit RateLimitConfig
	Neigh     neigh.Config
}

// Router is the L3 half of the engine.
type Router struct {
	fib     *fib.FIB
	dom     *l2.Domain
	limiter *icmpLimiter
	neigh   *neigh.Table

	mu     sync.Mutex // interface changes
	ifaces atomic.Pointer[ifaceTable]

	namesMu sync.Mutex
	names   map[string]uint32 // guarded by namesMu; never shrinks (like ifindex)

	// Per-VRF counting slots (vrfstats.go): vrfSlots guarded by mu,
	// vrfNames (slot -> name, [0] unused) published for Stats.
	vrfSlots map[string]uint8
	vrfNames atomic.Pointer[[]string]
}

// newRouter returns a router over a bridge domain.
func newRouter(dom *l2.Domain, opts routerOptions) *Router {
	var seed [8]byte
	rand.Read(seed[:])
	r := &Router{
		dom:     dom,
		limiter: newICMPLimiter(opts.RateLimit, binary.LittleEndian.Uint64(seed[:])),
		names:   map[string]uint32{},

		vrfSlots: map[string]uint8{},
	}
	r.fib = fib.New(fib.Options{Trie: opts.Trie, Compiled: opts.Compiled, DevIndex: r.IfIndex})
	neigh, err := neigh.NewTable(opts.Neigh, dom.Clock().Now())
	if err != nil {
		panic("l3: neighbour parameters: " + err.Error()) // only invalid explicit parameters
	}
	r.neigh = neigh
	r.ifaces.Store(&ifaceTable{byBridge: map[*l2.Bridge]*bridgeIfaces{}, byName: map[string]*Iface{}})
	return r
}

// FIB returns the router's FIB.
func (r *Router) FIB() *fib.FIB { return r.fib }

// IfIndex returns the interface index of a name, assigning the next one the
// first time a name is seen (routes may name an interface before it exists).
// Index 1 is reserved (lo in Linux).
func (r *Router) IfIndex(name string) uint32 {
	r.namesMu.Lock()
	defer r.namesMu.Unlock()
	if i, ok := r.names[name]; ok {
		return i
	}
	i := uint32(len(r.names) + 2)
	r.names[name] = i
	return i
}

// VLANIfaceSpec declares a VLAN interface `link add link BR name N type vlan id V`.
type VLANIfaceSpec struct {
	Name   string
	Bridge string
	VID    uint16
}

// IfaceSettings are per-interface settings from `link set`.
type IfaceSettings struct {
	Down bool
	MTU  int
	MAC  wire.MAC
	// VRF and VRFTable: the VRF the interface is enslaved to ("": none)
	// and its table (the FIB's; internal/apply passes them).
	VRF      string
	VRFTable uint32
}

// SyncIfaces rebuilds the interface table from the domain (every port
// outside a bridge is a routed port, every bridge is an interface) and the
// VLAN interfaces, keeping indices and up states of interfaces that stay. It
// makes each bridge's host a member of the VLANs of its VLAN interfaces.
func (r *Router) SyncIfaces(vlans []VLANIfaceSpec, settings map[string]IfaceSettings) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.ifaces.Load()
	next := &ifaceTable{byBridge: map[*l2.Bridge]*bridgeIfaces{}, byName: map[string]*Iface{}}
	mk := func(name string, kind IfaceKind, mac wire.MAC) *Iface {
		i := &Iface{Index: r.IfIndex(name), Name: name, Kind: kind, MAC: mac, MTU: defaultMTU}
		if o := old.byName[name]; o != nil {
			i.up = o.up
		} else {
			i.up = new(atomic.Bool)
			i.up.Store(true)
		}
		if s, ok := settings[name]; ok {
			i.up.Store(!s.Down)
			if s.MTU > 0 {
				i.MTU = s.MTU
			}
			if s.MAC != (wire.MAC{}) {
				i.MAC = s.MAC
			}
			if s.VRF != "" && s.VRFTable != 0 {
				i.VRF, i.VRFTable, i.VRFIndex = s.VRF, s.VRFTable, r.IfIndex(s.VRF)
				i.vrfSlot = r.vrfSlot(s.VRF)
			}
		}
		if i.MAC == (wire.MAC{}) {
			i.MAC = DefaultMAC(name)
		}
		return i
	}
	for _, p := range r.dom.Ports() {
		if p.Bridge() != nil {
			continue
		}
		i := mk(p.Name, IfacePort, p.MAC)
		i.Port = p
		next.put(i)
	}
	for _, b := range r.dom.Bridges() {
		i := mk(b.Name, IfaceBridge, b.MAC)
		i.Bridge = b
		i.VID = b.HostPVID()
		next.put(i)
	}
	for _, v := range vlans {
		b := r.dom.Bridge(v.Bridge)
		if b == nil {
			return fmt.Errorf("%s: no bridge %q", v.Name, v.Bridge)
		}
		if err := b.AddHostVLAN(v.VID); err != nil {
			return fmt.Errorf("%s: %w", v.Name, err)
		}
		i := mk(v.Name, IfaceVLAN, b.MAC)
		i.Bridge, i.VID = b, v.VID
		next.put(i)
	}
	r.ifaces.Store(next)
	return nil
}

// Iface returns the interface with a name from the published table.
func (r *Router) Iface(name string) *Iface { return r.ifaces.Load().byName[name] }

// Ifaces lists the interfaces by index.
func (r *Router) Ifaces() []*Iface {
	var out []*Iface
	for _, i := range r.ifaces.Load().byIndex { // indexed by Index
		if i != nil {
			out = append(out, i)
		}
	}
	return out
}

// DefaultMAC derives a stable, locally administered unicast MAC from an
// interface name, for interfaces whose MAC nobody gave (tests, replay).
func DefaultMAC(name string) wire.MAC {
	h := fnv.New64a()
	h.Write([]byte(name))
	v := h.Sum64()
	return wire.MAC{0x02, byte(v >> 32), byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}

func errNoIface(name string) error { return fmt.Errorf("%s: no such interface", name) }
