package neigh

// Zero allocations on the hot paths: datapath lookups (hit and miss), the
// answer to an ARP request from a known sender, and queueing behind an
// unresolved neighbour whose queue is full (the dropped buffer is reused).

import (
	"testing"

	"github.com/netfwd/netfwd/internal/race"
	"github.com/netfwd/netfwd/wire"
)

func TestNeighZeroAllocs(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	h := newHarness(t, DefaultParams())
	h.resolve(tPeer, ipPacket(1, tPeer, 64))
	h.replyToUs(tMAC1, tPeer)
	h.out.Reset()
	hdr := make([]byte, 14)
	if a := testing.AllocsPerRun(1000, func() {
		if !h.w.Output(tIf, tPeer, hdr) {
			t.Fatal("miss")
		}
	}); a != 0 {
		t.Fatalf("Output hit: %v allocs", a)
	}
	if a := testing.AllocsPerRun(1000, func() { h.w.Output(tIf, tPeer2, hdr) }); a != 0 {
		t.Fatalf("Output miss: %v allocs", a)
	}
	frame := arpFrame(wire.BroadcastMAC, wire.ARPRequest, tMAC1, tPeer, wire.MAC{}, tLocal)
	if a := testing.AllocsPerRun(1000, func() {
		if n, _ := h.w.InputARP(&h.in, frame, h.now, h.reply, &h.out); n != wire.ARPFrameLen {
			t.Fatal("no reply")
		}
	}); a != 0 {
		t.Fatalf("ARP reply: %v allocs", a)
	}
	pkt := ipPacket(1, tPeer2, 1000)
	for i := 0; i < 300; i++ { // fill the queue
		h.resolve(tPeer2, pkt)
	}
	h.out.Reset()
	if a := testing.AllocsPerRun(1000, func() {
		if h.resolve(tPeer2, pkt) != Queued {
			t.Fatal("not queued")
		}
	}); a != 0 {
		t.Fatalf("Resolve on a full queue: %v allocs", a)
	}
}
