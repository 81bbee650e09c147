package l2

// VLANs: port-VLANs, the bridge's per-VID VLAN objects and their member sets.
//
// A PortVLAN is a port's membership in one VLAN (its egress tagging and pvid
// flags). A vlan is the bridge-wide object for one VID: the set of member
// port-VLANs used for flooding, the bridge's own ("self") membership for host
// delivery, and the multicast filter. Each PortVLAN points at its vlan, so
// ingress goes port -> PortVLAN (cached pvid, or one two-level array index
// for a tagged frame) -> vlan without a hash lookup, and flooding visits
// member PortVLANs, never looking a VLAN up per egress port.
//
// Member set: a lock-free singly linked list of member nodes,
// used as is for up to floodArrayThreshold members; above that an immutable
// array of the members, rebuilt on every membership change and published
// with one atomic store. Nodes are never reused, so a reader walking a node
// that is being unlinked still reaches the rest of the list.
//
// Locking: membership changes are made under Domain.mu (writer); readers use
// atomics only.

import "sync/atomic"

// floodArrayThreshold: above this many members a VLAN floods from an array.
const floodArrayThreshold = 8

// PortVLAN flags.
const (
	pvMember   uint32 = 1 << iota // currently a member (objects outlive membership)
	pvUntagged                    // egress untagged
	pvPVID                        // this VID is the port's pvid
	pvRaw                         // not VLAN-aware: frames leave as they came (VID 0 objects)
)

// PortVLAN is a port's membership in one VLAN.
type PortVLAN struct {
	VID  uint16
	port *Port
	// vlan is the bridge VLAN this object belongs to (nil for the raw
	// object of a port outside any bridge). Atomic: a port that changes
	// bridges gets its objects repointed while old readers may still look.
	vlan  atomic.Pointer[vlan]
	flags atomic.Uint32
}

// Port returns the port.
func (pv *PortVLAN) Port() *Port { return pv.port }

// Member reports whether the port is currently a member of the VLAN.
func (pv *PortVLAN) Member() bool { return pv.flags.Load()&pvMember != 0 }

// Untagged reports whether frames leave this port-VLAN without a tag.
func (pv *PortVLAN) Untagged() bool { return pv.flags.Load()&(pvUntagged|pvRaw) != 0 }

// memberNode is one element of a VLAN's member list.
type memberNode struct {
	pv   *PortVLAN
	next atomic.Pointer[memberNode]
}

// vlan is the bridge-wide state of one VID (VID 0: the non-filtering domain).
type vlan struct {
	vid uint16
	br  *Bridge

	head  atomic.Pointer[memberNode]  // member list
	array atomic.Pointer[[]*PortVLAN] // set when more than floodArrayThreshold members
	n     int                         // member count; guarded by Domain.mu
	count atomic.Int32                // n, for lock-free readers (flood deferral)

	// self is the bridge device's own membership (pvMember, pvUntagged,
	// pvPVID): frames for the host are delivered only in VLANs the bridge is
	// a member of, as `bridge vlan add dev br0 vid V self` in Linux.
	self atomic.Uint32

	mc atomic.Pointer[mcFilter] // multicast filter; nil = pass all
}

// addMemberLocked links pv into the member set. Guarded by Domain.mu.
func (v *vlan) addMemberLocked(pv *PortVLAN) {
	n := &memberNode{pv: pv}
	n.next.Store(v.head.Load())
	v.head.Store(n)
	v.n++
	v.count.Store(int32(v.n))
	v.rebuildArrayLocked()
}

// delMemberLocked unlinks pv. Guarded by Domain.mu.
func (v *vlan) delMemberLocked(pv *PortVLAN) {
	var prev *memberNode
	for n := v.head.Load(); n != nil; n = n.next.Load() {
		if n.pv == pv {
			if prev == nil {
				v.head.Store(n.next.Load())
			} else {
				prev.next.Store(n.next.Load())
			}
			v.n--
			v.count.Store(int32(v.n))
			v.rebuildArrayLocked()
			return
		}
		prev = n
	}
}

func (v *vlan) rebuildArrayLocked() {
	if v.n <= floodArrayThreshold {
		if v.array.Load() != nil {
			v.array.Store(nil)
		}
		return
	}
	a := make([]*PortVLAN, 0, v.n)
	for n := v.head.Load(); n != nil; n = n.next.Load() {
		a = append(a, n.pv)
	}
	v.array.Store(&a)
}

// members calls fn for each member (tests, show, config).
func (v *vlan) members(fn func(pv *PortVLAN)) {
	for n := v.head.Load(); n != nil; n = n.next.Load() {
		fn(n.pv)
	}
}

// vidTable maps a VID (0..4095) to a *T with two atomic loads and no
// hashing: 64 lazily allocated chunks of 64 pointers. Writers must be
// serialised by the owner's lock; readers are lock-free.
type vidTable[T any] struct {
	chunks [64]atomic.Pointer[[64]atomic.Pointer[T]]
}

func (t *vidTable[T]) get(vid uint16) *T {
	c := t.chunks[vid>>6&63].Load()
	if c == nil {
		return nil
	}
	return c[vid&63].Load()
}

func (t *vidTable[T]) set(vid uint16, v *T) {
	i := vid >> 6 & 63
	c := t.chunks[i].Load()
	if c == nil {
		c = new([64]atomic.Pointer[T])
		t.chunks[i].Store(c)
	}
	c[vid&63].Store(v)
}

// each visits the non-nil entries in VID order.
func (t *vidTable[T]) each(fn func(vid uint16, v *T)) {
	for i := range t.chunks {
		c := t.chunks[i].Load()
		if c == nil {
			continue
		}
		for j := range c {
			if v := c[j].Load(); v != nil {
				fn(uint16(i<<6|j), v)
			}
		}
	}
}
