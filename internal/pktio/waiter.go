package pktio

// waiter: the Poller, the Waiter of AF_PACKET queues: one owner goroutine
// waits for any of several receive queues (of different ports) at once,
// parked in the Go netpoller.
//
// Flow: the queues' socket fds and an eventfd (for Wake) are members of one
// epoll instance; that epoll fd is itself registered in the Go netpoller
// (an epoll fd is pollable: readable while its ready list is not empty).
// Wait runs RawConn.Read with a callback that checks the queues' rings
// directly (no system call) and returns true as soon as one has frames; only
// when none has does the goroutine park. A socket's wake-up (the kernel
// retiring a ring block) reaches the inner epoll, which wakes the netpoller.
//
// Detach and Attach take the queues' fds out of the epoll set and put them
// back: a hot restart's predecessor shares its sockets with the successor,
// and every frame the successor receives would otherwise wake the
// predecessor's netpoller (a thread woken per frame, on the CPU the new
// workers need while they catch up).
//
// Locking: one owner goroutine calls Add, Remove, Wait, Detach and Attach;
// Wake and Close may be called from any goroutine.

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Poller waits for any of its queues to have frames.
type Poller struct {
	epfd   int
	evfd   int
	file   *os.File
	rc     syscall.RawConn
	items  []Waitable
	buf    [16]unix.EpollEvent
	wakeFn func(uintptr) bool
	// detached: the items' fds are out of the epoll set (Detach); Add
	// and Remove keep the list only.
	detached bool

	closeOnce sync.Once
	closed    atomic.Bool
}

// NewPoller returns an empty Poller.
func NewPoller() (*Poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	evfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, os.NewSyscallError("eventfd", err)
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(evfd)}); err != nil {
		unix.Close(epfd)
		unix.Close(evfd)
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		unix.Close(evfd)
		return nil, err
	}
	w := &Poller{epfd: epfd, evfd: evfd}
	w.file = os.NewFile(uintptr(epfd), "pktio-waiter")
	rc, err := w.file.SyscallConn()
	if err != nil {
		w.file.Close()
		unix.Close(evfd)
		return nil, err
	}
	w.rc = rc
	w.wakeFn = w.check
	return w, nil
}

// Add makes Wait return when q has frames.
func (w *Poller) Add(q Waitable) error {
	if fd := q.PollFd(); fd >= 0 && !w.detached {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			return os.NewSyscallError("epoll_ctl", err)
		}
	}
	w.items = append(w.items, q)
	return nil
}

// Remove forgets q (a closed socket has left the epoll set by itself).
func (w *Poller) Remove(q Waitable) {
	for i, it := range w.items {
		if it == q {
			w.items = append(w.items[:i], w.items[i+1:]...)
			if fd := q.PollFd(); fd >= 0 && !w.detached {
				unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, fd, nil)
			}
			return
		}
	}
}

// Detach takes the queues' fds out of the epoll set: their wake-ups no
// longer reach this process. Wait then returns only for Wake (or a queue
// it finds ready when it looks). The Poller keeps the queues for Attach.
// Detach before the fds close if they are shared with another process:
// an epoll registration outlives this process's fd while another holds
// the socket, and then cannot be removed.
func (w *Poller) Detach() {
	if w.detached {
		return
	}
	w.detached = true
	for _, q := range w.items {
		if fd := q.PollFd(); fd >= 0 {
			unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, fd, nil)
		}
	}
}

// Attach puts the queues' fds back into the epoll set after Detach.
func (w *Poller) Attach() error {
	if !w.detached {
		return nil
	}
	w.detached = false
	var errs []error
	for _, q := range w.items {
		if fd := q.PollFd(); fd >= 0 {
			ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
			if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
				errs = append(errs, os.NewSyscallError("epoll_ctl", err))
			}
		}
	}
	return errors.Join(errs...)
}

// Wait returns when one of the queues is ready or Wake was called. It
// returns ErrClosed after Close.
func (w *Poller) Wait() error {
	if w.check(0) {
		return nil
	}
	err := w.rc.Read(w.wakeFn)
	if errors.Is(err, os.ErrClosed) {
		return ErrClosed
	}
	return err
}

// WaitFor is Wait bounded by d: false when d passed first. Like Wait it
// parks the goroutine in the netpoller, never in a blocking system call: a
// goroutine blocked in poll(2) holds its P, and with as many Ps as workers
// a worker woken meanwhile waits for the runtime to take it back (up to a
// sysmon period, 10 ms when the process is quiet).
func (w *Poller) WaitFor(d time.Duration) (bool, error) {
	if w.check(0) {
		return true, nil
	}
	if err := w.file.SetReadDeadline(time.Now().Add(d)); err != nil {
		if errors.Is(err, os.ErrClosed) || w.closed.Load() {
			return false, ErrClosed
		}
		return false, err
	}
	err := w.rc.Read(w.wakeFn)
	w.file.SetReadDeadline(time.Time{})
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return false, nil
	case errors.Is(err, os.ErrClosed) || w.closed.Load():
		return false, ErrClosed
	}
	return false, err
}

// Readable is a Waitable for any pollable fd (a netlink socket): ready
// when a read would not block, asked with a poll(2) that does not wait.
type Readable int

// PollFd implements Waitable.
func (r Readable) PollFd() int { return int(r) }

// Ready implements Waitable.
func (r Readable) Ready() bool {
	pfd := [1]unix.PollFd{{Fd: int32(r), Events: unix.POLLIN}}
	n, _ := unix.Poll(pfd[:], 0)
	return n > 0 && pfd[0].Revents != 0
}

// check is the netpoller callback: true when Wait may return. Before
// reporting "not ready" it drains the epoll instance's ready list, so the
// next kernel wake-up is a new edge for the netpoller.
func (w *Poller) check(uintptr) bool {
	for _, q := range w.items {
		if q.Ready() {
			return true
		}
	}
	n, _ := unix.EpollWait(w.epfd, w.buf[:], 0)
	woken := false
	for i := range n {
		if int(w.buf[i].Fd) == w.evfd {
			var b [8]byte
			unix.Read(w.evfd, b[:])
			woken = true
		}
	}
	if woken {
		return true
	}
	// A queue may have become ready between the first check and the drain.
	for _, q := range w.items {
		if q.Ready() {
			return true
		}
	}
	return false
}

// Wake makes a current or the next Wait return. Any goroutine.
func (w *Poller) Wake() {
	var b [8]byte
	b[0] = 1
	unix.Write(w.evfd, b[:])
}

// Close releases the waiter; a blocked Wait returns ErrClosed.
func (w *Poller) Close() error {
	var err error
	w.closeOnce.Do(func() {
		w.closed.Store(true)
		err = errors.Join(w.file.Close(), unix.Close(w.evfd))
	})
	return err
}
