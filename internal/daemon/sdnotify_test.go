package daemon

import (
	"net"
	"path/filepath"
	"testing"
	"time"
)

// TestSDNotify: the state reaches the socket systemd names, as one
// datagram; without NOTIFY_SOCKET nothing is sent.
func TestSDNotify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	sdNotify("MAINPID=42\nREADY=1")
	ln.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 256)
	n, err := ln.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(buf[:n]); got != "MAINPID=42\nREADY=1" {
		t.Fatalf("got %q", got)
	}
	t.Setenv("NOTIFY_SOCKET", "")
	sdNotify("READY=1")
	ln.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, err := ln.Read(buf); err == nil {
		t.Fatalf("sent %q without NOTIFY_SOCKET", buf[:n])
	}
}
