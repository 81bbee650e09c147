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
// Early guards: a port whose interface is re-created (deleted, then one of
// the same name appears) is re-opened only once the new interface is up
// (linkevents.go), and opening its sockets takes a while (an RCU grace
// period each). In between, the new interface was up without a guard, and
// the box's stack answered the peer's ARP requests for the twin's address
// with the new interface's own MAC, which is not the router's MAC: the
// peer sent its frames there, netfwd dropped them (not_for_us) until the
// peer's entry was replaced, 6 s later, or never within the combined
// test's 10 s (`TestCombinedBIRD`, routed port re-created, 1 in 3-6 runs;
// seen in a capture). So the guard of a port's new interface is attached
// as soon as the interface appears (earlyGuard, from the link monitor),
// still down, and the port takes it when it opens (takeEarlyGuard); a
// port's own guard is attached before its sockets, not after.
//
// Locking: mu serialises closing the link with copying its descriptor (the
// host path's reconcile goroutine copies guards of a table that a retire
// may be closing). Daemon.earlyMu guards Daemon.earlyGuards.

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
	id      uint64
	ifindex int

	mu   sync.Mutex
	link link.Link // nil once closed; guarded by mu
}

// attachKernelGuard drops the kernel's own input on the interface.
func attachKernelGuard(ifindex int) (*kernelGuard, error) {
	l, err := pktio.DropKernelInput(ifindex)
	if err != nil {
		return nil, err
	}
	return &kernelGuard{id: guardSeq.Add(1), ifindex: ifindex, link: l}, nil
}

// earlyGuard attaches the guard of port name's new interface ifindex
// before the port is opened on it (with a host path; a failure is logged,
// the port's open tries again). A guard of an older interface of the name
// is closed.
func (d *Daemon) earlyGuard(name string, ifindex int) {
	if !d.opts.HostPath || d.stopping.Load() {
		return
	}
	d.earlyMu.Lock()
	defer d.earlyMu.Unlock()
	if g := d.earlyGuards[name]; g != nil {
		if g.ifindex == ifindex {
			return
		}
		g.Close()
		delete(d.earlyGuards, name)
	}
	var g *kernelGuard
	err := pktio.InNetns(d.opts.Netns, func() (err error) {
		g, err = attachKernelGuard(ifindex)
		return err
	})
	if err != nil {
		d.log.Warn("kernel input guard of a new interface", "dev", name, "err", err)
		return
	}
	if d.earlyGuards == nil {
		d.earlyGuards = map[string]*kernelGuard{}
	}
	d.earlyGuards[name] = g
}

// takeEarlyGuard hands over the early guard of port name if it is the one
// of interface ifindex (nil otherwise; one of another interface is closed).
func (d *Daemon) takeEarlyGuard(name string, ifindex int) *kernelGuard {
	d.earlyMu.Lock()
	defer d.earlyMu.Unlock()
	g := d.earlyGuards[name]
	if g == nil {
		return nil
	}
	delete(d.earlyGuards, name)
	if g.ifindex != ifindex {
		g.Close()
		return nil
	}
	return g
}

// closeEarlyGuards closes the guards no port took (at the daemon's end).
func (d *Daemon) closeEarlyGuards() {
	d.earlyMu.Lock()
	defer d.earlyMu.Unlock()
	for name, g := range d.earlyGuards {
		g.Close()
		delete(d.earlyGuards, name)
	}
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
