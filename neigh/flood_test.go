package neigh

// Table limits under attack: an ARP flood from a million random senders to
// our address, and traffic to a million unresolved destinations. The table
// must stay at or under gc_thresh3 (plus the permanent entries, which are
// exempt), and under gc_thresh2 for the ARP flood (unknown senders are not
// learned under pressure, and answered at most 1,000/s); the queued packets
// within the global budget; memory must stay flat, datapath
// lookups keep going throughout (they never wait for the writer), an
// established neighbour in use survives the flood, and a next hop first
// needed in the middle of the flood is resolved.

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/race"
	"github.com/netfwd/netfwd/wire"
)

func floodSize() int {
	switch {
	case race.Enabled:
		return 50_000
	case testing.Short():
		return 200_000
	}
	return 1_000_000
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// datapathProbe runs lookups of a permanent entry until stop, counting them;
// every one must hit.
func datapathProbe(t *testing.T, tab *Table, stop *atomic.Bool, count *atomic.Int64, wg *sync.WaitGroup) {
	defer wg.Done()
	w := tab.NewWorker()
	hdr := make([]byte, 14)
	for !stop.Load() {
		for i := 0; i < 64; i++ {
			if !w.Output(tIf, tPeer, hdr) {
				t.Error("permanent entry missed during the flood")
				return
			}
		}
		count.Add(64)
		runtime.Gosched()
	}
}

type floodKind int

const (
	floodARP floodKind = iota
	floodUnresolved
)

func runFlood(t *testing.T, kind floodKind) {
	p := DefaultParams()
	h := newHarness(t, p)
	if err := h.tab.Add(Spec{IfIndex: tIf, IP: tPeer, LLAddr: tMAC1, HasLLAddr: true, State: NUDPermanent, IfMAC: tIfMAC}, h.now, &h.out); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var lookups atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go datapathProbe(t, h.tab, &stop, &lookups, &wg)

	r := rand.New(rand.NewPCG(1, 2))
	total := floodSize()
	step := int64(10*time.Second) / int64(total) // the flood lasts 10 s of virtual time
	nextTick := h.now
	pkt := ipPacket(0xc0a80001, 0, 64)
	var baseline uint64
	maxEntries, answered := 0, 0
	frame := make([]byte, wire.ARPFrameLen)
	// The established neighbour: resolved before the flood, used by the
	// datapath throughout, answering its probes.
	const fresh = wire.Addr4(0x0a000009)
	hdr := make([]byte, 14)
	if h.w.Resolve(tIf, tPeer2, tIfMAC, pkt, 0, h.now, &h.out).Verdict != Queued {
		t.Fatal("established neighbour not queued")
	}
	h.replyToUs(tMAC2, tPeer2)
	h.out.Reset()
	freshReplyAt, freshSent := -1, false
	for i := 0; i < total; i++ {
		h.now += step
		if h.now >= nextTick {
			h.tab.Tick(h.now, &h.out)
			nextTick = h.now + int64(10*time.Millisecond)
			if !h.w.Output(tIf, tPeer2, hdr) {
				t.Fatalf("after %d: the established neighbour is gone (%v)", i, h.state(tPeer2))
			}
		}
		// A next hop needed for the first time: resolved during the ARP
		// flood. (During a flood to unresolved hosts it may be refused like
		// them: nothing tells it from them until it answers; see
		// docs/neigh.md.)
		if i == total/2 && kind == floodARP {
			if v := h.w.Resolve(tIf, fresh, tIfMAC, pkt, 7, h.now, &h.out).Verdict; v != Queued {
				t.Fatalf("new next hop during the flood: %v", v)
			}
			freshReplyAt = i + 100 // it answers a little later
		}
		if i == freshReplyAt {
			h.replyToUs(tMAC1, fresh)
		}
		for _, f := range h.out.Transmit {
			freshSent = freshSent || (f.IP == fresh && f.Mark == 7)
		}
		for _, r := range h.out.Requests {
			if r.Target == tPeer2 { // the established neighbour answers its probes
				h.replyToUs(tMAC2, tPeer2)
			}
		}
		ip := 0x0b000000 + wire.Addr4(r.Uint32N(1<<24)) // 11.0.0.0/8
		switch kind {
		case floodARP:
			mac := wire.MAC{0x02, byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())}
			wire.BuildARP(frame, wire.BroadcastMAC, mac, wire.ARPRequest, mac, ip, wire.MAC{}, tLocal)
			if n, d := h.w.InputARP(&h.in, frame, h.now, h.reply, &h.out); n == wire.ARPFrameLen && d == ARPOK {
				answered++
			}
		case floodUnresolved:
			h.w.Resolve(tIf, ip, tIfMAC, pkt, 0, h.now, &h.out)
		}
		h.out.Reset()
		if i%1000 == 0 {
			h.w.Publish()
			s := h.tab.Stats()
			maxEntries = max(maxEntries, s.Entries)
			limit := p.GCThresh3
			if kind == floodARP {
				limit = p.GCThresh2 + 2 // + the established and the new next hop
			}
			if s.Entries > limit+1 { // +1: the permanent entry
				t.Fatalf("after %d: %d entries", i, s.Entries)
			}
			if s.QueuedBytes > p.UnresQlenBytesTotal {
				t.Fatalf("after %d: %d bytes queued", i, s.QueuedBytes)
			}
		}
		if i == total/10 {
			baseline = heapInUse()
		}
	}
	stop.Store(true)
	wg.Wait()
	h.w.Publish()
	end := heapInUse()
	s := h.tab.Stats()
	t.Logf("%d events: max entries %d, table fulls %d, forced gc evictions %d, lookups during flood %d, heap %d -> %d KiB",
		total, maxEntries, s.TableFulls, s.ForcedGCEvictions, lookups.Load(), baseline>>10, end>>10)
	if end > baseline+8<<20 {
		t.Fatalf("heap grew from %d to %d bytes", baseline, end)
	}
	if lookups.Load() == 0 {
		t.Fatal("no datapath lookups completed during the flood")
	}
	switch {
	case kind == floodARP && s.ARPNotLearned == 0:
		t.Fatalf("the flood never hit the limits: %+v", s)
	case kind == floodUnresolved && s.ForcedGCEvictions == 0:
		t.Fatalf("the flood never hit the limits: %+v", s)
	}
	if (kind == floodARP && (!freshSent || !h.state(fresh).Valid())) || !h.state(tPeer2).Valid() {
		t.Fatalf("new next hop sent %v, state %v; established neighbour %v", freshSent, h.state(fresh), h.state(tPeer2))
	}
	// Requests from senders not learned are answered up to 1,000/s per
	// worker (10 s of virtual time), the others are counted.
	if kind == floodARP && (uint64(answered)+s.ARPRepliesLimited != uint64(total) || answered < 10_000 || answered > 10_000+2*p.GCThresh2) {
		t.Fatalf("answered %d of %d requests, %d over the reply limit", answered, total, s.ARPRepliesLimited)
	}
	if n := h.tab.index.Slots(); n > 8*(p.GCThresh3+1) {
		t.Fatalf("index has %d slots for at most %d entries", n, p.GCThresh3+1)
	}
}

