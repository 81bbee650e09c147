package show

import (
	"strings"
	"testing"

	"github.com/netfwd/netfwd/neigh"
	"github.com/netfwd/netfwd/wire"
)

// `ip neigh show` text and JSON of a dump, filtered as iproute2 filters.
func TestNeighFormats(t *testing.T) {
	m1, m2 := wire.MAC{2, 0, 0, 0, 0, 0x11}, wire.MAC{2, 0, 0, 0, 0, 0x22}
	infos := []neigh.Info{
		{IfIndex: 1, IP: 0x0a000002, LLAddr: wire.MAC{2, 0, 0, 0, 0, 2}, HasLLAddr: true, State: neigh.NUDReachable},
		{IfIndex: 1, IP: 0x0a000003, State: neigh.NUDIncomplete},
		{IfIndex: 1, IP: 0x0a000004, State: neigh.NUDFailed},
		{IfIndex: 1, IP: 0x0a000005, LLAddr: m1, HasLLAddr: true, State: neigh.NUDPermanent},
		{IfIndex: 1, IP: 0x0a000006, LLAddr: m1, HasLLAddr: true, State: neigh.NUDNoARP},
		{IfIndex: 9, IP: 0x0a000007, LLAddr: m2, HasLLAddr: true, State: neigh.NUDStale},
		{IfIndex: 1, IP: 0x0a000008, State: neigh.NUDNone},
	}
	names := func(i uint32) string { return map[uint32]string{1: "eth0", 9: "vlan10"}[i] }
	var b strings.Builder
	neighText(&b, infos, neighFilter{}, names)
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
	neighText(&b, infos, neighFilter{ifIndex: 1, states: uint16(neigh.NUDNoARP | neigh.NUDPermanent)}, names)
	if want := "10.0.0.5 lladdr 02:00:00:00:00:11 PERMANENT\n10.0.0.6 lladdr 02:00:00:00:00:11 NOARP\n"; b.String() != want {
		t.Fatalf("show dev eth0 nud noarp nud permanent:\n%s", b.String())
	}
	b.Reset()
	neighText(&b, infos, neighFilter{states: 0x100}, names)
	if want := "10.0.0.8 dev eth0\n"; b.String() != want {
		t.Fatalf("show nud none:\n%s", b.String())
	}
	b.Reset()
	neighJSON(&b, infos[:3], neighFilter{}, names)
	wantJSON := `[{"dst":"10.0.0.2","dev":"eth0","lladdr":"02:00:00:00:00:02","state":["REACHABLE"]},` +
		`{"dst":"10.0.0.3","dev":"eth0","state":["INCOMPLETE"]},{"dst":"10.0.0.4","dev":"eth0","state":["FAILED"]}]` + "\n"
	if b.String() != wantJSON {
		t.Fatalf("json:\n%s\nwant:\n%s", b.String(), wantJSON)
	}
	b.Reset()
	neighJSON(&b, nil, neighFilter{}, names)
	if b.String() != "[]\n" {
		t.Fatalf("empty json %q", b.String())
	}
}
