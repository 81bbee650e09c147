package l3

// Router counters. Each worker accumulates plain counters while it works a
// batch and publishes them at Flush with one atomic add per changed counter
// into its own padded block; readers sum the blocks (the daemon's
// Prometheus exporter). No cache line is written by two workers.
//
// Locking: Engine.mu guards the list of blocks; the counters are atomics.

import "sync/atomic"

// icmpTypes are the ICMP messages the router counts by type.
var icmpKinds = [...]string{
	"echo_reply", "net_unreachable", "host_unreachable", "port_unreachable",
	"protocol_unreachable", "admin_prohibited", "frag_needed", "ttl_exceeded",
}

const (
	icmpEchoReplyIdx = iota
	icmpNetUnreachIdx
	icmpHostUnreachIdx
	icmpPortUnreachIdx
	icmpProtUnreachIdx
	icmpProhibitIdx
	icmpFragNeededIdx
	icmpTTLIdx
	numICMPKinds
)

type counters struct {
	in           uint64 // frames that reached the router (routed ports, host frames)
	fibLookups   uint64 // FIB lookups of the forwarding path and of router output
	queued       uint64 // transit packets parked waiting for ARP (released or expired later)
	released     uint64 // parked transit packets sent after ARP resolved (also counted forwarded)
	expired      uint64 // parked transit packets dropped (resolution failed, queue overflow, egress down)
	outputErrors uint64 // packets the router generated that could not be sent (now or after waiting for ARP)
	forwarded    uint64 // transit packets sent: at once, or at release after waiting for ARP
	fragmented   uint64 // packets split into fragments
	local        uint64 // delivered to the router (answered by it, or punted to the host path)
	punted       uint64 // frames handed to the host path (among local, and copies of ARP)
	arpIn        uint64
	drops        [dropReasonCount]uint64
	icmpSent     [numICMPKinds]uint64
	icmpLimited  uint64
}

type publishedCounters struct {
	in, queued, released, expired, outputErrors      atomic.Uint64
	fibLookups                                       atomic.Uint64
	forwarded, fragmented, local, arpIn, icmpLimited atomic.Uint64
	punted                                           atomic.Uint64
	drops                                            [dropReasonCount]atomic.Uint64
	icmpSent                                         [numICMPKinds]atomic.Uint64
	vrf                                              [maxVRFSlots]vrfPublished // vrfstats.go
	_                                                [64]byte
}

func (p *publishedCounters) add(c *counters) {
	addIf := func(a *atomic.Uint64, v uint64) {
		if v != 0 {
			a.Add(v)
		}
	}
	addIf(&p.in, c.in)
	addIf(&p.fibLookups, c.fibLookups)
	addIf(&p.queued, c.queued)
	addIf(&p.released, c.released)
	addIf(&p.expired, c.expired)
	addIf(&p.outputErrors, c.outputErrors)
	addIf(&p.forwarded, c.forwarded)
	addIf(&p.fragmented, c.fragmented)
	addIf(&p.local, c.local)
	addIf(&p.punted, c.punted)
	addIf(&p.arpIn, c.arpIn)
	addIf(&p.icmpLimited, c.icmpLimited)
	for i := range c.drops {
		addIf(&p.drops[i], c.drops[i])
	}
	for i := range c.icmpSent {
		addIf(&p.icmpSent[i], c.icmpSent[i])
	}
	*c = counters{}
}

// Stats is a snapshot of the router's counters, summed over workers. Every
// frame that reaches the router (In) ends as exactly one of Forwarded, Local,
// ARPIn or a drop under one reason, or waits for ARP: Forwarded counts every
// transit packet sent after its route decision, at once or when released
// from waiting. Queued counts the transit packets parked until ARP resolves;
// each ends, once its resolution does, as Released (counted in Forwarded as
// it is sent) or Expired (counted under its drop reason too: neigh_failed,
// neigh_queue, egress_down, frag_needed). So with no packet waiting,
// In = Forwarded + Local + ARPIn + the drops, and Queued = Released + Expired.
// Fragmented counts packets sent in fragments (among Forwarded or the
// router's own). The router's own packets (ICMP, echo replies, resets) are
// not input: OutputErrors counts those it could not send.
type Stats struct {
	In, Queued, Released, Expired, OutputErrors          uint64
	FIBLookups                                           uint64
	Forwarded, Fragmented, Local, ARPIn, ICMPRateLimited uint64
	// Punted counts frames handed to the host path (SetPunter): IPv4 and
	// other packets for the box's own stack (among Local) and copies of
	// ARP frames (among ARPIn).
	Punted   uint64
	Drops    map[string]uint64 // by DropReason name
	ICMPSent map[string]uint64 // by kind
}

func sumCounters(blocks []*publishedCounters) Stats {
	s := Stats{Drops: map[string]uint64{}, ICMPSent: map[string]uint64{}}
	for _, b := range blocks {
		s.In += b.in.Load()
		s.FIBLookups += b.fibLookups.Load()
		s.Queued += b.queued.Load()
		s.Released += b.released.Load()
		s.Expired += b.expired.Load()
		s.OutputErrors += b.outputErrors.Load()
		s.Forwarded += b.forwarded.Load()
		s.Fragmented += b.fragmented.Load()
		s.Local += b.local.Load()
		s.Punted += b.punted.Load()
		s.ARPIn += b.arpIn.Load()
		s.ICMPRateLimited += b.icmpLimited.Load()
		for i := DropReason(1); i < dropReasonCount; i++ {
			s.Drops[i.String()] += b.drops[i].Load()
		}
		for i, n := range icmpKinds {
			s.ICMPSent[n] += b.icmpSent[i].Load()
		}
	}
	return s
}
