package ctlsock

import "golang.org/x/sys/unix"

// umask sets the process umask (the socket is created 0600 from the start,
// not chmod-ed after a window of wider permissions) and returns the old one.
func umask(m int) int { return unix.Umask(m) }
