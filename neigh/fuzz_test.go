package neigh

// Fuzz target over raw ARP frames: InputARP never panics, every frame is
// either counted as a request or reply received or as a drop with a reason
// (never both, never neither), and every reply it writes is a valid ARP
// reply from the interface for one of its addresses.

import (
	"testing"

	"github.com/netfwd/netfwd/wire"
)

func FuzzARPInput(f *testing.F) {
	f.Add(arpFrame(wire.BroadcastMAC, wire.ARPRequest, tMAC1, tPeer, wire.MAC{}, tLocal))
	f.Add(arpFrame(tIfMAC, wire.ARPReply, tMAC1, tPeer, tIfMAC, tLocal))
	f.Add(arpFrame(wire.BroadcastMAC, wire.ARPRequest, tMAC1, 0, wire.MAC{}, tLocal))
	f.Add(arpFrame(wire.BroadcastMAC, wire.ARPReply, tMAC2, tPeer, tMAC2, tPeer))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 1, 0x08, 0x06, 0, 1})
	f.Fuzz(func(t *testing.T, frame []byte) {
		h := newHarness(t, DefaultParams())
		h.resolve(tPeer, ipPacket(1, tPeer, 64)) // an INCOMPLETE entry to resolve
		n, d := h.w.InputARP(&h.in, frame, h.now, h.reply, &h.out)
		h.w.Publish()
		s := h.tab.Stats()
		received := s.ARPRxRequests + s.ARPRxReplies
		drops := s.ARPDropsTotal()
		switch {
		case d == ARPOK && drops != 0, d != ARPOK && drops != 1:
			t.Fatalf("drop %v counted %d", d, drops)
		case d < ARPOtherHost && d != ARPOK && received != 0, d == ARPOK && received != 1:
			t.Fatalf("drop %v but received %d", d, received)
		}
		if n == 0 {
			return
		}
		a, rd := parseARPFrame(h.reply[:n])
		if rd != ARPOK || a.Op() != wire.ARPReply || a.SenderMAC() != tIfMAC || a.SenderIP() != tLocal ||
			wire.MAC(h.reply[6:12]) != tIfMAC || wire.MAC(h.reply[0:6]) != a.TargetMAC() {
			t.Fatalf("bad reply %x", h.reply[:n])
		}
	})
}
