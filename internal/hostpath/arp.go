package hostpath

// The kernel's ARP replies. netfwd answers every ARP request for its
// addresses itself (it must: the answer is the router's MAC whether or not
// a twin exists) and punts a copy of each request to the kernel, so the
// kernel learns the sender as a neighbour, which it only does when it
// replies (arp_process: neigh_event_ns is on the reply path; arp_ignore
// would stop the learning with the reply). So the kernel does reply, and
// the inject loop drops its replies before they reach the wire: one answer
// per request. The kernel's own requests, and everything else it sends,
// pass. Options.KeepKernelARPReplies turns the filter off.
//
// Locking: none; a pure function.

import "github.com/netfwd/netfwd/wire"

// isARPReply reports whether frame (untagged, as the kernel sends on a
// twin) is an ARP reply.
func isARPReply(frame []byte) bool {
	return len(frame) >= wire.EthernetHeaderLen+8 && // up to the op field
		wire.Ethernet(frame).Type() == wire.EtherTypeARP &&
		wire.ARP(frame[wire.EthernetHeaderLen:]).Op() == wire.ARPReply
}
