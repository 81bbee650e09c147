package l3

// Why the router drops a packet. Every packet that does not leave the engine
// is counted under exactly one reason; the names are stable Prometheus label
// values.

import "github.com/netfwd/netfwd/wire"

// DropReason is a reason for dropping a packet in the router.
type DropReason uint8

const (
	DropNone DropReason = iota
	DropIPTooShort
	DropIPVersion
	DropIPHeaderLen
	DropIPTotalLen
	DropIPChecksum
	DropMartianSource
	DropMartianDest
	DropNotForUs    // link-layer destination is not the interface's address
	DropEtherType   // neither IPv4 nor ARP
	DropIfaceDown   // ingress interface is down
	DropTTLExpired  // TTL would reach 0 (ICMP time exceeded sent when allowed)
	DropNoRoute     // no route, or an unreachable rule (ICMP net unreachable)
	DropBlackhole   // blackhole route or rule: silent
	DropUnreachable // unreachable route (ICMP host unreachable)
	DropProhibit    // prohibit route or rule (ICMP administratively prohibited)
	DropFragNeeded  // too big with DF set (ICMP fragmentation needed)
	DropNeighFailed // the next hop did not answer ARP (ICMP host unreachable)
	DropNeighQueue  // the neighbour table refused it (full, address not resolvable) or dropped it from its queue (limit, entry removed)
	DropLocalProto  // to the router, a protocol it does not serve (ICMP unreachable sent)
	DropLocalICMP   // to the router, an ICMP message it does not answer
	DropBroadcast   // broadcast or multicast the router does not serve (never forwarded)
	DropEgressDown  // the route's interface is down (or went down while the packet waited for ARP)
	DropNoEgress    // the route's interface is unknown to the engine
	DropARP         // malformed or ignored ARP
	DropFragment    // fragment to the router (no reassembly)
	DropL2Short     // shorter than an Ethernet header
	DropNoIface     // arrived where the router has no interface
	DropL2Broadcast // unicast IP in a link-layer broadcast: not forwarded
	dropReasonCount
)

var dropNames = [dropReasonCount]string{
	"", "ip_too_short", "ip_version", "ip_header_len", "ip_total_len", "ip_checksum",
	"martian_source", "martian_destination", "not_for_us", "ethertype", "iface_down",
	"ttl_expired", "no_route", "blackhole", "unreachable", "prohibit", "frag_needed",
	"neigh_failed", "neigh_queue", "local_protocol", "local_icmp", "broadcast",
	"egress_down", "no_egress", "arp", "local_fragment", "l2_short", "no_iface", "l2_broadcast",
}

// ipv4Drops names the drop reason of each way a header fails wire.ParseIPv4.
var ipv4Drops = [...]DropReason{
	wire.IPv4TooShort:     DropIPTooShort,
	wire.IPv4BadVersion:   DropIPVersion,
	wire.IPv4BadHeaderLen: DropIPHeaderLen,
	wire.IPv4BadTotalLen:  DropIPTotalLen,
	wire.IPv4BadChecksum:  DropIPChecksum,
}

func (r DropReason) String() string {
	if r < dropReasonCount {
		return dropNames[r]
	}
	return "unknown"
}

// DropReasons lists every reason (for metrics).
func DropReasons() []DropReason {
	out := make([]DropReason, 0, dropReasonCount-1)
	for r := DropReason(1); r < dropReasonCount; r++ {
		out = append(out, r)
	}
	return out
}
