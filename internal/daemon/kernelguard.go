package daemon

// The kernel input guard of a port (--host-path): pktio.DropKernelInput's
// tcx program, which keeps the box's own stack from answering on the port
// for the addresses its twin holds.
//
// Why the twin keeper holds it too: the guard is a bpf_link, gone when its
// last descriptor closes. Held by netfwd alone it went with the process,
// and from a kill -9 (or an exit) to the next start the kernel took the
// port's frames itself: a TCP segment of an in-band BGP session arrived on
// the port, not on the twin the session's socket is bound to (BIRD binds
// it to nf-eth0), found only the listener and was answered with a reset,
// which waited in the twin's queue and killed the session when the next
// netfwd sent it (TestCombinedBIRD, 1 in 3 to 1 in 15 kill -9 steps). So
// the host path hands the keeper a copy of every guard (hostpath.KeepAlso)
// whenever the set of guards changes: the guards last as long as the
// twins' carrier, and a port netfwd no longer has gets its kernel input
// back when the keeper is replaced.
//
// Locking: mu serialises closing the link with copying its descriptor (the
// host path's reconcile goroutine copies guards of a table that a retire
// may be closing).

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/cilium/ebpf/link"
	"github.com/netfwd/netfwd/internal/pktio"
	"golang.org/x/sys/unix"
)

// guardSeq numbers the guards of this process: a re-opened port's guard is
// another one.
var guardSeq atomic.Uint64

type kernelGuard struct {
	id uint64

	mu   sync.Mutex
	link link.Link // nil once closed; guarded by mu
}

// attachKernelGuard drops the kernel's own input on the interface.
func attachKernelGuard(ifindex int) (*kernelGuard, error) {
	l, err := pktio.DropKernelInput(ifindex)
	if err != nil {
		return nil, err
	}
	return &kernelGuard{id: guardSeq.Add(1), link: l}, nil
}

// key names the guard of port for the keeper.
func (g *kernelGuard) key(port string) string { return fmt.Sprintf("guard:%s#%d", port, g.id) }

// dup returns a new descriptor of the guard's link (close-on-exec), or an
// error once the guard is closed.
func (g *kernelGuard) dup() (*os.File, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.link == nil {
		return nil, os.ErrClosed
	}
	fl, ok := g.link.(interface{ FD() int })
	if !ok {
		return nil, fmt.Errorf("kernel input guard: %T has no descriptor", g.link)
	}
	fd, err := unix.FcntlInt(uintptr(fl.FD()), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("kernel input guard: dup: %w", err)
	}
	return os.NewFile(uintptr(fd), "kernel-input-guard"), nil
}

// Close lets go of netfwd's descriptor: the guard stays while a keeper
// holds a copy.
func (g *kernelGuard) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.link == nil {
		return nil
	}
	err := g.link.Close()
	g.link = nil
	return err
}
