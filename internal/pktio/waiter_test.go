package pktio

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// WaitFor returns false when its time passed with nothing to read, true as
// soon as a Readable fd has data, and ErrClosed after Close.
func TestPollerWaitFor(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	w, err := NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(Readable(fds[0])); err != nil {
		t.Fatal(err)
	}
	if ok, err := w.WaitFor(20 * time.Millisecond); ok || err != nil {
		t.Fatalf("nothing sent: %v %v", ok, err)
	}
	go func() {
		time.Sleep(10 * time.Millisecond)
		unix.Write(fds[1], []byte("x"))
	}()
	if ok, err := w.WaitFor(time.Minute); !ok || err != nil {
		t.Fatalf("a datagram waits: %v %v", ok, err)
	}
	if !Readable(fds[0]).Ready() {
		t.Fatal("Readable not ready with a datagram queued")
	}
	var b [4]byte
	unix.Read(fds[0], b[:])
	if Readable(fds[0]).Ready() {
		t.Fatal("Readable ready with nothing queued")
	}
	w.Close()
	if _, err := w.WaitFor(time.Second); err != ErrClosed {
		t.Fatalf("after Close: %v", err)
	}
}

// Detach takes the queues' fds out of the epoll set (their data no longer
// makes it readable), Attach puts back those still added, and Add and
// Remove while detached change only the list.
func TestPollerDetach(t *testing.T) {
	pair := func() [2]int {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
		return [2]int{fds[0], fds[1]}
	}
	a, b, c := pair(), pair(), pair()
	w, err := NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	epollReady := func() bool {
		pfd := []unix.PollFd{{Fd: int32(w.epfd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, 0)
		return err == nil && n > 0
	}
	drain := func(fd int) {
		var buf [4]byte
		unix.Read(fd, buf[:])
	}
	if err := w.Add(Readable(a[0])); err != nil {
		t.Fatal(err)
	}
	if err := w.Add(Readable(b[0])); err != nil {
		t.Fatal(err)
	}
	unix.Write(a[1], []byte("x"))
	if !epollReady() {
		t.Fatal("attached: a datagram does not make the epoll set readable")
	}
	drain(a[0])
	w.Detach()
	if err := w.Add(Readable(c[0])); err != nil { // detached: listed only
		t.Fatal(err)
	}
	w.Remove(Readable(b[0]))
	for _, p := range [][2]int{a, b, c} {
		unix.Write(p[1], []byte("x"))
	}
	if epollReady() {
		t.Fatal("detached: the queues' data still reaches the epoll set")
	}
	for _, p := range [][2]int{a, b, c} {
		drain(p[0])
	}
	if err := w.Attach(); err != nil {
		t.Fatal(err)
	}
	unix.Write(b[1], []byte("x")) // removed while detached: not back
	if epollReady() {
		t.Fatal("a queue removed while detached is back in the epoll set")
	}
	drain(b[0])
	for _, p := range [][2]int{a, c} {
		unix.Write(p[1], []byte("x"))
		if !epollReady() {
			t.Fatalf("attached again: fd %d does not make the epoll set readable", p[0])
		}
		drain(p[0])
	}
	if got := len(w.items); got != 2 {
		t.Fatalf("%d queues listed, want a and c", got)
	}
}
