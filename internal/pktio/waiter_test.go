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
