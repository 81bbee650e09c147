package l2

// Ports: every interface the engine forwards on, bridged or routed.
//
// A Port has a small dense ID (PortID) so that per-port state of a worker
// (transmit batches, counters) is an array index. Bridge members carry STP
// state and flags packed into one atomic word (ctl), so the flood loop reads
// one word per member. A port's port-VLAN objects are created once per VID
// and never freed (at most 4095 per port): the FDB and flood lists point at
// them, and membership is a flag in the object, so re-adding a VLAN needs no
// repointing of FDB entries and readers never see a freed object.
//
// Locking: fields marked "guarded by Domain.mu" change only under the
// domain's writer lock; the datapath reads atomics only.

import (
	"sync/atomic"

	"github.com/netfwd/netfwd/wire"
)

// PortID is a port's dense index in its Domain (0..n-1).
type PortID uint32

// PortState is the STP port state (Linux BR_STATE_* numbers, as taken by
// `bridge link set dev P state N`).
type PortState uint8

// STP states.
const (
	StateDisabled   PortState = 0
	StateListening  PortState = 1
	StateLearning   PortState = 2
	StateForwarding PortState = 3
	StateBlocking   PortState = 4
)

var stateNames = [...]string{"disabled", "listening", "learning", "forwarding", "blocking"}

func (s PortState) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "invalid"
}

// PortFlag is one of the `bridge link set` flags.
type PortFlag uint32

// Port flags (bit values are internal).
const (
	FlagLearning      PortFlag = 1 << iota // learn source MACs (default on)
	FlagFlood                              // receive unknown unicast floods (default on)
	FlagMcastFlood                         // receive unknown multicast floods (default on)
	FlagBcastFlood                         // receive broadcast floods (default on)
	FlagNeighSuppress                      // neighbour suppression (default off)
	FlagIsolated                           // isolated: never forward to another isolated port (default off)
)

// defaultPortFlags are Linux's defaults for a new bridge port.
const defaultPortFlags = FlagLearning | FlagFlood | FlagMcastFlood | FlagBcastFlood

var flagNames = []struct {
	f    PortFlag
	name string
}{
	{FlagLearning, "learning"}, {FlagFlood, "flood"}, {FlagMcastFlood, "mcast_flood"},
	{FlagBcastFlood, "bcast_flood"}, {FlagNeighSuppress, "neigh_suppress"}, {FlagIsolated, "isolated"},
}

// ParsePortFlag maps a `bridge link set` keyword to its flag.
func ParsePortFlag(name string) (PortFlag, bool) {
	for _, f := range flagNames {
		if f.name == name {
			return f.f, true
		}
	}
	return 0, false
}

func (f PortFlag) String() string {
	s := ""
	for _, n := range flagNames {
		if f&n.f != 0 {
			if s != "" {
				s += ","
			}
			s += n.name
		}
	}
	return s
}

// ctl word layout: flags in the low 16 bits, state in bits 16-19.
const ctlStateShift = 16

func makeCtl(state PortState, flags PortFlag) uint32 {
	return uint32(flags)&0xffff | uint32(state)<<ctlStateShift
}
func ctlState(c uint32) PortState      { return PortState(c >> ctlStateShift & 0xf) }
func ctlFlags(c uint32) PortFlag       { return PortFlag(c & 0xffff) }
func ctlForwarding(c uint32) bool      { return ctlState(c) == StateForwarding }
func ctlHas(c uint32, f PortFlag) bool { return c&uint32(f) != 0 }

// Port is one interface of the domain.
type Port struct {
	ID   PortID
	Name string
	// MAC is the port's own address (zero if unknown). A bridge member's MAC
	// becomes a local FDB entry, as in Linux.
	MAC wire.MAC

	ctl    atomic.Uint32            // state and flags (see makeCtl)
	bridge atomic.Pointer[Bridge]   // master, nil for routed/unbridged ports
	pvid   atomic.Pointer[PortVLAN] // cached pvid port-VLAN, nil if none
	vlans  vidTable[PortVLAN]       // per-VID port-VLANs (persistent objects)
	raw    PortVLAN                 // VID 0, "as received": non-filtering bridges and routed ports

	// Learning limit (0 = none) and the number of learned entries on this
	// port; changed under the FDB writer lock.
	maxLearned atomic.Uint32
	nLearned   atomic.Int64
}

func newPort(id PortID, name string, mac wire.MAC) *Port {
	p := &Port{ID: id, Name: name, MAC: mac}
	p.raw = PortVLAN{port: p}
	p.raw.flags.Store(pvMember | pvRaw)
	p.ctl.Store(makeCtl(StateForwarding, defaultPortFlags))
	return p
}

// Bridge returns the port's master bridge, or nil.
func (p *Port) Bridge() *Bridge { return p.bridge.Load() }

// State returns the STP state.
func (p *Port) State() PortState { return ctlState(p.ctl.Load()) }

// Flags returns the port flags.
func (p *Port) Flags() PortFlag { return ctlFlags(p.ctl.Load()) }

// PVID returns the port's pvid (0 if none).
func (p *Port) PVID() uint16 {
	if pv := p.pvid.Load(); pv != nil {
		return pv.VID
	}
	return 0
}

// Routed returns the FwdDst for sending on p as a routed port (no bridge,
// frames leave exactly as given).
func (p *Port) Routed() FwdDst { return FwdDst{Port: p} }

// portVLAN returns p's port-VLAN object for vid, creating it (not a member)
// if needed. Guarded by Domain.mu.
func (p *Port) portVLANLocked(vid uint16, v *vlan) *PortVLAN {
	if pv := p.vlans.get(vid); pv != nil {
		if pv.vlan.Load() != v {
			pv.vlan.Store(v) // the port moved to another bridge (not a member here yet)
		}
		return pv
	}
	pv := &PortVLAN{VID: vid, port: p}
	pv.vlan.Store(v)
	p.vlans.set(vid, pv)
	return pv
}

// VLAN returns p's port-VLAN for vid if p is currently a member, else nil.
func (p *Port) VLAN(vid uint16) *PortVLAN {
	pv := p.vlans.get(vid)
	if pv == nil || !pv.Member() {
		return nil
	}
	return pv
}