func TestNeighFloodARPRequests(t *testing.T)       { runFlood(t, floodARP) }
func TestNeighFloodUnresolvedTraffic(t *testing.T) { runFlood(t, floodUnresolved) }

// Datapath lookups complete while the writer lock is held.
func TestNeighOutputNeverLocks(t *testing.T) {
	h := newHarness(t, DefaultParams())
	h.arp(wire.ARPRequest, wire.BroadcastMAC, tMAC1, tPeer, wire.MAC{}, tLocal)
	w := h.tab.NewWorker()
	h.tab.mu.Lock()
	done := make(chan bool)
	go func() {
		hdr := make([]byte, 14)
		ok := true
		for i := 0; i < 1000; i++ {
			ok = ok && w.Output(tIf, tPeer, hdr) // STALE: touches too
		}
		done <- ok
	}()
	select {
	case ok := <-done:
		h.tab.mu.Unlock()
		if !ok {
			t.Fatal("lookup missed")
		}
	case <-time.After(10 * time.Second):
		h.tab.mu.Unlock()
		t.Fatal("datapath lookups blocked on the writer lock")
	}
	h.at(time.Second)
	h.expect(tPeer, NUDDelay)
}

// The global budget of queued packets: with many unresolved entries each
// queueing packets, the sum never exceeds UnresQlenBytesTotal; the oldest
// packets of other entries make room (counted), round robin, so a new
// entry's first packet is always queued; every packet comes back once.
func TestNeighQueueGlobalBudget(t *testing.T) {
	p := DefaultParams()
	p.UnresQlenBytesTotal = 64 << 10
	h := newHarness(t, p)
	pkt := ipPacket(1, 2, 1400)
	charge := wire.EthernetHeaderLen + len(pkt) + queuedPacketHeader
	queued, back := 0, 0
	count := func() {
		back += len(h.out.Transmit) + len(h.out.Unreachable) + len(h.out.Dropped)
		h.out.Reset()
	}
	for i := range 2000 {
		ip := 0x0b000000 + wire.Addr4(i%200) // 200 entries, 10 packets each
		if v := h.resolve(ip, pkt); v != Queued {
			t.Fatalf("packet %d: %v", i, v)
		}
		queued++
		count()
		s := h.tab.Stats()
		if s.QueuedBytes > p.UnresQlenBytesTotal {
			t.Fatalf("after %d: %d bytes queued, budget %d", i, s.QueuedBytes, p.UnresQlenBytesTotal)
		}
		if s.QueuedNow != queued-back {
			t.Fatalf("after %d: %d queued, %d in, %d back", i, s.QueuedNow, queued, back)
		}
	}
	s := h.tab.Stats()
	if want := p.UnresQlenBytesTotal / charge; s.QueuedNow != want || s.QueueBudgetDrops != uint64(2000-want) {
		t.Fatalf("%d queued (want %d), %d budget drops", s.QueuedNow, want, s.QueueBudgetDrops)
	}
	// A new next hop gets its first packet in.
	if v := h.resolve(0x0c000001, pkt); v != Queued {
		t.Fatal(v)
	}
	h.replyToUs(tMAC1, 0x0c000001)
	found := false
	for _, f := range h.out.Transmit {
		found = found || f.IP == 0x0c000001
	}
	if !found {
		t.Fatal("the new next hop's packet was not kept")
	}
	// A packet larger than the whole budget is dropped at once.
	h.out.Reset()
	small := p
	small.UnresQlenBytesTotal = 1000
	h2 := newHarness(t, small)
	if v := h2.resolve(0x0c000002, pkt); v != Queued || len(h2.out.Dropped) != 1 || h2.tab.Stats().QueueBudgetDrops != 1 {
		t.Fatalf("%v, dropped %v", v, h2.out.Dropped)
	}
}
