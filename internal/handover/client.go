package handover

// The new process's side: Dial the running daemon, Prepare, take its
// descriptors (TakeFD), Pause, then Done once forwarding.
//
// Locking: a Client belongs to one goroutine.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// Client is a successor's connection to the running daemon.
type Client struct {
	c     net.Conn
	dec   *json.Decoder
	enc   *json.Encoder
	pidfd int
	pid   int
}

// Dial connects to the handover socket at path.
func Dial(path string) (*Client, error) {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("hot restart: no running netfwd answers on %s: %w", path, err)
	}
	return &Client{c: c, dec: json.NewDecoder(bufio.NewReader(c)), enc: json.NewEncoder(c), pidfd: -1}, nil
}

func (cl *Client) call(op string, reply any, timeout time.Duration) error {
	cl.c.SetDeadline(time.Now().Add(timeout))
	if err := cl.enc.Encode(request{Op: op}); err != nil {
		return fmt.Errorf("hot restart: %s: %w", op, err)
	}
	if err := cl.dec.Decode(reply); err != nil {
		return fmt.Errorf("hot restart: %s: the running netfwd did not answer: %w", op, err)
	}
	return nil
}

// Prepare asks what the running daemon holds, and opens its pidfd for
// TakeFD. While another restart is in progress it returns a *BusyError.
func (cl *Client) Prepare() (Prepared, error) {
	var p Prepared
	if err := cl.call("prepare", &p, 10*time.Second); err != nil {
		return p, err
	}
	if p.Busy != 0 {
		return p, &BusyError{PID: p.Busy}
	}
	if p.Error != "" {
		return p, fmt.Errorf("hot restart: the running netfwd refused: %s", p.Error)
	}
	fd, err := unix.PidfdOpen(p.PID, 0)
	if err != nil {
		return p, fmt.Errorf("hot restart: pidfd_open(%d): %w", p.PID, err)
	}
	cl.pidfd, cl.pid = fd, p.PID
	return p, nil
}

// PID is the running daemon's process id (after Prepare).
func (cl *Client) PID() int { return cl.pid }

// TakeFD duplicates the running daemon's descriptor fd into this process
// (pidfd_getfd: the same open file, close-on-exec here).
func (cl *Client) TakeFD(fd int) (int, error) {
	if cl.pidfd < 0 {
		return -1, errors.New("hot restart: TakeFD before Prepare")
	}
	n, err := unix.PidfdGetfd(cl.pidfd, fd, 0)
	if err != nil {
		return -1, fmt.Errorf("hot restart: pidfd_getfd(pid %d, fd %d): %w", cl.pid, fd, err)
	}
	return n, nil
}

// Pause stops the running daemon's readers and returns where they stopped.
func (cl *Client) Pause() (Paused, error) {
	var p Paused
	if err := cl.call("pause", &p, 10*time.Second); err != nil {
		return p, err
	}
	if p.Error != "" {
		return p, fmt.Errorf("hot restart: the running netfwd could not pause: %s", p.Error)
	}
	return p, nil
}

// Done tells the paused daemon that this process forwards now: it exits.
func (cl *Client) Done() error {
	var r doneReply
	if err := cl.call("done", &r, 10*time.Second); err != nil {
		return err
	}
	if r.Error != "" {
		return fmt.Errorf("hot restart: %s", r.Error)
	}
	return nil
}

// WaitExit waits up to d for the old process to exit.
func (cl *Client) WaitExit(d time.Duration) bool {
	if cl.pidfd < 0 {
		return true
	}
	pfd := []unix.PollFd{{Fd: int32(cl.pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(pfd, int(d.Milliseconds()))
	return err == nil && n > 0
}

// Close ends the connection (after Pause without Done: the old daemon
// resumes).
func (cl *Client) Close() error {
	if cl.pidfd >= 0 {
		unix.Close(cl.pidfd)
		cl.pidfd = -1
	}
	return cl.c.Close()
}
