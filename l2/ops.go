package l2

// Configuration operations: one typed value per iproute2 command the bridge
// understands. internal/config parses lines into these; Prepare validates a
// list of them and Commit applies it (config.go).

import (
	"fmt"
	"time"

	"github.com/netfwd/netfwd/wire"
)

// Op is one configuration operation.
type Op interface {
	// String renders the op in iproute2 syntax (for messages and tests).
	String() string
}

// BridgeAdd is `link add NAME [address MAC] type bridge [vlan_filtering 0|1]
// [ageing_time CS] [fdb_max_learned N] [vlan_default_pvid VID]`.
type BridgeAdd struct {
	Name  string
	Attrs BridgeAttrs
}

// BridgeSet is `link set dev NAME type bridge OPTIONS`.
type BridgeSet struct {
	Name  string
	Attrs BridgeAttrs
}

// BridgeDel is `link del NAME` for a bridge: its ports are released.
type BridgeDel struct{ Name string }

// PortAdd declares a port (an interface named in the config that is not
// created with `link add`); idempotent. MAC, if non-zero, is its address.
type PortAdd struct {
	Name string
	MAC  wire.MAC
}

// SetMaster is `link set [dev] PORT master BRIDGE`, or `nomaster` when
// Master is empty. The port is declared if it does not exist yet.
type SetMaster struct {
	Port   string
	Master string
}

// VLANAdd is `bridge vlan add dev DEV vid VID[-VIDEnd] [pvid] [untagged]
// [self]`. DEV may be a port or the bridge itself (its own membership:
// host delivery, as with `self` in Linux). VIDEnd 0 means VID alone.
type VLANAdd struct {
	Dev            string
	VID, VIDEnd    uint16
	PVID, Untagged bool
	Self           bool
}

// VLANDel is `bridge vlan del dev DEV vid VID[-VIDEnd] [self]`.
type VLANDel struct {
	Dev         string
	VID, VIDEnd uint16
	Self        bool
}

// FDBKind is the state keyword of `bridge fdb add`.
type FDBKind uint8

// FDB entry kinds (iproute2's default, without a keyword, is permanent).
const (
	FDBPermanent FDBKind = iota // `local`/`permanent`: frames to it go to the host
	FDBStatic                   // `static`: forwarded to the port, never aged
	FDBDynamic                  // `dynamic`: forwarded to the port, aged
)

// FDBAdd is `bridge fdb add|replace MAC dev DEV [vlan VID] [master|self]
// [local|permanent|static|dynamic] [sticky]`. Without a VLAN on a bridge
// with vlan_filtering the entry is added for VID 0 and each VLAN of the
// port (Linux). DEV may be the bridge (`self`): a local entry of the bridge.
type FDBAdd struct {
	MAC     wire.MAC
	Dev     string
	VID     uint16
	HasVID  bool
	Kind    FDBKind
	Sticky  bool
	Replace bool // `bridge fdb replace`: overwrite an existing entry
}

// FDBDel is `bridge fdb del MAC dev DEV [vlan VID]`.
type FDBDel struct {
	MAC    wire.MAC
	Dev    string
	VID    uint16
	HasVID bool
}

// LinkSet is `bridge link set dev PORT [learning on|off] [flood on|off]
// [mcast_flood on|off] [bcast_flood on|off] [neigh_suppress on|off]
// [isolated on|off] [state N] [fdb_max_learned N]`.
type LinkSet struct {
	Dev        string
	Set, Clear PortFlag
	State      *PortState
	MaxLearned *uint32 // per-port learned limit (0: none)
}

// MDBAdd is `bridge mdb add dev BRIDGE port PORT grp GROUP [vid VID]`
// (static; the group is a multicast MAC).
type MDBAdd struct {
	Bridge, Port string
	Group        wire.MAC
	VID          uint16
}

// MDBDel is `bridge mdb del dev BRIDGE port PORT grp GROUP [vid VID]`.
type MDBDel struct {
	Bridge, Port string
	Group        wire.MAC
	VID          uint16
}

