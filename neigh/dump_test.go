package neigh

// Dump: the entries as data, sorted by interface and address.

import (
	"testing"
	"time"

	"github.com/netfwd/netfwd/wire"
)

func TestDump(t *testing.T) {
	h := newHarness(t, DefaultParams())
	mac2 := wire.MAC{0x02, 0, 0, 0, 0, 0x02}
	h.in.IfMAC = tIfMAC
	h.resolve(tPeer, ipPacket(1, tPeer, 40)) // 10.0.0.2 REACHABLE after the reply
	h.replyToUs(mac2, tPeer)
	h.resolve(0x0a000003, ipPacket(1, 3, 40)) // 10.0.0.3 INCOMPLETE
	h.resolve(0x0a000004, ipPacket(1, 4, 40)) // 10.0.0.4 FAILED after 3 s
	for i := time.Duration(1); i <= 3; i++ {
		h.at(i * time.Second)
	}
	h.resolve(0x0a000003, ipPacket(1, 3, 40)) // restart 10.0.0.3
	h.tab.Add(Spec{IfIndex: tIf, IP: 0x0a000005, LLAddr: tMAC1, HasLLAddr: true, State: NUDPermanent, IfMAC: tIfMAC}, h.now, &h.out)
	h.tab.Add(Spec{IfIndex: tIf, IP: 0x0a000006, LLAddr: tMAC1, HasLLAddr: true, State: NUDNoARP, IfMAC: tIfMAC}, h.now, &h.out)
	h.tab.Add(Spec{IfIndex: 9, IP: 0x0a000007, LLAddr: tMAC2, HasLLAddr: true, State: NUDStale, IfMAC: tIfMAC}, h.now, &h.out)
	infos := h.tab.Dump(h.now)

	// (internal/show prints these; its tests check the text.)
	type row struct {
		ip     wire.Addr4
		ifi    uint32
		state  State
		hasLL  bool
		lladdr wire.MAC
	}
	want := []row{
		{tPeer, tIf, NUDReachable, true, mac2},
		{0x0a000003, tIf, NUDIncomplete, false, wire.MAC{}},
		{0x0a000004, tIf, NUDFailed, false, wire.MAC{}},
		{0x0a000005, tIf, NUDPermanent, true, tMAC1},
		{0x0a000006, tIf, NUDNoARP, true, tMAC1},
		{0x0a000007, 9, NUDStale, true, tMAC2},
	}
	if len(infos) != len(want) {
		t.Fatalf("%d entries, want %d: %+v", len(infos), len(want), infos)
	}
	for k, w := range want {
		i := infos[k]
		if i.IP != w.ip || i.IfIndex != w.ifi || i.State != w.state || i.HasLLAddr != w.hasLL || w.hasLL && i.LLAddr != w.lladdr {
			t.Errorf("entry %d: %+v, want %+v", k, i, w)
		}
	}
	if i := infos[1]; i.Queued != 1 || i.Probes != 4 || // probes start at ucast_solicit in INCOMPLETE
		i.Addr().String() != "10.0.0.3" || i.Addr().As4() != [4]byte{10, 0, 0, 3} {
		t.Fatalf("info %+v", i)
	}
}
