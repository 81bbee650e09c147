package pktio

import (
	"errors"
	"net"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// requireRoot skips tests that need namespaces when not root, unless
// NETFWD_E2E=1 says they must run (CI), in which case it fails.
func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("NETFWD_E2E") == "1" {
		t.Fatal("NETFWD_E2E=1 but not root: network namespace tests cannot run")
	}
	t.Skip("needs root for network namespaces and AF_PACKET (set NETFWD_E2E=1 to make this a failure)")
}

// newLab returns a lab removed when the test ends.
func newLab(t testing.TB) *Lab {
	t.Helper()
	requireRoot(t)
	l, err := NewLab()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("lab cleanup: %v", err)
		}
	})
	return l
}

// pair is two namespaces joined by one veth pair: a (in nsA) <-> b (in nsB).
type pair struct {
	lab      *Lab
	nsA, nsB string
	a, b     string
}

func newPair(t testing.TB) *pair {
	t.Helper()
	l := newLab(t)
	p := &pair{lab: l}
	var err error
	if p.nsA, err = l.AddNetns("A"); err != nil {
		t.Fatal(err)
	}
	if p.nsB, err = l.AddNetns("B"); err != nil {
		t.Fatal(err)
	}
	if p.a, p.b, err = l.AddVeth(p.nsA, "a", p.nsB, "b"); err != nil {
		t.Fatal(err)
	}
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
