package neigh

// Neighbour and ARP counters.
//
// Flow: the datapath (Output) and ARP input count in a Worker's own
// plain counters, on cache lines no other worker writes, and publish them to
// atomic mirrors on Publish (once per batch, by the caller). Writer-side counters live in the table under Table.mu.
// Table.Stats sums the published mirrors and the table's counters.
//
// Locking: Worker counters belong to the worker's goroutine; the
// mirrors are atomic; the table counters are guarded by Table.mu.

import "sync/atomic"

// Worker counter indices.
const (
	wcHits = iota // lookups = hits + misses
	wcMisses
	wcStaleTouches
	wcARPRxRequests
	wcARPRxReplies
	wcARPTxReplies
	wcARPRequestsNotLocal // requests for addresses that are not ours (only update an existing sender entry)
	wcARPDAD              // duplicate address detection probes answered
	wcARPNotLearned       // requests to us from unknown senders not learned (table under pressure)
	wcARPRepliesLimited   // replies to senders not learned that the per-worker limit suppressed
	wcARPDropBase         // + ARPDrop
	wcCount               = wcARPDropBase + int(numARPDrops)
)

// Worker is one datapath worker's handle on the table: it holds the
// worker's counters. Create one per worker goroutine with NewWorker.
type Worker struct {
	_ [64]byte
	t *Table
	c [wcCount]uint64 // owned by the worker goroutine
	// The worker's budget of replies to senders it could not learn.
	replyWindow int64
	repliesLeft int
	_           [64]byte
	pub         [wcCount]atomic.Uint64 // published copy, read by Stats
	_           [64]byte
}

// NewWorker registers a worker.
func (t *Table) NewWorker() *Worker {
	w := &Worker{t: t}
	t.mu.Lock()
	t.workers = append(t.workers, w)
	t.mu.Unlock()
	return w
}

// Publish makes the worker's counters visible to Stats. Call it once per
// batch (it costs one atomic store per counter).
func (w *Worker) Publish() {
	for i := range w.c {
		if w.pub[i].Load() != w.c[i] {
			w.pub[i].Store(w.c[i])
		}
	}
}

// tableCounters are the writer-side counters (Table.mu).
type tableCounters struct {
	allocs, destroys, resolveFailed                   uint64
	queued, queueDrops, queuePurged                   uint64
	periodicGCRuns, forcedGCRuns                      uint64
	gcEvictions, forcedGCEvictions, flushed, adminDel uint64
	tableFulls, refusedInvalid                        uint64
	arpTxRequestsBcast, arpTxRequestsUcast            uint64
	learned, arpUpdates, arpUnsolicitedIgnored        uint64
	arpNotLearned, queueBudgetDrops                   uint64
	hashRebuilds                                      uint64
	discarded                                         uint64 // frames and events dropped for lack of a Actions
}

// Stats is a snapshot of the counters.
type Stats struct {
	// Datapath.
	Lookups, Hits, Misses uint64
	StaleTouches          uint64 // STALE entries the datapath used (moved to DELAY)

	// Table.
	Entries     int
	ByState     map[string]int // state name -> entries ("NONE" included when nonzero)
	QueuedNow   int            // packets waiting for resolution
	QueuedBytes int

	Allocs, Destroys  uint64
	ResolveFailed     uint64 // entries that went FAILED (res_failed)
	Queued            uint64 // packets queued for resolution
	QueueDrops        uint64 // oldest queued packets dropped for the byte limit (unres_discards)
	QueueBudgetDrops  uint64 // queued packets dropped for the global budget (UnresQlenBytesTotal)
	QueuePurged       uint64 // queued packets dropped with their entry (flush, gc)
	PeriodicGCRuns    uint64
	ForcedGCRuns      uint64
	GCEvictions       uint64 // removed by the periodic gc
	ForcedGCEvictions uint64 // removed by forced gc
	Flushed           uint64 // removed by FlushDev/ChangeAddr
	AdminDeleted      uint64
	TableFulls        uint64 // creations refused at gc_thresh3 (table_fulls)
	RefusedInvalid    uint64 // Resolve for addresses that cannot be neighbours
	HashRebuilds      uint64
	Discarded         uint64

	// ARP.
	ARPRxRequests, ARPRxReplies uint64            // valid frames received, by opcode
	ARPTxReplies                uint64            // replies written for requests to our addresses
	ARPTxRequestsBcast          uint64            // requests asked for: broadcast
	ARPTxRequestsUcast          uint64            // requests asked for: unicast probes
	ARPRequestsNotLocal         uint64            // requests for other hosts (no reply)
	ARPDAD                      uint64            // DAD probes (sender 0.0.0.0) answered
	ARPLearned                  uint64            // entries created by requests to us
	ARPNotLearned               uint64            // requests to us from unknown senders not learned: table at gc_thresh2
	ARPRepliesLimited           uint64            // of those, not answered: over the per-worker reply limit (1,000/s)
	ARPUpdates                  uint64            // existing entries updated from ARP
	ARPUnsolicitedIgnored       uint64            // frames about unknown senders not for us (arp_accept 0)
	ARPDrops                    map[string]uint64 // by ARPDrop name
}

