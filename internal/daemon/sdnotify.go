package daemon

// systemd's readiness protocol (sd_notify(3)), without libsystemd: one
// datagram to $NOTIFY_SOCKET per state change. READY=1 when the daemon
// forwards; after a hot restart also MAINPID=, so that systemd follows
// the new process (the unit needs NotifyAccess=all: the message comes
// from a process systemd did not start as the main one); STOPPING=1 on a
// shutdown that is not a handover. Without $NOTIFY_SOCKET nothing is sent.
//
// Locking: none (one datagram per call).

import (
	"net"
	"os"
	"strings"
)

// sdNotify sends state to systemd; errors are ignored as sd_notify's are
// by most daemons (the supervisor may be gone).
func sdNotify(state string) {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return
	}
	if strings.HasPrefix(path, "@") {
		path = "\x00" + path[1:] // an abstract socket
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return
	}
	defer c.Close()
	c.Write([]byte(state))
}
