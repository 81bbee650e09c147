package hostpath

// The punt side of a Twin without a kernel: a device that is never
// drained, so the queue fills. Runs without root.

import (
	"testing"

	"github.com/netfwd/netfwd/internal/pktio"
)

// stalledTwin is a Twin whose device exists but whose writer never runs.
func stalledTwin(limits Limits, queueBytes int) *Twin {
	m := &Manager{opts: Options{QueueBytes: queueBytes}}
	tw := newTwin(m, "eth1")
	for c := range NumClasses {
		tw.lim[c].SetLimit(limits[c])
	}
	tw.dev.Store(&tapDev{name: "nf-eth1"})
	return tw
}

func TestPuntQueueFullDropsAndCounts(t *testing.T) {
	tw := stalledTwin(Limits{NoLimit, NoLimit, NoLimit}, 64<<10)
	f := udpFrame(t, testMAC, peerMAC, 0, peerIP, routerIP, 1, 2, make([]byte, 1000))
	ok := 0
	for range 200 {
		if tw.Punt(f) {
			ok++
		}
	}
	// 1052 bytes + the header take 17 granules of 1024.
	if want := 1024 / 17; ok != want {
		t.Fatalf("%d punts queued, want %d (the queue's room)", ok, want)
	}
	if s := tw.Stats(); s.PuntDrops != uint64(200-ok) || s.PuntErrors != 0 || s.Punted != 0 {
		t.Fatalf("stats %+v", s)
	}
	// Too big for the queue (over a quarter of it), too short, bad offset.
	big := udpFrame(t, testMAC, peerMAC, 0, peerIP, routerIP, 1, 2, make([]byte, 17000))
	if tw.Punt(big) || tw.Punt(f[:13]) || tw.PuntPacket(f, 10, pktio.Offload{}) || tw.PuntPacket(f, len(f)+1, pktio.Offload{}) {
		t.Fatal("a bad punt was accepted")
	}
	if s := tw.Stats(); s.PuntErrors != 4 {
		t.Fatalf("punt errors %d, want 4", s.PuntErrors)
	}
	// Closing the device drains the queue, counting what was in it.
	tw.dev.Store(nil)
	tw.drainQueue()
	if s := tw.Stats(); s.PuntDrops != 200 {
		t.Fatalf("after the drain: drops %d, want all 200", s.PuntDrops)
	}
}

func TestPuntAllocsNoKernel(t *testing.T) {
	tw := stalledTwin(DefaultLimits, 1<<20)
	f := udpFrame(t, testMAC, peerMAC, 0, peerIP, routerIP, 1, 2, nil)
	tagged := udpFrame(t, testMAC, peerMAC, 7, peerIP, routerIP, 1, 2, nil)
	gso := pktio.Offload{GSOType: pktio.GSOUDPL4, GSOSize: 10, NeedsCsum: true, L4Off: 20, CsumOffset: 6}
	a := testing.AllocsPerRun(5000, func() {
		tw.Punt(f)
		tw.PuntPacket(tagged, 18, gso)
		if _, ok := tw.q.peek(); ok {
			tw.q.release()
		}
	})
	if a != 0 {
		t.Fatalf("punting allocates %v per call (queued, full or rate limited alike)", a)
	}
}