// Stats sums the counters. Worker counters are as of their last Publish.
func (t *Table) Stats() Stats {
	var s Stats
	t.mu.Lock()
	c := t.c
	s.Entries = t.entries
	s.ByState = map[string]int{}
	for i, v := range t.stateCount {
		if v == 0 {
			continue
		}
		st := NUDNone
		if i > 0 {
			st = State(1 << (i - 1))
		}
		s.ByState[st.String()] = v
	}
	s.QueuedNow, s.QueuedBytes = t.queuedPackets, t.queuedBytes
	workers := append([]*Worker(nil), t.workers...)
	t.mu.Unlock()

	var w [wcCount]uint64
	for _, wk := range workers {
		for i := range w {
			w[i] += wk.pub[i].Load()
		}
	}
	s.Hits, s.Misses, s.StaleTouches = w[wcHits], w[wcMisses], w[wcStaleTouches]
	s.Lookups = s.Hits + s.Misses
	s.ARPRxRequests, s.ARPRxReplies, s.ARPTxReplies = w[wcARPRxRequests], w[wcARPRxReplies], w[wcARPTxReplies]
	s.ARPRequestsNotLocal, s.ARPDAD = w[wcARPRequestsNotLocal], w[wcARPDAD]
	s.ARPDrops = map[string]uint64{}
	for r := ARPDrop(1); r < numARPDrops; r++ {
		s.ARPDrops[r.String()] = w[wcARPDropBase+int(r)]
	}
	s.Allocs, s.Destroys, s.ResolveFailed = c.allocs, c.destroys, c.resolveFailed
	s.Queued, s.QueueDrops, s.QueuePurged, s.QueueBudgetDrops = c.queued, c.queueDrops, c.queuePurged, c.queueBudgetDrops
	s.PeriodicGCRuns, s.ForcedGCRuns = c.periodicGCRuns, c.forcedGCRuns
	s.GCEvictions, s.ForcedGCEvictions, s.Flushed, s.AdminDeleted = c.gcEvictions, c.forcedGCEvictions, c.flushed, c.adminDel
	s.TableFulls, s.RefusedInvalid, s.HashRebuilds, s.Discarded = c.tableFulls, c.refusedInvalid, c.hashRebuilds, c.discarded
	s.ARPTxRequestsBcast, s.ARPTxRequestsUcast = c.arpTxRequestsBcast, c.arpTxRequestsUcast
	s.ARPLearned, s.ARPUpdates, s.ARPUnsolicitedIgnored = c.learned, c.arpUpdates, c.arpUnsolicitedIgnored
	s.ARPNotLearned = c.arpNotLearned + w[wcARPNotLearned]
	s.ARPRepliesLimited = w[wcARPRepliesLimited]
	return s
}

// ARPDropsTotal sums the ARP drops.
func (s *Stats) ARPDropsTotal() uint64 {
	var n uint64
	for _, v := range s.ARPDrops {
		n += v
	}
	return n
}
