package hostpath

// Per-twin counters. Workers bump the punt-side refusals (queue full,
// errors) and the limiters count their own refusals; the twin's writer
// goroutine counts what it wrote, its reader goroutine what it injected.
// Every counter is an atomic; Stats reads a snapshot (each field atomic,
// not the set as a whole). Counters live with the Twin, so they survive
// the re-creation of its device.
//
// Locking: none.

import "sync/atomic"

// Stats is a snapshot of one twin's counters.
type Stats struct {
	// Punted: frames written into the twin (the kernel received them).
	Punted uint64
	// PuntDrops: frames refused because the punt queue was full or the
	// twin had no device (being re-created, removed, or its creation failed).
	PuntDrops uint64
	// PuntErrors: frames refused as malformed or too big for the queue, and
	// writes the kernel refused.
	PuntErrors uint64
	// RateLimited: punts refused by the rate limit, per class.
	RateLimited [NumClasses]uint64
	// Injected: frames the kernel sent on the twin that the Inject
	// callback took.
	Injected uint64
	// InjectErrors: frames the callback refused, or that could not be read
	// as one complete frame.
	InjectErrors uint64
	// InjectFiltered: the kernel's ARP replies, dropped because netfwd
	// answers ARP itself (see Options.KeepKernelARPReplies).
	InjectFiltered uint64
}

// RateLimitedTotal sums RateLimited over the classes.
func (s Stats) RateLimitedTotal() uint64 {
	var n uint64
	for _, v := range s.RateLimited {
		n += v
	}
	return n
}

type twinCounters struct {
	// Written by workers.
	puntDrops  atomic.Uint64
	puntErrors atomic.Uint64
	_          [48]byte
	// Written by the writer goroutine.
	punted atomic.Uint64
	_      [56]byte
	// Written by the reader goroutine.
	injected       atomic.Uint64
	injectErrors   atomic.Uint64
	injectFiltered atomic.Uint64
}
