package handover

// The new process's side: Dial the running daemon, Prepare, take its
// descriptors (TakeFD), Pause, continue the rings, Commit, and only then
// read them; Done once forwarding.
//
// Locking: a Client belongs to one goroutine.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
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
	// version is what this side speaks (Protocol; tests pose as others),
	// peer the running daemon's, from Prepare.
	version, peer Version
}

// Dial connects to the handover socket at path.
func Dial(path string) (*Client, error) {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("hot restart: no running netfwd answers on %s: %w", path, err)
	}
	return &Client{c: c, dec: json.NewDecoder(bufio.NewReader(c)), enc: json.NewEncoder(c), pidfd: -1, version: Protocol, peer: V1}, nil
}

func (cl *Client) call(op string, reply any, timeout time.Duration) error {
	cl.c.SetDeadline(time.Now().Add(timeout))
	req := request{Op: op}
	if op == "prepare" {
		req.Version = cl.version.String()
	}
	if err := cl.enc.Encode(req); err != nil {
		return fmt.Errorf("hot restart: %s: %w", op, err)
	}
	if err := cl.dec.Decode(reply); err != nil {
		return fmt.Errorf("hot restart: %s: the running netfwd did not answer: %w", op, err)
	}
	return nil
}

// Prepare asks what the running daemon holds, and opens its pidfd for
// TakeFD. While another restart is in progress it returns a *BusyError;
// when the running daemon speaks another major version a *VersionError
// (and the connection is to be closed: nothing was paused).
func (cl *Client) Prepare() (Prepared, error) {
	var p Prepared
	if err := cl.call("prepare", &p, 10*time.Second); err != nil {
		return p, err
	}
	peer, err := ParseVersion(p.Version)
	if err != nil {
		return p, fmt.Errorf("hot restart: the running netfwd: %w", err)
	}
	cl.peer = peer
	if !cl.version.Compatible(peer) {
		return p, &VersionError{This: cl.version, Running: peer}
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

// Peer is the running daemon's protocol version (after Prepare; 1.0 when
// it sent none).
func (cl *Client) Peer() Version { return cl.peer }

// Commits reports whether the running daemon takes a commit (1.1): it
// then resumes forwarding if none comes within CommitTimeout of pause.
func (cl *Client) Commits() bool { return cl.peer.Has(1) && cl.version.Has(1) }

// Commit asks the paused daemon to leave its rings to this process for
// good. Only a nil return allows this process to read them: any error
// means the running daemon resumed forwarding (it waited too long, or
// refused), or may have, and this process must exit without reading. A
// 1.0 daemon has no commit (Commits is false): nil at once.
func (cl *Client) Commit() error {
	if !cl.Commits() {
		return nil
	}
	var r commitReply
	cl.c.SetDeadline(time.Now().Add(10 * time.Second))
	err := cl.enc.Encode(request{Op: "commit"})
	if err == nil {
		err = cl.dec.Decode(&r)
	}
	if err == nil && !r.Committed {
		err = fmt.Errorf("refused: %s", r.Error)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) {
		err = errors.New("it closed the connection")
	}
	if err != nil {
		return fmt.Errorf("hot restart: the running netfwd did not take the commit (%v): it forwards on, as it does when no commit comes within %v of pause; this process read no ring", err, CommitTimeout)
	}
	return nil
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

// WaitExit waits up to d for the old process to exit. It looks at the
// pidfd without blocking and sleeps between looks: a poll(2) that blocks
// holds its P (GOMAXPROCS) for the whole wait, and the workers, which
// forward while the old process shuts down, would wait for the runtime's
// sysmon (up to 10 ms a time) to take it back: frames lost to a full
// ring on a machine with as many Ps as workers.
func (cl *Client) WaitExit(d time.Duration) bool {
	if cl.pidfd < 0 {
		return true
	}
	pfd := []unix.PollFd{{Fd: int32(cl.pidfd), Events: unix.POLLIN}}
	for deadline := time.Now().Add(d); ; {
		if n, err := unix.Poll(pfd, 0); err == nil && n > 0 {
			return true
		} else if err != nil && err != unix.EINTR {
			return false
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
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
