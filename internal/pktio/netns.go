package pktio

// netns: running code in another network namespace. Sockets belong to the
// namespace they were created in, so a Port, Blaster or Sink opened inside
// InNetns keeps working from any goroutine afterwards.
//
// Locking: none. The function runs on a fresh goroutine locked to its OS
// thread; if the thread cannot be switched back it is left locked, so the Go
// runtime retires it with the goroutine instead of reusing a thread in the
// wrong namespace.

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// NetnsPath is where `ip netns add NAME` puts the namespace NAME.
func NetnsPath(name string) string { return "/var/run/netns/" + name }

// InNetns runs fn in the network namespace named name (as created by
// `ip netns add`); name "" runs it in the current one.
func InNetns(name string, fn func() error) error {
	if name == "" {
		return fn()
	}
	target, err := os.Open(NetnsPath(name))
	if err != nil {
		return fmt.Errorf("pktio: netns %q: %w", name, err)
	}
	defer target.Close()
	return InNetnsFile(target, name, fn)
}

// CurrentNetns opens the network namespace of the calling thread (the one
// sockets created now would belong to).
func CurrentNetns() (*os.File, error) {
	return os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
}

// InNetnsFile runs fn on a thread switched into the namespace target.
func InNetnsFile(target *os.File, name string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := CurrentNetns()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("pktio: current netns: %w", err)
			return
		}
		defer orig.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("pktio: setns %q: %w", name, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// Stay locked: the thread dies with this goroutine.
			errc <- fmt.Errorf("pktio: back from netns %q: %w", name, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}
