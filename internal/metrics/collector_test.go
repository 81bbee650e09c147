package metrics

import (
	"encoding/binary"
	"io"
	"net"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/netfwd/netfwd/internal/apply"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/fpm"
	"github.com/netfwd/netfwd/internal/kmirror"
	"github.com/netfwd/netfwd/internal/pktio/afxdp"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
	"github.com/netfwd/netfwd/wire"
)

var line = regexp.MustCompile(`(?m)^(netfwd_[a-z0-9_]+)(\{[^}]*\})? (\S+)$`)

func scrape(t *testing.T, src Source) map[string]float64 {
	t.Helper()
	srv := httptest.NewServer(Handler(NewCollector(src)))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := map[string]float64{}
	for _, g := range line.FindAllStringSubmatch(string(b), -1) {
		v, _ := strconv.ParseFloat(g[3], 64)
		m[g[1]+g[2]] = v
	}
	return m
}

// arpRequest builds a broadcast ARP request from sender for target.
func arpRequest(sender wire.MAC, spa, tpa [4]byte) []byte {
	f := make([]byte, 60)
	copy(f[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(f[6:12], sender[:])
	binary.BigEndian.PutUint16(f[12:], 0x0806)
	binary.BigEndian.PutUint16(f[14:], 1)
	binary.BigEndian.PutUint16(f[16:], 0x0800)
	f[18], f[19] = 6, 4
	binary.BigEndian.PutUint16(f[20:], 1)
	copy(f[22:28], sender[:])
	copy(f[28:32], spa[:])
	copy(f[38:42], tpa[:])
	return f
}

func TestCollectorMovesWithTraffic(t *testing.T) {
	e := l3.NewEngine(l3.EngineOptions{Clock: l2.NewManualClock()})
	c := apply.New(e)
	cmds, errs := config.Parse("m.conf", strings.NewReader(`address add 192.0.2.1/24 dev eth0
route add 10.0.0.0/8 via 192.0.2.9
route add blackhole 10.66.0.0/16
link add br0 address 02:bb:00:00:00:01 type bridge fdb_max_learned 100
link set eth1 master br0
link set eth2 master br0
`))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := c.Apply(cmds); err != nil {
		t.Fatal(err)
	}
	src := Source{Engine: e, Controller: c}
	before := scrape(t, src)
	if before[`netfwd_fib_routes{table="main",type="unicast"}`] != 2 || before[`netfwd_fib_routes{table="main",type="blackhole"}`] != 1 {
		t.Fatalf("route counts: %v", before)
	}
	if before[`netfwd_fdb_max_learned{bridge="br0"}`] != 100 {
		t.Fatalf("fdb limit: %v", before[`netfwd_fdb_max_learned{bridge="br0"}`])
	}
	w := e.NewWorker()
	sent := 0
	send := func(p *l2.Port, frames [][]byte) { sent += len(frames) }
	eth0 := e.Domain().Port("eth0")
	w.Receive(eth0, [][]byte{arpRequest(wire.MAC{2, 0, 0, 0, 0, 9}, [4]byte{192, 0, 2, 9}, [4]byte{192, 0, 2, 1})})
	w.Flush(send)
	eth1 := e.Domain().Port("eth1")
	bridged := arpRequest(wire.MAC{2, 0, 0, 0, 1, 1}, [4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2})
	w.Receive(eth1, [][]byte{bridged})
	w.Flush(send)
	after := scrape(t, src)
	for _, k := range []string{`netfwd_port_rx_packets_total{port="eth0"}`, `netfwd_port_tx_packets_total{port="eth0"}`,
		`netfwd_arp_received_total`, `netfwd_port_rx_packets_total{port="eth1"}`, `netfwd_flood_total{mode="inline"}`,
		`netfwd_fdb_learned_total`, `netfwd_fdb_entries{bridge="br0",type="learned"}`, `netfwd_neigh_entries{state="STALE"}`} {
		if after[k] <= before[k] {
			t.Errorf("%s did not move: %v -> %v", k, before[k], after[k])
		}
	}
	if sent != 2 {
		t.Errorf("sent %d frames, want the ARP reply and one flood copy", sent)
	}
}

// TestCollectorXDPCounters: an AF_XDP port's kick counters and the
// workers' waits come out under their documented names, split as
// documented (sent = kicks - again; spin = waits - blocked).
func TestCollectorXDPCounters(t *testing.T) {
	e := l3.NewEngine(l3.EngineOptions{Clock: l2.NewManualClock()})
	x := afxdp.XDPStats{FillRingEmpty: 3, TxByDescriptor: 90, TxCopied: 10, TxKicks: 12, TxKickAgain: 2, TxKickGaveUp: 1}
	src := Source{Engine: e,
		Ports: func() []PortIO {
			return []PortIO{{Name: "p1", IO: "afxdp native", Stats: x.Stats, XDP: &x}}
		},
		XDPWaits: func() afxdp.WaitStats { return afxdp.WaitStats{Waits: 50, Blocked: 7} },
	}
	m := scrape(t, src)
	for k, want := range map[string]float64{
		`netfwd_xdp_fill_ring_empty_total{port="p1"}`:         3,
		`netfwd_xdp_tx_kicks_total{port="p1",result="sent"}`:  10,
		`netfwd_xdp_tx_kicks_total{port="p1",result="again"}`: 2,
		`netfwd_xdp_tx_kick_gave_up_total{port="p1"}`:         1,
		`netfwd_xdp_worker_waits_total{result="spin"}`:        43,
		`netfwd_xdp_worker_waits_total{result="poll"}`:        7,
		`netfwd_xdp_tx_total{how="descriptor",port="p1"}`:     90,
		`netfwd_port_io{io="afxdp native",port="p1"}`:         1,
	} {
		if got, ok := m[k]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, want)
		}
	}
}

