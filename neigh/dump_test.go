package l3

// Dump formats: `ip neigh show` lines and `ip -j neigh show` JSON.

import (
	"strings"
	"testing"
	"time"
)

func TestNeighShowFormats(t *testing.T) {
	h := newHarness(t, DefaultNeighParams())
	mac2 := [6]byte{0x02, 0, 0, 0, 0, 0x02}
	h.in.IfMAC = tIfMAC
	h.resolve(tPeer, ipPacket(1, tPeer, 40)) // 10.0.0.2 REACHABLE after the reply
	h.replyToUs(mac2, tPeer)
	h.resolve(0x0a000003, ipPacket(1, 3, 40)) // 10.0.0.3 INCOMPLETE
	h.resolve(0x0a000004, ipPacket(1, 4, 40)) // 10.0.0.4 FAILED after 3 s
	for i := time.Duration(1); i <= 3; i++ {
		h.at(i * time.Second)
	}
	h.resolve(0x0a000003, ipPacket(1, 3, 40)) // restart 10.0.0.3
	h.tab.Add(NeighSpec{IfIndex: tIf, IP: 0x0a000005, LLAddr: tMAC1, HasLLAddr: true, State: NUDPermanent, IfMAC: tIfMAC}, h.now, &h.out)
	h.tab.Add(NeighSpec{IfIndex: tIf, IP: 0x0a000006, LLAddr: tMAC1, HasLLAddr: true, State: NUDNoARP, IfMAC: tIfMAC}, h.now, &h.out)
	h.tab.Add(NeighSpec{IfIndex: 9, IP: 0x0a000007, LLAddr: tMAC2, HasLLAddr: true, State: NUDStale, IfMAC: tIfMAC}, h.now, &h.out)
	names := func(i uint32) string { return map[uint32]string{tIf: "eth0", 9: "vlan10"}[i] }
	infos := h.tab.Dump(h.now)

	var b strings.Builder
	FormatNeighShow(&b, infos, NeighShowFilter{}, names)
	want := `10.0.0.2 dev eth0 lladdr 02:00:00:00:00:02 REACHABLE
10.0.0.3 dev eth0 INCOMPLETE
10.0.0.4 dev eth0 FAILED
10.0.0.5 dev eth0 lladdr 02:00:00:00:00:11 PERMANENT
10.0.0.7 dev vlan10 lladdr 02:00:00:00:00:22 STALE
`
	if b.String() != want {
		t.Fatalf("show:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	FormatNeighShow(&b, infos, NeighShowFilter{IfIndex: tIf, States: uint16(NUDNoARP | NUDPermanent)}, names)
	if want := "10.0.0.5 lladdr 02:00:00:00:00:11 PERMANENT\n10.0.0.6 lladdr 02:00:00:00:00:11 NOARP\n"; b.String() != want {
		t.Fatalf("show dev eth0 nud noarp nud permanent:\n%s", b.String())
	}
	b.Reset()
	FormatNeighJSON(&b, infos[:3], NeighShowFilter{}, names)
	wantJSON := `[{"dst":"10.0.0.2","dev":"eth0","lladdr":"02:00:00:00:00:02","state":["REACHABLE"]},` +
		`{"dst":"10.0.0.3","dev":"eth0","state":["INCOMPLETE"]},{"dst":"10.0.0.4","dev":"eth0","state":["FAILED"]}]` + "\n"
	if b.String() != wantJSON {
		t.Fatalf("json:\n%s\nwant:\n%s", b.String(), wantJSON)
	}
	b.Reset()
	FormatNeighJSON(&b, nil, NeighShowFilter{}, names)
	if b.String() != "[]\n" {
		t.Fatalf("empty json %q", b.String())
	}
	if i := infos[1]; i.Queued != 1 || i.Probes != 4 || // probes start at ucast_solicit in INCOMPLETE
		i.Addr().String() != "10.0.0.3" || Addr4(i.Addr()) != 0x0a000003 {
		t.Fatalf("info %+v", i)
	}
}
