package neigh

// Dump formats: `ip neigh show` lines and `ip -j neigh show` JSON.

import (
	"strings"
	"testing"
	"time"

	"github.com/netfwd/netfwd/wire"
)

func TestNeighShowFormats(t *testing.T) {
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
	names := func(i uint32) string { return map[uint32]string{tIf: "eth0", 9: "vlan10"}[i] }
	infos := h.tab.Dump(h.now)

	var b strings.Builder
	FormatShow(&b, infos, ShowFilter{}, names)
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
	FormatShow(&b, infos, ShowFilter{IfIndex: tIf, States: uint16(NUDNoARP | NUDPermanent)}, names)
	if want := "10.0.0.5 lladdr 02:00:00:00:00:11 PERMANENT\n10.0.0.6 lladdr 02:00:00:00:00:11 NOARP\n"; b.String() != want {
		t.Fatalf("show dev eth0 nud noarp nud permanent:\n%s", b.String())
	}
	b.Reset()
	FormatJSON(&b, infos[:3], ShowFilter{}, names)
	wantJSON := `[{"dst":"10.0.0.2","dev":"eth0","lladdr":"02:00:00:00:00:02","state":["REACHABLE"]},` +
		`{"dst":"10.0.0.3","dev":"eth0","state":["INCOMPLETE"]},{"dst":"10.0.0.4","dev":"eth0","state":["FAILED"]}]` + "\n"
	if b.String() != wantJSON {
		t.Fatalf("json:\n%s\nwant:\n%s", b.String(), wantJSON)
	}
	b.Reset()
	FormatJSON(&b, nil, ShowFilter{}, names)
	if b.String() != "[]\n" {
		t.Fatalf("empty json %q", b.String())
	}
	if i := infos[1]; i.Queued != 1 || i.Probes != 4 || // probes start at ucast_solicit in INCOMPLETE
		i.Addr().String() != "10.0.0.3" || i.Addr().As4() != [4]byte{10, 0, 0, 3} {
		t.Fatalf("info %+v", i)
	}
}
