package ctlsock

// `monitor`: streams route, neighbour, link and FDB changes to a client
// until it goes, as `ip monitor` does.
//
// Flow: the first subscriber starts the Monitor's poller, which every
// Interval takes a snapshot of the objects its subscribers follow
// (show.TakeSnapshot: published state only, the FIB re-read only when its
// version moved) and hands the differences to every subscriber's queue.
// A queue is bounded (QueueLen events): when a client reads too slowly
// the poller drops its events and counts them, and the client's stream
// says `monitor: N events lost` before the next event it gets. Nothing a
// client does can block the poller, the applier or the datapath; a client
// that stops reading altogether is dropped after the socket's
// WriteTimeout. The poller stops with its last subscriber.
//
// Locking: Monitor.mu guards the subscriber set and the poller's running
// state; a subscriber's queue is a channel, its loss count an atomic.

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/show"
)

// Monitor defaults.
const (
	DefaultMonitorInterval = 100 * time.Millisecond
	DefaultMonitorQueue    = 4096
)

// Monitor fans state changes out to monitor clients.
type Monitor struct {
	st       show.State
	Interval time.Duration // set before the first Subscribe
	QueueLen int

	mu      sync.Mutex
	subs    map[*subscriber]bool // guarded by mu
	running bool                 // a poller runs; guarded by mu
	closed  bool                 // guarded by mu
}

// NewMonitor returns a monitor of st's state.
func NewMonitor(st show.State) *Monitor {
	return &Monitor{st: st, Interval: DefaultMonitorInterval, QueueLen: DefaultMonitorQueue, subs: map[*subscriber]bool{}}
}

type subscriber struct {
	objs config.MonitorObjects
	ch   chan show.Event
	lost atomic.Uint64
	gone chan struct{} // closed by Close: the daemon stops
}

// subscribe adds a subscriber; nil after Close.
func (m *Monitor) subscribe(objs config.MonitorObjects) *subscriber {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	s := &subscriber{objs: objs, ch: make(chan show.Event, m.QueueLen), gone: make(chan struct{})}
	m.subs[s] = true
	if !m.running {
		m.running = true
		go m.poll()
	}
	return s
}

func (m *Monitor) unsubscribe(s *subscriber) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.subs, s)
}

// Close ends every subscription (their streams end) and refuses new ones.
func (m *Monitor) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.closed = true
	for s := range m.subs {
		close(s.gone)
		delete(m.subs, s)
	}
}

// wanted returns the union of the subscribers' objects (0: none left, and
// the poller stops).
func (m *Monitor) wanted() (config.MonitorObjects, []*subscriber) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var objs config.MonitorObjects
	subs := make([]*subscriber, 0, len(m.subs))
	for s := range m.subs {
		objs |= s.objs
		subs = append(subs, s)
	}
	if objs == 0 {
		m.running = false
	}
	return objs, subs
}

func (m *Monitor) poll() {
	objs, _ := m.wanted()
	if objs == 0 {
		return
	}
	prev := show.TakeSnapshot(m.st, objs, nil)
	t := time.NewTicker(m.Interval)
	defer t.Stop()
	for range t.C {
		objs, subs := m.wanted()
		if objs == 0 {
			return
		}
		cur := show.TakeSnapshot(m.st, objs, prev)
		// Objects a new subscriber added have no earlier snapshot: Diff
		// compares only those both hold, and they start from this one.
		cur.Diff(prev, func(ev show.Event) {
			for _, s := range subs {
				if s.objs&ev.Object == 0 {
					continue
				}
				select {
				case s.ch <- ev:
				default:
					s.lost.Add(1)
				}
			}
		})
		prev = cur
	}
}

// stream writes q's events to rw until done closes (the client went), the
// monitor closes, or a write fails.
func (m *Monitor) stream(rw *responseWriter, q config.Monitor, asJSON bool, done <-chan struct{}) {
	s := m.subscribe(q.Objects)
	if s == nil {
		return
	}
	defer m.unsubscribe(s)
	report := time.NewTicker(time.Second)
	defer report.Stop()
	var line []byte
	flushLost := func() bool {
		if n := s.lost.Swap(0); n > 0 {
			line = append(line[:0], "monitor: "...)
			line = strconv.AppendUint(line, n, 10)
			line = append(line, " events lost\n"...)
			rw.Write(line)
		}
		return rw.err == nil
	}
	for {
		select {
		case <-done:
			return
		case <-s.gone:
			return
		case <-report.C:
			if !flushLost() || rw.flush() != nil {
				return
			}
		case ev := <-s.ch:
			if !flushLost() {
				return
			}
			line = ev.AppendLine(line[:0], asJSON, q.All && !asJSON)
			rw.Write(line)
			// Write what is queued before waiting again: the client sees
			// events as they happen.
			if len(s.ch) == 0 && rw.flush() != nil {
				return
			}
		}
	}
}
