package daemon

// Admin state in the kernel: netfwd owns its ports, so their interfaces are
// up (IFF_UP) or down as the configuration says, as `ip link set DEV
// up|down` would make them: every port at start, before it is opened (the
// daemon refuses to start, naming the port, when the kernel refuses), at
// reload the new ports before they are opened and every port after the
// apply, a port re-opened after its interface came back, and from the
// control socket the ports a batch's `link set DEV up|down` lines name (and
// the ports it opens). Each change is logged per port. The router's view then follows the carrier the link
// monitor reports (linkevents.go): an interface the kernel has down has no
// carrier, so its routes fail over and its frames stop both ways.
//
// The loopback interface: a listener the daemon opens (metrics, pprof,
// FPM) is reached from its own box through lo, which a fresh namespace has
// down (a bind to 127.0.0.1 succeeds there and nothing ever connects), so
// the daemon brings lo up in the namespace of each TCP listener before it
// opens it (logged), or refuses to start naming why it could not.
//
// Locking: none of its own; called with no daemon lock held (reads the
// controller under its lock).

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/netfwd/netfwd/internal/pktio"
	"golang.org/x/sys/unix"
)

// carrierWait bounds the wait for the carrier of interfaces the daemon
// brought up before it opens them (a veth has it within milliseconds).
const carrierWait = time.Second

// raiseLinks sets the kernel admin state of the interfaces that are about
// to be opened as ports (not open yet) as the configuration says (down:
// the ones it sets down), before they are opened (New, Reload): the port
// is then opened with its carrier, and the config applied with it (a route
// through a port without carrier is refused). It waits up to carrierWait
// for the carrier of those it brought up.
func (d *Daemon) raiseLinks(names []string, down map[string]bool) error {
	open := d.ports.Load()
	var raised []string
	for _, n := range names {
		if open.byName(n) != nil {
			continue // pushLinkStates, after the apply
		}
		changed, err := d.setLinkUp(n, !down[n])
		if err != nil {
			return err
		}
		if changed && !down[n] {
			raised = append(raised, n)
		}
	}
	deadline := time.Now().Add(carrierWait)
	for _, n := range raised {
		for !kernelRunning(d.opts.Netns, n) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
}

// pushLinkStates sets the kernel admin state of open ports to the
// configuration's.
func (d *Daemon) pushLinkStates(ports []*port) error {
	var errs []error
	for _, p := range ports {
		if _, err := d.setLinkUp(p.name, !d.ctl.AdminDown(p.name)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// setLinkUp sets one port's interface up or down and logs a change.
func (d *Daemon) setLinkUp(name string, up bool) (changed bool, err error) {
	err = pktio.InNetns(d.opts.Netns, func() (err error) {
		changed, err = setKernelUp(name, up)
		return err
	})
	switch {
	case err != nil:
		return false, fmt.Errorf("%s: setting the interface %s: %w", name, upDown(up), err)
	case changed && up:
		d.log.Info("port interface brought up", "dev", name)
	case changed:
		d.log.Info("port interface set down", "dev", name)
	}
	return changed, nil
}

// kernelRunning reports whether an interface of netns is up with carrier.
func kernelRunning(netns, name string) bool {
	running := false
	pktio.InNetns(netns, func() error {
		ifi, err := net.InterfaceByName(name)
		running = err == nil && ifi.Flags&net.FlagRunning != 0
		return nil
	})
	return running
}

// loopbackUp brings lo up in netns ("" = the caller's) for a listener.
func (d *Daemon) loopbackUp(netns, listener string) error {
	var changed bool
	err := pktio.InNetns(netns, func() (err error) {
		changed, err = setKernelUp("lo", true)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: bringing lo up (the box reaches the listener through it): %w", listener, err)
	}
	if changed {
		d.log.Info("brought lo up for a listener", "listener", listener, "netns", netns)
	}
	return nil
}

func upDown(up bool) string {
	if up {
		return "up"
	}
	return "down"
}

// setKernelUp is `ip link set NAME up|down` in the calling thread's
// namespace; changed says whether the interface was in the other state.
func setKernelUp(name string, up bool) (changed bool, err error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return false, err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return false, fmt.Errorf("SIOCGIFFLAGS: %w", err)
	}
	// The flags read back are the user-set ones (dev_get_flags): writing
	// them back changes nothing else (promiscuity of the packet sockets
	// included).
	flags := ifr.Uint16()
	if (flags&unix.IFF_UP != 0) == up {
		return false, nil
	}
	if up {
		flags |= unix.IFF_UP
	} else {
		flags &^= unix.IFF_UP
	}
	ifr.SetUint16(flags)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return false, fmt.Errorf("SIOCSIFFLAGS: %w", err)
	}
	return true, nil
}
