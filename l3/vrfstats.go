package l3

// Per-VRF counters: the packets of each VRF that the router forwarded and
// dropped, by reason (netfwd_vrf_forwarded_total, netfwd_vrf_l3_drops_total).
//
// A VRF gets a slot (1..maxVRFSlots-1) the first time an interface is
// enslaved to it, and keeps it for the life of the process: a VRF deleted
// and created again under its name counts on, as a Prometheus series
// should; past maxVRFSlots-1 names, further VRFs are not counted per VRF
// (their packets still count in the router's totals). Slot 0 is "no VRF".
//
// What is counted: the route decision onward, per packet received on an
// interface of the VRF: forwarded counts transit packets handed to
// transmit (sent at once, or parked waiting for ARP: a parked packet
// whose resolution fails is not subtracted), drops the packets dropped at
// or after their route lookup (no_route, ttl_expired, blackhole,
// unreachable, prohibit, frag_needed, egress_down, neigh_queue, ...).
// Drops in IPv4 validation before the lookup (bad header, martian source)
// count only in the router's totals.
//
// Cost: VRFs imply custom rules (the l3mdev rule), so the batch already
// walks the rules per packet and looks up its input interface there
// (lookupFlows); the slot comes from that. Without custom rules nothing
// here runs: w.vrf stays 0 and drop/forward pay one predictable branch.
// The worker keeps plain counters for the slots a batch touched (vrfDirty)
// and publishes only those.
//
// Locking: slots are assigned under Router.mu (SyncIfaces); the name list
// is published with an atomic pointer; counters as in stats.go.

import "sync/atomic"

// maxVRFSlots bounds the VRFs counted separately (slot 0: none).
const maxVRFSlots = 64

// vrfCounters are one VRF's counters in a worker.
type vrfCounters struct {
	forwarded uint64
	drops     [dropReasonCount]uint64
	dirty     bool
}

type vrfPublished struct {
	forwarded atomic.Uint64
	drops     [dropReasonCount]atomic.Uint64
}

// VRFStats are one VRF's counters summed over workers.
type VRFStats struct {
	Forwarded uint64
	Drops     map[string]uint64 // by DropReason name
}

// vrfSlot returns the counting slot of VRF name, assigning one if it has
// none (0: none left). Called with r.mu held.
func (r *Router) vrfSlot(name string) uint8 {
	if s, ok := r.vrfSlots[name]; ok {
		return s
	}
	names := r.vrfNames.Load()
	n := 1
	if names != nil {
		n = len(*names)
	}
	if n >= maxVRFSlots {
		return 0
	}
	next := make([]string, n+1)
	if names != nil {
		copy(next, *names)
	}
	next[n] = name
	r.vrfSlots[name] = uint8(n)
	r.vrfNames.Store(&next)
	return uint8(n)
}

// vrfDrop counts a drop for the current packet's VRF (w.vrf != 0).
func (w *Worker) vrfDrop(r DropReason) {
	c := w.vrfCounter()
	c.drops[r]++
}

// vrfForwarded counts a forwarded packet for the current packet's VRF.
func (w *Worker) vrfForwarded() { w.vrfCounter().forwarded++ }

func (w *Worker) vrfCounter() *vrfCounters {
	c := &w.vc[w.vrf]
	if !c.dirty {
		c.dirty = true
		w.vrfDirty = append(w.vrfDirty, w.vrf)
	}
	return c
}

// publishVRF adds the touched slots' counters to the published block.
func (w *Worker) publishVRF() {
	for _, s := range w.vrfDirty {
		c, p := &w.vc[s], &w.pub.vrf[s]
		if c.forwarded != 0 {
			p.forwarded.Add(c.forwarded)
		}
		for i, v := range c.drops {
			if v != 0 {
				p.drops[i].Add(v)
			}
		}
		*c = vrfCounters{}
	}
	w.vrfDirty = w.vrfDirty[:0]
}

// VRFStats returns the per-VRF counters by VRF name (VRFs that never had
// an interface are absent).
func (e *Engine) VRFStats() map[string]VRFStats {
	names := e.r.vrfNames.Load()
	if names == nil {
		return nil
	}
	e.mu.Lock()
	blocks := append([]*publishedCounters(nil), e.blocks...)
	e.mu.Unlock()
	out := make(map[string]VRFStats, len(*names))
	for s := 1; s < len(*names); s++ {
		st := VRFStats{Drops: map[string]uint64{}}
		for _, b := range blocks {
			st.Forwarded += b.vrf[s].forwarded.Load()
			for r := DropReason(1); r < dropReasonCount; r++ {
				st.Drops[r.String()] += b.vrf[s].drops[r].Load()
			}
		}
		out[(*names)[s]] = st
	}
	return out
}
