package l3

// Router interfaces: routed ports (an l2 port outside any bridge), VLAN
// interfaces on a bridge (`link add link br0 name vlan10 type vlan id 10`)
// and the bridge device itself when it has addresses. Each has a MAC, an MTU,
// an up/down state and an index; addresses live in the FIB.
//
// Flow: the control plane builds a new interface table and publishes it with
// one atomic store; the datapath finds the ingress interface of a host frame
// by (bridge, VID) or of a routed frame by port ID, and the egress interface
// of a route by the nexthop's DevIndex, all by array index.
//
// Locking: Router.mu (writer) for changes; readers load the table.

import (
	"sync/atomic"

	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/wire"
)

// IfaceKind says how frames reach and leave an interface.
type IfaceKind uint8

const (
	// IfacePort is a routed port: frames go straight to and from an l2 port.
	IfacePort IfaceKind = iota
	// IfaceVLAN is a VLAN interface of a bridge: it receives the frames the
	// bridge delivers to the host in its VLAN, and sends through the bridge.
	IfaceVLAN
	// IfaceBridge is the bridge device itself (its untagged host VLAN).
	IfaceBridge
)

func (k IfaceKind) String() string {
	return [...]string{"port", "vlan", "bridge"}[k]
}

// defaultMTU is the MTU of a new interface.
const defaultMTU = 1500

// Iface is one router interface. Fields other than up are immutable once
// published; a change publishes a new Iface.
type Iface struct {
	Index  uint32
	Name   string
	Kind   IfaceKind
	MAC    wire.MAC
	MTU    int
	Port   *l2.Port   // IfacePort
	Bridge *l2.Bridge // IfaceVLAN, IfaceBridge
	VID    uint16     // IfaceVLAN: its VLAN; IfaceBridge: the bridge's untagged host VLAN
	// VRF is the VRF the interface is enslaved to ("": none), VRFTable its
	// table and VRFIndex the VRF device's index: a packet received here
	// walks the rules with IIF = VRFIndex and L3mdev = VRFTable (rules.go),
	// and the router's answers to it are output lookups in the VRF
	// (Iface.outputVRF). SyncIfaces sets them from IfaceSettings.
	VRF                string
	VRFTable, VRFIndex uint32
	vrfSlot            uint8 // its per-VRF counters (vrfstats.go; 0: none)

	up *atomic.Bool // shared by the versions of one interface
}

// Up reports the administrative and link state.
func (i *Iface) Up() bool { return i.up.Load() }

// ifaceTable is one published set of interfaces.
type ifaceTable struct {
	byIndex []*Iface // by Index; nil holes
	byPort  []*Iface // routed ports by l2.PortID
	// byBridgeVID finds the interface of a host frame: per bridge, per VID;
	// untagged host frames of a bridge use its IfaceBridge.
	byBridge map[*l2.Bridge]*bridgeIfaces
	byName   map[string]*Iface
}

type bridgeIfaces struct {
	vlan [4096]*Iface
	self *Iface
}

func (t *ifaceTable) get(index uint32) *Iface {
	if int(index) < len(t.byIndex) {
		return t.byIndex[index]
	}
	return nil
}

// hostIface returns the interface a bridge's host frame belongs to.
func (t *ifaceTable) hostIface(b *l2.Bridge, vid uint16, untagged bool) *Iface {
	bi := t.byBridge[b]
	if bi == nil {
		return nil
	}
	if untagged || vid == 0 {
		return bi.self
	}
	return bi.vlan[vid&0xfff]
}

func (t *ifaceTable) routedPort(id l2.PortID) *Iface {
	if int(id) < len(t.byPort) {
		return t.byPort[id]
	}
	return nil
}

// put stores (or replaces) an interface in every index.
func (t *ifaceTable) put(i *Iface) {
	if old := t.byName[i.Name]; old != nil {
		t.remove(old)
	}
	for int(i.Index) >= len(t.byIndex) {
		t.byIndex = append(t.byIndex, nil)
	}
	t.byIndex[i.Index] = i
	t.byName[i.Name] = i
	switch i.Kind {
	case IfacePort:
		for int(i.Port.ID) >= len(t.byPort) {
			t.byPort = append(t.byPort, nil)
		}
		t.byPort[i.Port.ID] = i
	case IfaceVLAN, IfaceBridge:
		bi := t.byBridge[i.Bridge]
		if bi == nil {
			bi = &bridgeIfaces{}
			t.byBridge[i.Bridge] = bi
		}
		if i.Kind == IfaceVLAN {
			bi.vlan[i.VID] = i
		} else {
			bi.self = i
		}
	}
}

func (t *ifaceTable) remove(i *Iface) {
	if t.byIndex[i.Index] == i {
		t.byIndex[i.Index] = nil
	}
	delete(t.byName, i.Name)
	switch i.Kind {
	case IfacePort:
		if t.byPort[i.Port.ID] == i {
			t.byPort[i.Port.ID] = nil
		}
	case IfaceVLAN:
		if bi := t.byBridge[i.Bridge]; bi != nil && bi.vlan[i.VID] == i {
			bi.vlan[i.VID] = nil
		}
	case IfaceBridge:
		if bi := t.byBridge[i.Bridge]; bi != nil && bi.self == i {
			bi.self = nil
		}
	}
}
