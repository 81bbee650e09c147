package l2

// Neighbour suppression (Linux br_do_proxy_suppress_arp, IPv4/ARP).
//
// l3 feeds a per-bridge table of {VID, IPv4} -> MAC with its neighbour
// entries (SetNeighbor) and its own addresses (SetOwnAddress). When any
// member has neigh_suppress, a broadcast ARP request arriving on a port
// WITHOUT neigh_suppress is inspected:
//   - probes and gratuitous ARP (sender 0.0.0.0 or sender == target): not
//     flooded to neigh_suppress ports;
//   - target is the router's own address: not flooded to neigh_suppress
//     ports, no proxy reply (the host answers; it gets the broadcast);
//   - target is a known neighbour whose MAC the FDB places behind a
//     neigh_suppress port: the bridge answers on its behalf out of the
//     ingress port and does not flood the request to neigh_suppress ports.
// Requests arriving on neigh_suppress ports are forwarded untouched (the
// EVPN model: suppress ports face the overlay), as in Linux.
//
// Locking: the table is a hashindex.Index (lock-free reads); writers hold
// Bridge.nmu.

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/netfwd/netfwd/wire"
)

type neighEntry struct {
	key uint64 // vid<<32 | IPv4; first: the index reads it
	mac wire.MAC
	own bool
}

func neighKey(vid uint16, ip4 uint32) uint64 { return uint64(vid)<<32 | uint64(ip4) }

func neighIP(ip netip.Addr) (uint32, error) {
	if !ip.Is4() || ip.IsUnspecified() {
		return 0, fmt.Errorf("neighbour address %v: need a non-zero IPv4 address", ip)
	}
	a := ip.As4()
	return binary.BigEndian.Uint32(a[:]), nil
}

// SetNeighbor records that ip in vid is at mac (l3's neighbour entries).
// vid is 0 on a bridge without vlan_filtering.
func (b *Bridge) SetNeighbor(vid uint16, ip netip.Addr, mac wire.MAC) error {
	return b.setNeigh(vid, ip, mac, false)
}

// SetOwnAddress records one of the router's own addresses in vid.
func (b *Bridge) SetOwnAddress(vid uint16, ip netip.Addr, mac wire.MAC) error {
	return b.setNeigh(vid, ip, mac, true)
}

func (b *Bridge) setNeigh(vid uint16, ip netip.Addr, mac wire.MAC, own bool) error {
	a, err := neighIP(ip)
	if err != nil {
		return err
	}
	if vid > wire.MaxVID {
		return errVID(vid)
	}
	if !mac.IsValidUnicast() {
		return fmt.Errorf("neighbour %v: invalid MAC %s", ip, mac)
	}
	b.nmu.Lock()
	defer b.nmu.Unlock()
	b.neigh.Put(&neighEntry{key: neighKey(vid, a), mac: mac, own: own})
	return nil
}

// DelNeighbor forgets ip in vid (neighbour or own address).
func (b *Bridge) DelNeighbor(vid uint16, ip netip.Addr) {
	a, err := neighIP(ip)
	if err != nil {
		return
	}
	b.nmu.Lock()
	defer b.nmu.Unlock()
	b.neigh.Delete(neighKey(vid, a))
}

// suppressARP inspects a broadcast ARP frame (l3 at off) that arrived on a
// port without neigh_suppress; it may queue a proxy reply to the ingress
// port-VLAN (its origin: the request's). It returns true if the request
// must not be flooded to neigh_suppress ports.
func (b *Bridge) suppressARP(tx *Tx, inPV *PortVLAN, vid uint16, frame []byte, off int, origin int32) bool {
	a := frame[off:]
	if len(a) < 28 || binary.BigEndian.Uint16(a[0:2]) != 1 || binary.BigEndian.Uint16(a[2:4]) != wire.EtherTypeIPv4 ||
		a[4] != 6 || a[5] != 4 {
		return false
	}
	op := binary.BigEndian.Uint16(a[6:8])
	sip := binary.BigEndian.Uint32(a[14:18])
	tip := binary.BigEndian.Uint32(a[24:28])
	if tip>>24 == 127 || tip>>28 == 0xe {
		return false // loopback or multicast target
	}
	if op != 3 && op != 4 && (sip == 0 || sip == tip) {
		return true // probe or gratuitous
	}
	if op != 1 {
		return false
	}
	n := b.neigh.Get(neighKey(vid, tip))
	if n == nil {
		return false
	}
	if n.own {
		return true
	}
	dpv, _, ok := b.fdb.lookup(fdbKey(n.mac, vid))
	if !ok || dpv == nil || !ctlHas(dpv.port.ctl.Load(), FlagNeighSuppress) {
		return false
	}
	// Reply: from the neighbour to the requester, out of the ingress port.
	r := tx.arena.alloc(42)
	copy(r[0:6], a[8:14]) // to the requester's hardware address
	copy(r[6:12], n.mac[:])
	binary.BigEndian.PutUint16(r[12:14], wire.EtherTypeARP)
	binary.BigEndian.PutUint16(r[14:16], 1)
	binary.BigEndian.PutUint16(r[16:18], wire.EtherTypeIPv4)
	r[18], r[19] = 6, 4
	binary.BigEndian.PutUint16(r[20:22], 2)
	copy(r[22:28], n.mac[:])
	binary.BigEndian.PutUint32(r[28:32], tip)
	copy(r[32:38], a[8:14])
	binary.BigEndian.PutUint32(r[38:42], sip)
	fv := frameView{data: r, raw: inPV.flags.Load()&pvRaw != 0, tci: vid}
	tx.emit(inPV, &fv, origin)
	tx.delta.proxyRep++
	return true
}
