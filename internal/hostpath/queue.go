package hostpath

// puntQueue: the frames workers punt into a twin, waiting for the twin's
// writer goroutine. Many producers (datapath workers), one consumer.
//
// A byte ring cut into 64-byte granules: a record (the bytes to write into
// the TAP) takes whole consecutive granules, so a 60-byte ARP frame costs 64
// bytes and a 64 KiB GSO super-frame 1025 granules of the same ring, and
// memory is not reserved per slot at the largest size. A record that would
// run past the end of the ring is placed at its start, and the granules
// before the end become a padding record.
//
// Flow: a producer reserves granules by moving head with one CAS (checked
// against tail: a full ring refuses, the producer drops and counts), copies
// its bytes, then publishes the record by storing its header word. The
// consumer reads the header at tail: zero means the record there is still
// being written (or nothing is there); otherwise it hands the bytes out and,
// when done, clears the header and moves tail on. Header words are non-zero
// only for published, unconsumed records, so a stale word never looks like
// a record.
//
// Wake-up: the consumer sleeps on a channel when the ring is empty. It sets
// sleeping and then looks again; a producer publishes and then looks at
// sleeping. Go's atomics are sequentially consistent, so one of the two sees
// the other: no frame waits for a wake-up that never comes.
//
// Locking: none on the producer side (the channel send only happens when
// the consumer sleeps, then the runtime takes the channel's lock). The
// consumer side (peek/release) belongs to one goroutine at a time.

import "sync/atomic"

const (
	granule = 64
	recData = 1 // header kind: a record; value = its length in bytes
	recPad  = 2 // header kind: padding up to the ring's end; value = granules
)

type puntQueue struct {
	data []byte
	hdr  []atomic.Uint64 // per granule: kind | value<<2, or 0
	size uint64          // granules, a power of two
	max  int             // largest record accepted, bytes

	_    [64]byte
	head atomic.Uint64 // next granule to reserve; producers
	_    [56]byte
	tail atomic.Uint64 // next granule to consume; the consumer
	_    [56]byte

	sleeping atomic.Bool
	wake     chan struct{}
}

// newPuntQueue makes a queue of at least bytes bytes (rounded up to a power
// of two granules). Records above a quarter of it are refused, so a big one
// always finds room once the ring drains, padding included.
func newPuntQueue(bytes int) *puntQueue {
	n := uint64(16)
	for n*granule < uint64(bytes) {
		n *= 2
	}
	return &puntQueue{
		data: make([]byte, n*granule),
		hdr:  make([]atomic.Uint64, n),
		size: n,
		max:  int(n*granule) / 4,
		wake: make(chan struct{}, 1),
	}
}

// push publishes one record made of a, b and c, back to back. It reports
// false when the record is too big (tooBig) or the ring is full.
func (q *puntQueue) push(a, b, c []byte) (ok, tooBig bool) {
	n := len(a) + len(b) + len(c)
	if n == 0 || n > q.max {
		return false, true
	}
	g := uint64(n+granule-1) / granule
	var start, off, need uint64
	for {
		h := q.head.Load()
		t := q.tail.Load()
		off = h & (q.size - 1)
		need = g
		if off+g > q.size {
			need = q.size - off + g
		}
		if h+need-t > q.size {
			return false, false
		}
		if q.head.CompareAndSwap(h, h+need) {
			start = h
			break
		}
	}
	rec := start
	if need != g { // wrapped: pad to the end, the record starts the next lap
		q.hdr[off].Store(recPad | (q.size-off)<<2)
		rec = start + q.size - off
	}
	at := int(rec&(q.size-1)) * granule
	at += copy(q.data[at:], a)
	at += copy(q.data[at:], b)
	copy(q.data[at:], c)
	q.hdr[rec&(q.size-1)].Store(recData | uint64(n)<<2)
	if q.sleeping.Load() {
		select {
		case q.wake <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
	return true, false
}

// peek returns the oldest published record, or false when there is none
// yet. The bytes stay valid until release.
func (q *puntQueue) peek() ([]byte, bool) {
	for {
		t := q.tail.Load()
		i := t & (q.size - 1)
		v := q.hdr[i].Load()
		switch v & 3 {
		case 0:
			return nil, false
		case recPad:
			q.hdr[i].Store(0)
			q.tail.Store(t + v>>2)
			continue
		}
		at := int(i) * granule
		return q.data[at : at+int(v>>2)], true
	}
}

// release frees the record peek returned.
func (q *puntQueue) release() {
	t := q.tail.Load()
	i := t & (q.size - 1)
	n := q.hdr[i].Load() >> 2
	q.hdr[i].Store(0) // before tail moves: the granule may be reused at once
	q.tail.Store(t + (n+granule-1)/granule)
}

// wait blocks until a record may be there or stop is closed; it reports
// false on stop.
func (q *puntQueue) wait(stop <-chan struct{}) bool {
	q.sleeping.Store(true)
	defer q.sleeping.Store(false)
	if _, ok := q.peek(); ok {
		return true
	}
	select {
	case <-q.wake:
		return true
	case <-stop:
		return false
	}
}

// pending reports how many granules are reserved or published and not yet
// consumed (for tests and stats).
func (q *puntQueue) pending() uint64 { return q.head.Load() - q.tail.Load() }
