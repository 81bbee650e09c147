package hostpath

// Punt and inject through a real kernel: frames punted into a twin are
// answered by the kernel and the answers reach the Inject callback; UDP
// reaches a socket bound on the twin's address (plain, tagged, with a
// partial checksum, as a GSO super-frame); rate limits and the queue drop
// and count; Punt does not allocate.

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/testenv"
	"github.com/netfwd/netfwd/wire"
)

var twinAddr = netip.MustParsePrefix("10.0.0.1/24")

func parse(f []byte) gopacket.Packet {
	return gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
}

func isARP(op uint16) func([]byte) bool {
	return func(f []byte) bool {
		a, ok := parse(f).Layer(layers.LayerTypeARP).(*layers.ARP)
		return ok && a.Operation == op
	}
}

func isEchoReply(f []byte) bool {
	i, ok := parse(f).Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	return ok && i.TypeCode.Type() == layers.ICMPv4TypeEchoReply
}

// TestPuntRoundTrip: an ARP request and an ICMP echo request punted into
// the twin are answered by the kernel, and the answers come out of the
// inject path addressed to the sender.
func TestPuntRoundTrip(t *testing.T) {
	tm := newTestManager(t, Options{KeepKernelARPReplies: true})
	tm.sync(t, Spec{Port: "eth1", MAC: testMAC, Addrs: []netip.Prefix{twinAddr}})
	tw := tm.Twin("eth1")

	if !tw.Punt(arpFrame(t, layers.ARPRequest, [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, peerMAC, 0, peerIP, routerIP, [6]byte{})) {
		t.Fatal("ARP request not punted")
	}
	reply := parse(tm.next(t, "ARP reply", isARP(layers.ARPReply)))
	e := reply.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	a := reply.Layer(layers.LayerTypeARP).(*layers.ARP)
	if !bytes.Equal(e.SrcMAC, testMAC[:]) || !bytes.Equal(e.DstMAC, peerMAC[:]) ||
		!bytes.Equal(a.SourceHwAddress, testMAC[:]) || !bytes.Equal(a.SourceProtAddress, routerIP.AsSlice()) ||
		!bytes.Equal(a.DstProtAddress, peerIP.AsSlice()) {
		t.Fatalf("ARP reply %v", reply)
	}

	if !tw.Punt(echoFrame(t, testMAC, peerMAC, peerIP, routerIP, 77, 5)) {
		t.Fatal("echo request not punted")
	}
	echo := parse(tm.next(t, "echo reply", isEchoReply))
	e = echo.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	ip4 := echo.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	icmp := echo.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	if !bytes.Equal(e.DstMAC, peerMAC[:]) || !bytes.Equal(e.SrcMAC, testMAC[:]) || !ip4.DstIP.Equal(peerIP.AsSlice()) ||
		!ip4.SrcIP.Equal(routerIP.AsSlice()) || icmp.Id != 77 || icmp.Seq != 5 || !bytes.Equal(icmp.Payload, []byte("hostpath echo")) {
		t.Fatalf("echo reply %v", echo)
	}
	s := waitStats(t, tw, func(s Stats) bool { return s.Punted == 2 && s.Injected >= 2 })
	if s.InjectFiltered != 0 || s.PuntDrops != 0 || s.PuntErrors != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestKernelARPRepliesFiltered: by default the kernel's ARP replies are
// dropped on the way out (netfwd answers ARP) and counted, while the kernel
// still learns the requester, so its echo reply goes out without an ARP
// exchange of its own.
func TestKernelARPRepliesFiltered(t *testing.T) {
	tm := newTestManager(t, Options{})
	tm.sync(t, Spec{Port: "eth1", MAC: testMAC, Addrs: []netip.Prefix{twinAddr}, DisableIPv6: true})
	tw := tm.Twin("eth1")
	tw.Punt(arpFrame(t, layers.ARPRequest, [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, peerMAC, 0, peerIP, routerIP, [6]byte{}))
	waitStats(t, tw, func(s Stats) bool { return s.InjectFiltered > 0 })
	if out := testenv.Run(t, "ip", "-n", tm.ns, "neigh", "show", "dev", "nf-eth1"); !strings.Contains(out, peerIP.String()+" lladdr "+macString(peerMAC)) {
		t.Fatalf("the kernel did not learn the requester:\n%s", out)
	}
	tw.Punt(echoFrame(t, testMAC, peerMAC, peerIP, routerIP, 1, 1))
	tm.next(t, "echo reply", isEchoReply)
	select {
	case f := <-tm.frames:
		t.Fatalf("unexpected frame from the kernel: %v", parse(f))
	default:
	}
	if s := waitStats(t, tw, func(s Stats) bool { return s.Injected > 0 }); s.Injected != 1 || s.InjectFiltered != 1 {
		t.Fatalf("stats %+v: want 1 injected (the echo reply), 1 filtered", s)
	}
}

// listenUDP binds a UDP socket in the twins' namespace.
func listenUDP(t *testing.T, ns, addr string) *net.UDPConn {
	t.Helper()
	var c net.PacketConn
	err := pktio.InNetns(ns, func() error {
		var err error
		c, err = net.ListenPacket("udp4", addr)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.UDPConn)
}

func readUDP(t *testing.T, c *net.UDPConn, what string) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2048)
	n, from, err := c.ReadFromUDP(buf)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !from.IP.Equal(peerIP.AsSlice()) {
		t.Fatalf("%s: from %v", what, from)
	}
	return buf[:n]
}

// TestPuntUDPToSocket: UDP punted into the twin reaches a kernel socket
// bound on the twin's address: a plain frame, a tagged frame through
// PuntPacket (the tag is removed), a frame with a partial checksum and a
// UDP GSO super-frame (the kernel cuts it into datagrams).
func TestPuntUDPToSocket(t *testing.T) {
	tm := newTestManager(t, Options{})
	tm.sync(t, Spec{Port: "vlan7", MAC: testMAC, Addrs: []netip.Prefix{twinAddr}, DisableIPv6: true})
	tw := tm.Twin("vlan7")
	c := listenUDP(t, tm.ns, "10.0.0.1:5000")

	if !tw.Punt(udpFrame(t, testMAC, peerMAC, 0, peerIP, routerIP, 4000, 5000, []byte("plain"))) {
		t.Fatal("plain punt refused")
	}
	if got := readUDP(t, c, "plain"); string(got) != "plain" {
		t.Fatalf("plain: got %q", got)
	}

	tagged := udpFrame(t, testMAC, peerMAC, 7, peerIP, routerIP, 4000, 5000, []byte("tagged"))
	if !tw.PuntPacket(tagged, 18, pktio.Offload{}) {
		t.Fatal("tagged punt refused")
	}
	if got := readUDP(t, c, "tagged"); string(got) != "tagged" {
		t.Fatalf("tagged: got %q", got)
	}

	// Partial checksum: the field holds the pseudo-header sum only.
	part := partialAt(udpFrame(t, testMAC, peerMAC, 7, peerIP, routerIP, 4000, 5000, []byte("partial checksum")), 18)
	if !tw.PuntPacket(part, 18, pktio.Offload{NeedsCsum: true, L4Off: 20, CsumOffset: 6}) {
		t.Fatal("partial-checksum punt refused")
	}
	if got := readUDP(t, c, "partial checksum"); string(got) != "partial checksum" {
		t.Fatalf("partial checksum: got %q", got)
	}

	// A UDP GSO super-frame of 3 x 100 bytes.
	payload := bytes.Repeat([]byte("0123456789"), 30)
	gso := partialAt(udpFrame(t, testMAC, peerMAC, 0, peerIP, routerIP, 4000, 5000, payload), 14)
	if !tw.PuntPacket(gso, 14, pktio.Offload{GSOType: pktio.GSOUDPL4, GSOSize: 100, NeedsCsum: true, L4Off: 20, CsumOffset: 6}) {
		t.Fatal("GSO punt refused")
	}
	for i := range 3 {
		if got := readUDP(t, c, "GSO segment"); !bytes.Equal(got, payload[i*100:(i+1)*100]) {
			t.Fatalf("GSO segment %d: got %q", i, got)
		}
	}
	// The writer counts after write(2) returns, which may be after the
	// socket has the data.
	s := waitStats(t, tw, func(s Stats) bool { return s.Punted == 4 })
	if s.PuntErrors != 0 || s.PuntDrops != 0 || s.RateLimitedTotal() != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// partialAt replaces the UDP checksum of a frame whose IPv4 header (20
// bytes) is at l3 with the pseudo-header sum.
func partialAt(frame []byte, l3 int) []byte {
	f := bytes.Clone(frame)
	l4 := l3 + 20
	var pseudo [12]byte
	copy(pseudo[:8], f[l3+12:l3+20])
	pseudo[9] = wire.ProtoUDP
	copy(pseudo[10:], f[l4+4:l4+6]) // UDP length
	binary.BigEndian.PutUint16(f[l4+6:], wire.Fold(wire.Sum(0, pseudo[:])))
	return f
}

// TestPuntRateLimited: a class limited to a burst of 5 at 1/s lets 5 of a
// quick run of 40 through (6 if a second passes), counts the rest in its
// class, and the socket gets exactly what was let through.
func TestPuntRateLimited(t *testing.T) {
	tm := newTestManager(t, Options{})
	tm.sync(t, Spec{Port: "eth1", MAC: testMAC, Addrs: []netip.Prefix{twinAddr}, DisableIPv6: true,
		Limits: Limits{ClassOther: {Rate: 1, Burst: 5}}})
	tw := tm.Twin("eth1")
	c := listenUDP(t, tm.ns, "10.0.0.1:5001")
	allowed := 0
	for i := range 40 {
		if tw.Punt(udpFrame(t, testMAC, peerMAC, 0, peerIP, routerIP, 4000, 5001, []byte{byte(i)})) {
			allowed++
		}
	}
	// A routing-class frame is not affected by the other class's limit.
	if !tw.Punt(udpFrame(t, testMAC, peerMAC, 0, peerIP, routerIP, 49152, 3784, []byte("bfd"))) {
		t.Fatal("BFD refused by the other class's limit")
	}
	if allowed != 5 && allowed != 6 {
		t.Fatalf("%d of 40 let through, want the burst of 5", allowed)
	}
	for range allowed {
		readUDP(t, c, "rate-limited stream")
	}
	s := tw.Stats()
	if s.RateLimited[ClassOther] != uint64(40-allowed) || s.RateLimited[ClassRouting] != 0 || s.RateLimited[ClassNeigh] != 0 {
		t.Fatalf("rate limited %v, want %d in class other", s.RateLimited, 40-allowed)
	}
	if l := tw.Limits(); l[ClassOther] != (Limit{Rate: 1, Burst: 5}) || l[ClassRouting] != DefaultLimits[ClassRouting] {
		t.Fatalf("limits in force %v", l)
	}
}

// TestPuntAllocs: Punt on a live twin allocates nothing (the frames go all
// the way into the kernel meanwhile).
func TestPuntAllocs(t *testing.T) {
	tm := newTestManager(t, Options{})
	tm.sync(t, Spec{Port: "eth1", MAC: testMAC, Addrs: []netip.Prefix{twinAddr}, DisableIPv6: true,
		Limits: Limits{NoLimit, NoLimit, NoLimit}})
	tw := tm.Twin("eth1")
	f := udpFrame(t, testMAC, peerMAC, 0, peerIP, routerIP, 4000, 9, []byte("discard"))
	tagged := udpFrame(t, testMAC, peerMAC, 7, peerIP, routerIP, 4000, 9, []byte("discard"))
	if a := testing.AllocsPerRun(2000, func() { tw.Punt(f) }); a != 0 {
		t.Fatalf("Punt allocates %v per frame", a)
	}
	if a := testing.AllocsPerRun(2000, func() { tw.PuntPacket(tagged, 18, pktio.Offload{}) }); a != 0 {
		t.Fatalf("PuntPacket allocates %v per frame", a)
	}
	waitStats(t, tw, func(s Stats) bool { return s.Punted > 0 })
}

// waitStats waits (bounded) until the twin's counters satisfy ok.
func waitStats(t *testing.T, tw *Twin, ok func(Stats) bool) Stats {
	t.Helper()
	for range 250 {
		if s := tw.Stats(); ok(s) {
			return s
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("counters never got there: %+v", tw.Stats())
	return Stats{}
}
