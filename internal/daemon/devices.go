package daemon

// Devices: which names the configuration may make ports. Under `netfwd
// run` a port is a real interface of the daemon's namespace (bridges and
// VLAN interfaces are the config's own, `link add`); a line naming
// anything else is refused with iproute2's `Cannot find device "X"`, in
// the config file at start and at reload (FILE:LINE) and on the control
// socket (ctl:N) alike. The check itself is apply's (SetDeviceCheck, where
// a batch declares its new ports); the daemon gives it the namespace's
// interfaces. A port whose interface was deleted stays a port (it is
// re-opened when the interface returns: linkevents.go), so the engine's
// ports pass too.
//
// Locking: none of its own; reads the engine's domain (its lock) and the
// kernel.

import (
	"net"

	"github.com/netfwd/netfwd/internal/pktio"
)

// deviceCheck returns the device check of a daemon whose ports live in
// netns: an interface of that name exists there, or ports (nil: none yet,
// at start) says the engine already has the port.
func deviceCheck(netns string, ports func(name string) bool) func(name string) bool {
	return func(name string) bool {
		if ports != nil && ports(name) {
			return true
		}
		return kernelHas(netns, name)
	}
}

// kernelHas reports whether an interface named name exists in netns.
func kernelHas(netns, name string) bool {
	found := false
	pktio.InNetns(netns, func() error {
		_, err := net.InterfaceByName(name)
		found = err == nil
		return nil
	})
	return found
}

// hasPort reports whether the engine has a port named name.
func (d *Daemon) hasPort(name string) bool { return d.e.Domain().Port(name) != nil }
