package pktio

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/testenv"
	"github.com/netfwd/netfwd/wire"
)

// netns creates a network namespace for the test (removed when it ends),
// with IPv6 off so that no router solicitations or MLD reports muddle the
// frame counts. It skips without root (fails under NETFWD_E2E=1).
func netns(t testing.TB, prefix string) string {
	t.Helper()
	testenv.RequireRoot(t)
	ns := testenv.Netns(t, prefix)
	err := InNetns(ns, func() error {
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

// ipIn runs `ip -n ns ARGS...` and fails the test if it fails.
func ipIn(t testing.TB, ns string, args ...string) {
	t.Helper()
	testenv.Run(t, "ip", append([]string{"-n", ns}, args...)...)
}

// addVeth creates the veth pair a (in nsA) - b (in nsB), both up, with
// extra `ip link add` arguments (numrxqueues N ...) for both ends.
func addVeth(t testing.TB, nsA, a, nsB, b string, extra ...string) {
	t.Helper()
	args := append([]string{"link", "add", "name", a}, extra...)
	args = append(args, "type", "veth", "peer", "name", b)
	args = append(args, extra...)
	ipIn(t, nsA, append(args, "netns", nsB)...)
	ipIn(t, nsA, "link", "set", "dev", a, "up")
	ipIn(t, nsB, "link", "set", "dev", b, "up")
}

// pair is two namespaces joined by one veth pair: a (in nsA) <-> b (in nsB).
type pair struct {
	nsA, nsB string
	a, b     string
}

func newPair(t testing.TB, extra ...string) *pair {
	t.Helper()
	p := &pair{nsA: netns(t, "pkA"), nsB: netns(t, "pkB"), a: "a", b: "b"}
	addVeth(t, p.nsA, p.a, p.nsB, p.b, extra...)
	return p
}

// openIn opens a Port inside namespace ns; it is closed when the test ends
// (after the test's goroutines, which must stop on Shutdown).
func openIn(t testing.TB, ns, iface string, cfg Config) *Port {
	t.Helper()
	var p *Port
	err := InNetns(ns, func() error {
		var err error
		p, err = Open(iface, cfg)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown(); p.Close() })
	return p
}

// macIn returns the MAC address of iface in ns.
func macIn(t testing.TB, ns, iface string) net.HardwareAddr {
	t.Helper()
	var mac net.HardwareAddr
	err := InNetns(ns, func() error {
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		mac = ifi.HardwareAddr
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return mac
}

// forwarder moves frames from one queue to a Tx until shutdown: the
// trivial L2 forwarder of the tests and benchmarks. Each worker is locked
// to its OS thread so the thread's CPU time (softirq work done in its
// context included) measures what forwarding costs.
type forwarder struct {
	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error         // guarded by mu
	cpu    time.Duration // guarded by mu
	frames uint64        // guarded by mu
}

func (f *forwarder) start(from *Queue, to *Tx, batch int) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		c0 := threadCPU()
		n0 := to.Stats().Packets
		err := forward(from, to, batch)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.cpu += threadCPU() - c0
		f.frames += to.Stats().Packets - n0
		if err != nil && !errors.Is(err, ErrClosed) {
			f.err = errors.Join(f.err, err)
		}
	}()
}

func (f *forwarder) wait() error {
	f.wg.Wait()
	return f.err
}

// cpuPerFrame is the workers' CPU time per forwarded frame.
func (f *forwarder) cpuPerFrame() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frames == 0 {
		return 0
	}
	return f.cpu / time.Duration(f.frames)
}

func threadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// forward is the per-worker loop: receive a batch, pass it on with its
// offload state.
func forward(from *Queue, to *Tx, batch int) error {
	frames := make([][]byte, batch)
	meta := make([]Meta, batch)
	offl := make([]Offload, batch)
	h := from.Headroom()
	for {
		n, err := from.Recv(frames, meta)
		if err != nil {
			return err
		}
		for i := range n {
			frames[i] = frames[i][h:]
			offl[i] = meta[i].Offload
		}
		if _, err := to.Send(frames[:n], offl[:n]); err != nil {
			return err
		}
	}
}

// udpSender sends IPv4 UDP frames of flows source ports from a Port's Tx
// in another namespace: the tests' traffic generator. It sends through the
// qdisc layer, so that a multi-queue device picks the TX queue (and veth
// the peer's RX queue) by flow hash; with qdisc bypass AF_PACKET picks it
// by the sender's CPU.
type udpSender struct {
	tx     *Tx
	frames [][]byte
}

func newUDPSender(t testing.TB, ns, iface string, dst net.HardwareAddr, flows int) *udpSender {
	t.Helper()
	p := openIn(t, ns, iface, Config{NotPromiscuous: true, Filter: dropAll, NoQdiscBypass: true})
	tx, err := p.NewTx()
	if err != nil {
		t.Fatal(err)
	}
	s := &udpSender{tx: tx}
	for i := range 256 {
		s.frames = append(s.frames, udpFrame(dst, p.MAC, uint16(1000+i%flows), 60))
	}
	return s
}

// send transmits n frames, the flows round robin.
func (s *udpSender) send(t testing.TB, n int) {
	t.Helper()
	for n > 0 {
		k := min(n, len(s.frames))
		if m, err := s.tx.Send(s.frames[:k], nil); m != k || err != nil {
			t.Fatalf("sent %d of %d: %v", m, k, err)
		}
		n -= k
	}
}

// udpFrame builds an IPv4 UDP frame 10.1.0.1:sport -> 10.2.0.1:9 of size
// bytes (without FCS), header checksum valid, UDP checksum 0.
func udpFrame(dst, src net.HardwareAddr, sport uint16, size int) []byte {
	f := make([]byte, size)
	copy(f, dst)
	copy(f[6:], src)
	binary.BigEndian.PutUint16(f[12:], wire.EtherTypeIPv4)
	ip := f[ethHdrLen:]
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