func (o BridgeAdd) String() string { return "link add " + o.Name + " type bridge" + o.Attrs.String() }
func (o BridgeSet) String() string {
	return "link set dev " + o.Name + " type bridge" + o.Attrs.String()
}
func (o BridgeDel) String() string { return "link del " + o.Name }
func (o PortAdd) String() string   { return "port " + o.Name }
func (o SetMaster) String() string {
	if o.Master == "" {
		return "link set " + o.Port + " nomaster"
	}
	return "link set " + o.Port + " master " + o.Master
}
func vidRange(a, b uint16) string {
	if b == 0 || b == a {
		return fmt.Sprint(a)
	}
	return fmt.Sprintf("%d-%d", a, b)
}
func (o VLANAdd) String() string {
	s := "bridge vlan add dev " + o.Dev + " vid " + vidRange(o.VID, o.VIDEnd)
	if o.PVID {
		s += " pvid"
	}
	if o.Untagged {
		s += " untagged"
	}
	if o.Self {
		s += " self"
	}
	return s
}
func (o VLANDel) String() string {
	s := "bridge vlan del dev " + o.Dev + " vid " + vidRange(o.VID, o.VIDEnd)
	if o.Self {
		s += " self"
	}
	return s
}
func (o FDBAdd) String() string {
	verb := "add"
	if o.Replace {
		verb = "replace"
	}
	s := "bridge fdb " + verb + " " + o.MAC.String() + " dev " + o.Dev
	if o.HasVID {
		s += fmt.Sprint(" vlan ", o.VID)
	}
	s += " " + [...]string{"permanent", "static", "dynamic"}[o.Kind]
	if o.Sticky {
		s += " sticky"
	}
	return s
}
func (o FDBDel) String() string {
	s := "bridge fdb del " + o.MAC.String() + " dev " + o.Dev
	if o.HasVID {
		s += fmt.Sprint(" vlan ", o.VID)
	}
	return s
}
func (o LinkSet) String() string {
	s := "bridge link set dev " + o.Dev
	for _, f := range flagNames {
		if o.Set&f.f != 0 {
			s += " " + f.name + " on"
		}
		if o.Clear&f.f != 0 {
			s += " " + f.name + " off"
		}
	}
	if o.State != nil {
		s += fmt.Sprint(" state ", uint8(*o.State))
	}
	if o.MaxLearned != nil {
		s += fmt.Sprint(" fdb_max_learned ", *o.MaxLearned)
	}
	return s
}
func (o MDBAdd) String() string {
	return fmt.Sprintf("bridge mdb add dev %s port %s grp %s vid %d", o.Bridge, o.Port, o.Group, o.VID)
}
func (o MDBDel) String() string {
	return fmt.Sprintf("bridge mdb del dev %s port %s grp %s vid %d", o.Bridge, o.Port, o.Group, o.VID)
}

func (a BridgeAttrs) String() string {
	s := ""
	if a.MAC != nil {
		s += " address " + a.MAC.String()
	}
	if a.VLANFiltering != nil {
		s += fmt.Sprint(" vlan_filtering ", b2i(*a.VLANFiltering))
	}
	if a.AgeingTime != nil {
		s += fmt.Sprint(" ageing_time ", int64(*a.AgeingTime/(10*time.Millisecond)))
	}
	if a.FDBMaxLearned != nil {
		s += fmt.Sprint(" fdb_max_learned ", *a.FDBMaxLearned)
	}
	if a.DefaultPVID != nil {
		s += fmt.Sprint(" vlan_default_pvid ", *a.DefaultPVID)
	}
	if a.FloodDeferThreshold != nil {
		s += fmt.Sprint(" flood_defer ", *a.FloodDeferThreshold)
	}
	if a.McastPrefilter != nil {
		s += fmt.Sprint(" mcast_prefilter ", b2i(*a.McastPrefilter))
	}
	return s
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func errVID(vid uint16) error { return fmt.Errorf("invalid VLAN id %d (1-%d)", vid, wire.MaxVID) }
