package daemon

// Port locks: one daemon per interface. Two daemons forwarding on the same
// interface would answer every ping twice and fight over its neighbours, so
// a daemon holds, for each port, an abstract unix socket named after the
// interface in the port's network namespace (abstract names live per
// network namespace and vanish with the process, kill -9 included: nothing
// stale is ever left on disk). A second daemon's bind fails with
// EADDRINUSE; it then connects to the holder and reads its pid with
// SO_PEERCRED to name it in the error.
//
// A supervisor restarting the daemon right after kill -9 races the old
// process's exit, which can take a while (closing hundreds of packet
// sockets): while the holder is exiting (PF_EXITING in /proc/PID/stat), the
// new daemon waits for it, up to PortLockWait.
//
// Locking: a portLock belongs to its port; release is idempotent.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// defaultPortLockWait bounds the wait for a previous daemon that is still
// exiting.
const defaultPortLockWait = 15 * time.Second

type portLock struct {
	ln   *net.UnixListener
	once sync.Once
}

// lockName is the abstract socket name of an interface's lock.
func lockName(ifname string) string { return "@netfwd/port/" + ifname }

// lockPort takes the lock of ifi in the calling thread's network namespace.
func lockPort(ifi *net.Interface, wait time.Duration) (*portLock, error) {
	if wait <= 0 {
		wait = defaultPortLockWait
	}
	deadline := time.Now().Add(wait)
	for {
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: lockName(ifi.Name), Net: "unix"})
		if err == nil {
			l := &portLock{ln: ln}
			go l.serve()
			return l, nil
		}
		if !errors.Is(err, unix.EADDRINUSE) {
			return nil, fmt.Errorf("%s: lock: %w", ifi.Name, err)
		}
		pid := lockHolder(ifi.Name)
		if pid > 0 && processExiting(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if pid > 0 {
			return nil, fmt.Errorf("%s: in use by another netfwd (pid %d%s)", ifi.Name, pid, procName(pid))
		}
		if time.Now().Before(deadline) { // the holder is between bind and listen, or just went away
			time.Sleep(20 * time.Millisecond)
			continue
		}
		return nil, fmt.Errorf("%s: in use by another netfwd", ifi.Name)
	}
}

// serve accepts the connections of daemons asking who holds the lock and
// closes them: the asker has read our credentials by then.
func (l *portLock) serve() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}

func (l *portLock) release() {
	if l == nil {
		return
	}
	l.once.Do(func() { l.ln.Close() })
}

// lockHolder returns the pid of the process holding ifname's lock (0: not
// known).
func lockHolder(ifname string) int {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: lockName(ifname), Net: "unix"})
	if err != nil {
		return 0
	}
	defer c.Close()
	rc, err := c.SyscallConn()
	if err != nil {
		return 0
	}
	pid := 0
	rc.Control(func(fd uintptr) {
		if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
			pid = int(cred.Pid)
		}
	})
	return pid
}

// processExiting reports whether pid is in exit (PF_EXITING), or gone.
func processExiting(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // gone: its sockets are on their way out
	}
	s := string(b)
	// The command name is in parentheses and may contain spaces: fields
	// count from the last ')'. Field 9 (flags) is the 7th after it.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 7 {
		return false
	}
	if f[0] == "Z" || f[0] == "X" {
		return true
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return err == nil && flags&0x4 != 0 // PF_EXITING
}

// procName returns ", NAME" for a pid whose command name can be read.
func procName(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return ", " + strings.TrimSpace(string(b))
}
