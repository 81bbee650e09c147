package ctlsock

// The socket file: created with mode 0600 from the start, and only ever
// replacing or removing what is provably ours or provably dead.
//
// At Listen, whatever is at the path is examined first (Lstat, links not
// followed): nothing is fine; a socket on which connect() fails with
// ECONNREFUSED is stale (its daemon died, e.g. with kill -9) and is
// removed; a socket that accepts the connection, or whose state cannot be
// told (a timeout: a daemon too busy to accept), is refused with an error
// naming the path; anything else (a regular file, a directory, a link) is
// refused and left untouched. At Close the path is removed only if it is
// still the socket Listen created (same device and inode), never a file
// somebody put there since.
//
// Locking: none (Listen and Close run once, from the daemon's setup and
// shutdown).

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

type SocketFile struct {
	ln       *net.UnixListener
	path     string
	dev, ino uint64
	// aside is the temporary name of a socket ListenUnixAside made, until
	// Install renames it over path ("": it is at path).
	aside string
}

// listenSocket clears a stale socket at path and listens there.
func listenSocket(path string) (*SocketFile, error) {
	if err := clearStale(path); err != nil {
		return nil, err
	}
	old := unix.Umask(0o177) // created 0600, no window with wider permissions
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	unix.Umask(old)
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false) // Close removes it only if it is still ours
	s := &SocketFile{ln: ln, path: path}
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		ln.Close()
		return nil, err
	}
	s.dev, s.ino = uint64(st.Dev), st.Ino
	if err := os.Chmod(path, 0o600); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// clearStale removes a dead socket at path and refuses anything else.
func clearStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s exists and is not a socket (%s); not replacing it", path, fileKind(fi.Mode()))
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("%s: another daemon is listening on it", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%s: cannot tell whether a daemon listens on it (%v); not removing it", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the stale socket %s: %w", path, err)
	}
	return nil
}

func fileKind(m fs.FileMode) string {
	switch m.Type() {
	case 0:
		return "a regular file"
	case fs.ModeDir:
		return "a directory"
	case fs.ModeSymlink:
		return "a symbolic link"
	case fs.ModeNamedPipe:
		return "a named pipe"
	}
	return "mode " + m.Type().String()
}

// Listener is the socket's listener.
func (s *SocketFile) Listener() *net.UnixListener { return s.ln }

// Close stops listening and removes the socket file if it is still ours
// (a successor may have renamed its own over it).
func (s *SocketFile) Close() error { return s.close() }

func (s *SocketFile) close() error {
	err := s.ln.Close()
	name := s.path
	if s.aside != "" {
		name = s.aside
	}
	var st unix.Stat_t
	if unix.Lstat(name, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFSOCK &&
		uint64(st.Dev) == s.dev && st.Ino == s.ino {
		if rerr := os.Remove(name); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

// ListenUnixReplacing listens on a unix socket at path, created 0600 under
// a temporary name and renamed over path (replacing a socket file there,
// refusing anything else), so that no client ever finds the name without a
// listener behind it.
func ListenUnixReplacing(path string) (*SocketFile, error) {
	s, err := ListenUnixAside(path)
	if err != nil {
		return nil, err
	}
	if err := s.Install(); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// ListenUnixAside listens on a unix socket for path, created 0600 under a
// temporary name beside it; Install renames it over path. Clients find it
// under path only from then on (a hot restart's new daemon takes the names
// over only once it took over: until then the old one answers there).
// Close before Install removes the temporary name.
func ListenUnixAside(path string) (*SocketFile, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() != fs.ModeSocket {
		return nil, fmt.Errorf("%s exists and is not a socket; not replacing it", path)
	}
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	os.Remove(tmp)
	old := unix.Umask(0o177)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	unix.Umask(old)
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false)
	var st unix.Stat_t
	if err := unix.Lstat(tmp, &st); err != nil {
		ln.Close()
		os.Remove(tmp)
		return nil, err
	}
	return &SocketFile{ln: ln, path: path, dev: uint64(st.Dev), ino: st.Ino, aside: tmp}, nil
}

// Install renames a socket ListenUnixAside made over its path (replacing
// a socket file there, refusing anything else); a no-op once installed.
func (s *SocketFile) Install() error {
	if s.aside == "" {
		return nil
	}
	if fi, err := os.Lstat(s.path); err == nil && fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s exists and is not a socket; not replacing it", s.path)
	}
	if err := os.Rename(s.aside, s.path); err != nil {
		return err
	}
	s.aside = ""
	return nil
}
