package ctlsock

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// staleSocket leaves a socket file nobody listens on, as a daemon killed
// with SIGKILL does.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if fi, err := os.Lstat(path); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("no stale socket: %v %v", fi, err)
	}
}

func TestStaleSocketIsReplaced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ctl.sock")
	staleSocket(t, path)
	s, err := Listen(path, Handler{})
	if err != nil {
		t.Fatalf("a stale socket blocks the start: %v", err)
	}
	go s.Serve()
	defer s.Close()
	if _, err := Do(path, []string{"reload"}, false); !IsRequestError(err) {
		t.Fatalf("the new socket does not answer: %v", err)
	}
}

func TestLiveSocketIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ctl.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := Listen(path, Handler{}); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("a live socket: %v, want an error naming %s", err, path)
	}
	// The other daemon's socket is still there and still answers.
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("the live socket was taken away: %v", err)
	}
	c.Close()
}

// A daemon too busy to accept (its backlog full) does not refuse the
// connection: its socket must not be taken for a stale one.
func TestBusySocketIsNotRemoved(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ctl.sock")
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	pending, err := net.Dial("unix", path) // fills the backlog of 0
	if err != nil {
		t.Fatal(err)
	}
	defer pending.Close()
	if _, err := net.Dial("unix", path); err == nil || errors.Is(err, syscall.ECONNREFUSED) {
		t.Skipf("the backlog did not fill (%v): cannot build the busy case here", err)
	}
	_, err = Listen(path, Handler{})
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("a busy daemon's socket: %v, want a refusal naming %s", err, path)
	}
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		t.Fatalf("the busy daemon's socket was removed: %v", err)
	}
}

// Anything at the path that is not a socket is refused and left as it was.
func TestNonSocketIsRefused(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "important.txt")
	if err := os.WriteFile(file, []byte("do not lose me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "subdir")
	os.Mkdir(sub, 0o755)
	sockTarget := filepath.Join(dir, "real.sock")
	staleSocket(t, sockTarget)
	link := filepath.Join(dir, "link.sock")
	os.Symlink(sockTarget, link)
	for _, path := range []string{file, sub, link} {
		if s, err := Listen(path, Handler{}); err == nil {
			s.Close()
			t.Errorf("%s: accepted", path)
		} else if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a socket") {
			t.Errorf("%s: %v", path, err)
		}
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "do not lose me\n" {
		t.Fatalf("the file changed: %q %v", b, err)
	}
	if fi, err := os.Stat(sub); err != nil || !fi.IsDir() {
		t.Fatal("the directory changed")
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode().Type() != os.ModeSymlink {
		t.Fatal("the link changed")
	}
}

// At close the socket file is removed only while it is still the daemon's:
// a file somebody put at the path meanwhile stays.
func TestCloseLeavesOthersFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ctl.sock")
	s, err := Listen(path, Handler{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.Serve(); close(done) }()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.Close()
	<-done
	if b, err := os.ReadFile(path); err != nil || string(b) != "data\n" {
		t.Fatalf("closing the server deleted a file it did not create: %q %v", b, err)
	}
	// And its own socket it does remove.
	path2 := filepath.Join(t.TempDir(), "ctl.sock")
	s2, err := Listen(path2, Handler{})
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
	if _, err := os.Lstat(path2); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("own socket left behind: %v", err)
	}
}

// TestAsideTakesTheNameAtInstall: a socket opened aside leaves the live one
// at the path answering until Install; closed before Install it removes
// only its temporary name; installed, the path is its.
func TestAsideTakesTheNameAtInstall(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ctl.sock")
	live, err := ListenUnixReplacing(path)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	peer := func() (uint64, error) { // the inode at path
		var st unix.Stat_t
		err := unix.Lstat(path, &st)
		return st.Ino, err
	}
	liveIno, _ := peer()
	gaveUp, err := ListenUnixAside(path)
	if err != nil {
		t.Fatal(err)
	}
	if ino, err := peer(); err != nil || ino != liveIno {
		t.Fatalf("opened aside: the path is inode %d (%v), want the live socket's %d", ino, err, liveIno)
	}
	gaveUp.Close()
	if ents, _ := os.ReadDir(dir); len(ents) != 1 || ents[0].Name() != "ctl.sock" {
		t.Fatalf("closed before Install: the directory holds %v, want ctl.sock alone", ents)
	}
	if ino, _ := peer(); ino != liveIno {
		t.Fatal("closed before Install: the live socket lost its name")
	}
	next, err := ListenUnixAside(path)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if err := next.Install(); err != nil {
		t.Fatal(err)
	}
	if ino, _ := peer(); ino != next.ino || ino == liveIno {
		t.Fatalf("installed: the path is inode %d, want %d", ino, next.ino)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("installed: the directory holds %v, want ctl.sock alone", ents)
	}
	live.Close() // not its name any more: leaves it
	if ino, err := peer(); err != nil || ino != next.ino {
		t.Fatalf("the replaced socket's Close removed the path: %v", err)
	}
}
