// Package pktiotest is the test bench of the packet I/O packages (pktio,
// pktio/afpacket, pktio/afxdp): namespaces joined by veth pairs, frames to
// send and a reference checksum. Only their tests import it.
//
// Locking: none; each helper runs on the test's goroutine.
package pktiotest

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"os"
	"testing"
	"time"

	"github.com/mdlayher/packet"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/testenv"
	"github.com/netfwd/netfwd/wire"
)

// Netns creates a network namespace for the test (removed when it ends),
// with IPv6 off so that no router solicitations or MLD reports muddle the
// frame counts. It skips without root (fails under NETFWD_E2E=1).
func Netns(t testing.TB, prefix string) string {
	t.Helper()
	testenv.RequireRoot(t)
	ns := testenv.Netns(t, prefix)
	err := pktio.InNetns(ns, func() error {
		for _, k := range []string{"all", "default"} {
			if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+k+"/disable_ipv6", []byte("1"), 0o644); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// IP runs `ip -n ns ARGS...` and fails the test if it fails.
func IP(t testing.TB, ns string, args ...string) {
	t.Helper()
	testenv.Run(t, "ip", append([]string{"-n", ns}, args...)...)
}

// AddVeth creates the veth pair a (in nsA) - b (in nsB), both up, with
// extra `ip link add` arguments (numrxqueues N ...) for both ends.
func AddVeth(t testing.TB, nsA, a, nsB, b string, extra ...string) {
	t.Helper()
	args := append([]string{"link", "add", "name", a}, extra...)
	args = append(args, "type", "veth", "peer", "name", b)
	args = append(args, extra...)
	IP(t, nsA, append(args, "netns", nsB)...)
	IP(t, nsA, "link", "set", "dev", a, "up")
	IP(t, nsB, "link", "set", "dev", b, "up")
}

// Pair is two namespaces joined by one veth pair: A (in NsA) <-> B (in NsB).
type Pair struct {
	NsA, NsB string
	A, B     string
}

// NewPair creates a Pair for the test.
func NewPair(t testing.TB, extra ...string) *Pair {
	t.Helper()
	p := &Pair{NsA: Netns(t, "pkA"), NsB: Netns(t, "pkB"), A: "a", B: "b"}
	AddVeth(t, p.NsA, p.A, p.NsB, p.B, extra...)
	return p
}

// Do runs fn in namespace ns and fails the test if it fails.
func Do(t testing.TB, ns string, fn func() error) {
	t.Helper()
	if err := pktio.InNetns(ns, fn); err != nil {
		t.Fatal(err)
	}
}

// MAC returns the MAC address of iface in ns.
func MAC(t testing.TB, ns, iface string) net.HardwareAddr {
	t.Helper()
	var mac net.HardwareAddr
	Do(t, ns, func() error {
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		mac = ifi.HardwareAddr
		return nil
	})
	return mac
}

// UDPFrame builds an IPv4 UDP frame 10.1.0.1:sport -> 10.2.0.1:9 of size
// bytes (without FCS), header checksum valid, UDP checksum 0.
func UDPFrame(dst, src net.HardwareAddr, sport uint16, size int) []byte {
	f := make([]byte, size)
	copy(f, dst)
	copy(f[6:], src)
	binary.BigEndian.PutUint16(f[12:], wire.EtherTypeIPv4)
	ip := f[wire.EthernetHeaderLen:]
	ip[0], ip[8], ip[9] = 0x45, 64, wire.ProtoUDP
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
	copy(ip[12:], []byte{10, 1, 0, 1, 10, 2, 0, 1})
	binary.BigEndian.PutUint16(ip[10:], wire.Checksum(ip[:wire.IPv4MinHeaderLen]))
	udp := ip[wire.IPv4MinHeaderLen:]
	binary.BigEndian.PutUint16(udp[0:], sport)
	binary.BigEndian.PutUint16(udp[2:], 9)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	return f
}

// RefSum is the obviously correct ones' complement sum of 16-bit words.
func RefSum(b []byte) uint32 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return s
}

// RefL4Valid checks the TCP/UDP checksum of an IPv4 frame (tagged or not)
// the slow way.
func RefL4Valid(t testing.TB, f []byte) bool {
	t.Helper()
	l3, ok := pktio.L3Offset(f)
	if !ok || len(f) < l3+wire.IPv4MinHeaderLen || f[l3]>>4 != 4 {
		t.Fatalf("not IPv4: %x", f)
	}
	ip := f[l3:]
	ihl := int(ip[0]&15) * 4
	total := int(binary.BigEndian.Uint16(ip[2:]))
	l4 := ip[ihl:total]
	pseudo := append(append([]byte{}, ip[12:20]...), 0, ip[9], byte(len(l4)>>8), byte(len(l4)))
	return RefSum(append(pseudo, l4...)) == 0xffff
}

// RandomIPv4L4 builds a random IPv4 TCP or UDP frame, optionally tagged.
func RandomIPv4L4(rng *rand.Rand) []byte {
	proto := []byte{wire.ProtoTCP, wire.ProtoUDP}[rng.IntN(2)]
	hdr := 8
	if proto == wire.ProtoTCP {
		hdr = 20
	}
	payload := rng.IntN(1400)
	var f []byte
	f = append(f, make([]byte, 12)...)
	for range rng.IntN(3) {
		f = binary.BigEndian.AppendUint32(f, uint32(wire.EtherTypeVLAN)<<16|uint32(rng.IntN(4096)))
	}
	f = binary.BigEndian.AppendUint16(f, wire.EtherTypeIPv4)
	ip := make([]byte, 20+hdr+payload)
	for i := range ip {
		ip[i] = byte(rng.Uint32())
	}
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
	binary.BigEndian.PutUint16(ip[6:], 0x4000)
	ip[9] = proto
	if proto == wire.ProtoUDP {
		binary.BigEndian.PutUint16(ip[24:], uint16(hdr+payload))
	}
	return append(f, ip...)
}

// RawSender opens a plain packet socket on iface in ns for injecting frames.
func RawSender(t testing.TB, ns, iface string) *packet.Conn {
	t.Helper()
	var c *packet.Conn
	err := pktio.InNetns(ns, func() error {
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		c, err = packet.Listen(ifi, packet.Raw, 0, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Send injects frames through c.
func Send(t testing.TB, c *packet.Conn, frames ...[]byte) {
	t.Helper()
	for _, f := range frames {
		if _, err := c.WriteTo(f, &packet.Addr{HardwareAddr: f[0:6]}); err != nil {
			t.Fatalf("inject %d bytes: %v", len(f), err)
		}
	}
}

// RecvN receives until want frames arrived (copies) or the deadline.
func RecvN(t testing.TB, q pktio.Receiver, want int, d time.Duration) ([][]byte, []pktio.Meta) {
	t.Helper()
	var got [][]byte
	var metas []pktio.Meta
	frames := make([][]byte, 64)
	meta := make([]pktio.Meta, 64)
	deadline := time.Now().Add(d)
	for len(got) < want && time.Now().Before(deadline) {
		n, err := q.TryRecv(frames, meta)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			time.Sleep(time.Millisecond)
			continue
		}
		for i := range n {
			got = append(got, bytes.Clone(frames[i][q.Headroom():]))
			metas = append(metas, meta[i])
		}
	}
	return got, metas
}

// Frame builds an Ethernet frame of length n with a private ethertype
// and a random payload.
func Frame(rng *rand.Rand, dst, src net.HardwareAddr, n int) []byte {
	f := make([]byte, n)
	copy(f, dst)
	copy(f[6:], src)
	binary.BigEndian.PutUint16(f[12:], 0x88b5)
	for i := 14; i < n; i++ {
		f[i] = byte(rng.Uint32())
	}
	return f
}

// UDPSender sends IPv4 UDP frames of flows source ports through a Sender
// (a Port's Tx in another namespace): the tests' traffic generator.
type UDPSender struct {
	tx     pktio.Sender
	frames [][]byte
}

// NewUDPSender builds the frames from src to dst, flows source ports.
func NewUDPSender(tx pktio.Sender, dst, src net.HardwareAddr, flows int) *UDPSender {
	s := &UDPSender{tx: tx}
	for i := range 256 {
		s.frames = append(s.frames, UDPFrame(dst, src, uint16(1000+i%flows), 60))
	}
	return s
}

// Send transmits n frames, the flows round robin.
func (s *UDPSender) Send(t testing.TB, n int) {
	t.Helper()
	for n > 0 {
		k := min(n, len(s.frames))
		if m, err := s.tx.Send(s.frames[:k], nil); m != k || err != nil {
			t.Fatalf("sent %d of %d: %v", m, k, err)
		}
		n -= k
	}
}