// udpFrame builds an IPv4/UDP frame from src to dst, to the MAC dstMAC.
func udpFrame(t *testing.T, dstMAC wire.MAC, src, dst string) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 0x50}, DstMAC: net.HardwareAddr(dstMAC[:]), EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.ParseIP(src).To4(), DstIP: net.ParseIP(dst).To4()}
	u := &layers.UDP{SrcPort: 1000, DstPort: 2000}
	u.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, u, gopacket.Payload(make([]byte, 20))); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Transit packets held for ARP are exported: queued, then released (and
// forwarded, at release) or expired (resolution failed); every reason
// label value is snake_case.
func TestCollectorHeldForARP(t *testing.T) {
	clock := l2.NewManualClock()
	e := l3.NewEngine(l3.EngineOptions{Clock: clock})
	c := apply.New(e)
	cmds, errs := config.Parse("m.conf", strings.NewReader(`address add 192.0.2.1/24 dev eth0
address add 198.51.100.1/24 dev eth1
route add 10.0.0.0/8 via 192.0.2.9
route add 10.99.0.0/16 via 192.0.2.10
`))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := c.Apply(cmds); err != nil {
		t.Fatal(err)
	}
	w := e.NewWorker()
	sent := 0
	send := func(p *l2.Port, frames [][]byte) {
		for _, f := range frames {
			if wire.Ethernet(f).Type() == 0x0800 {
				sent++
			}
		}
	}
	eth0, eth1 := e.Domain().Port("eth0"), e.Domain().Port("eth1")
	mac1 := e.Router().Iface("eth1").MAC
	for range 3 {
		w.Receive(eth1, [][]byte{udpFrame(t, mac1, "198.51.100.7", "10.1.2.3")})
		w.Flush(send)
	}
	reply := arpRequest(wire.MAC{2, 0, 0, 0, 0, 9}, [4]byte{192, 0, 2, 9}, [4]byte{192, 0, 2, 1})
	mac0 := e.Router().Iface("eth0").MAC
	copy(reply[0:6], mac0[:])
	binary.BigEndian.PutUint16(reply[20:], 2)
	copy(reply[32:38], mac0[:])
	w.Receive(eth0, [][]byte{reply})
	w.Flush(send)
	w.Receive(eth1, [][]byte{udpFrame(t, mac1, "198.51.100.7", "10.99.0.1")}) // 192.0.2.10 never answers
	w.Flush(send)
	for range 100 {
		clock.Advance(100 * time.Millisecond)
		w.Tick()
		w.Flush(send)
	}
	m := scrape(t, Source{Engine: e, Controller: c})
	for k, want := range map[string]float64{
		`netfwd_forwarded_total`:                              3,
		`netfwd_arp_queued_total`:                             4,
		`netfwd_arp_released_total`:                           3,
		`netfwd_arp_expired_total`:                            1,
		`netfwd_l3_drops_total{reason="neigh_failed"}`:        1,
		`netfwd_arp_drops_total{reason="bad_opcode"}`:         0,
		`netfwd_arp_drops_total{reason="martian_sender"}`:     0,
		`netfwd_l3_drops_total{reason="ip_checksum"}`:         0,
		`netfwd_l2_drops_total{reason="egress_filtered"}`:     0,
		`netfwd_neigh_lookups_total{result="miss"}`:           m[`netfwd_neigh_lookups_total{result="miss"}`],
		`netfwd_arp_drops_total{reason="bad_address_length"}`: 0,
	} {
		if got, ok := m[k]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, want)
		}
	}
	if sent != 3 {
		t.Errorf("%d packets sent, want 3", sent)
	}
	label := regexp.MustCompile(`(\w+)="([^"]*)"`)
	snake := regexp.MustCompile(`^[a-z0-9]+(_[a-z0-9]+)*$`)
	for k := range m {
		for _, l := range label.FindAllStringSubmatch(k, -1) {
			if l[1] == "reason" && !snake.MatchString(l[2]) {
				t.Errorf("%s: reason %q is not snake_case", k, l[2])
			}
		}
	}
}

// TestCollectorRouteSourceLag: each routing source's batch delays come out
// as a histogram labelled by source.
func TestCollectorRouteSourceLag(t *testing.T) {
	e := l3.NewEngine(l3.EngineOptions{Clock: l2.NewManualClock()})
	var f fpm.Stats
	var k kmirror.Stats
	f.C.Lag.Observe(3 * time.Millisecond)
	f.C.Lag.Observe(200 * time.Millisecond)
	k.C.Lag.Observe(20 * time.Second)
	m := scrape(t, Source{Engine: e, FPM: &f, Mirror: &k})
	for key, want := range map[string]float64{
		`netfwd_route_source_lag_seconds_count{source="fpm"}`:               2,
		`netfwd_route_source_lag_seconds_sum{source="fpm"}`:                 0.203,
		`netfwd_route_source_lag_seconds_bucket{source="fpm",le="0.005"}`:   1,
		`netfwd_route_source_lag_seconds_bucket{source="fpm",le="0.25"}`:    2,
		`netfwd_route_source_lag_seconds_bucket{source="kernel",le="10"}`:   0,
		`netfwd_route_source_lag_seconds_bucket{source="kernel",le="+Inf"}`: 1,
	} {
		if got, ok := m[key]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", key, got, ok, want)
		}
	}
}
