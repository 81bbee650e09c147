package afpacket

import (
	"errors"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/pktio/pktiotest"
)

// openIn opens a Port inside namespace ns; it is closed when the test ends
// (after the test's goroutines, which must stop on Shutdown).
func openIn(t testing.TB, ns, iface string, cfg Config) *Port {
	t.Helper()
	var p *Port
	err := pktio.InNetns(ns, func() error {
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
		if err != nil && !errors.Is(err, pktio.ErrClosed) {
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
	meta := make([]pktio.Meta, batch)
	offl := make([]pktio.Offload, batch)
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

// newUDPSender opens a Tx on iface in ns for a pktiotest.UDPSender. It
// sends through the qdisc layer, so that a multi-queue device picks the TX
// queue (and veth the peer's RX queue) by flow hash; with qdisc bypass
// AF_PACKET picks it by the sender's CPU.
func newUDPSender(t testing.TB, ns, iface string, dst net.HardwareAddr, flows int) *pktiotest.UDPSender {
	t.Helper()
	p := openIn(t, ns, iface, Config{NotPromiscuous: true, Filter: dropAll, NoQdiscBypass: true})
	tx, err := p.NewTx()
	if err != nil {
		t.Fatal(err)
	}
	return pktiotest.NewUDPSender(tx, dst, p.MAC, flows)
}
