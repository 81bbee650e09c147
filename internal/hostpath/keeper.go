package hostpath

// The twin keeper: a small process that holds the twins' TAP files so that
// a restart of netfwd is not seen by the routing daemons.
//
// Why a process: a TAP device loses its carrier the moment its last file
// closes (tun's __tun_detach calls netif_carrier_off), persistent or not.
// zebra then takes the interface down and bgpd resets every directly
// connected session on it at once (fast-external-failover): a restart
// would flap BGP however quickly the next process re-attaches. So with
// Options.Keeper the Manager runs a keeper, a child in a session of its
// own, that inherits one more reference to every twin's file (the same
// open file, not a second queue: a single-queue TAP takes one file) and
// does nothing with it. When netfwd exits, by SIGTERM or kill -9, the
// keeper's references keep the devices attached and their carrier up; the
// next Manager finds the keeper among the holders of each name (its command
// line has KeeperArg), takes the very file out of it (pidfd_getfd), starts
// its own keeper and ends the old one. A keeper whose netfwd is gone exits
// by itself after its linger time (Options.KeeperLinger); the twins stay
// (persistent) without carrier until a netfwd attaches again.
//
// The keeper can hold other files too (KeepAlso): netfwd gives it the
// ports' kernel input guards, which must outlive a kill -9 exactly as long
// as the twins' carrier does (internal/daemon/kernelguard.go).
//
// The keeper is started with syscall.ForkExec and the raw descriptors:
// os/exec would hand them through os.File.Fd, which switches the shared
// open file to blocking mode under the twin's reader.
//
// Locking: keeper and oldKeepers belong to the Manager's lock.

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/netfwd/netfwd/internal/pktio"
	"golang.org/x/sys/unix"
)

// KeeperArg is the argument that marks a keeper's command line; the
// keeper command (Options.Keeper) gets it, netfwd's pid, the linger time
// and the twins' namespace (netnsID) appended. A holder scan sees every
// namespace's TAPs of a name: the namespace tells ours from the others.
const KeeperArg = "--netfwd-twin-keeper"

// defaultKeeperLinger is how long a keeper holds the twins after its
// netfwd exited when Options.KeeperLinger is 0.
const defaultKeeperLinger = time.Minute

// keeperProc is a keeper this Manager started.
type keeperProc struct {
	pid  int
	key  string        // the twins (name/ifindex) it holds
	done chan struct{} // closed when it has been reaped
}

// keepLocked makes the keeper hold exactly the twins' current files:
// when they changed, a new keeper is started first, then the old ones are
// ended, so some process holds every twin at all times.
func (m *Manager) keepLocked() {
	if len(m.opts.Keeper) == 0 {
		return
	}
	var fds []int
	var key []string
	for _, t := range m.sortedTwinsLocked() {
		if d := t.dev.Load(); d != nil {
			fds = append(fds, d.fd)
			key = append(key, fmt.Sprintf("%s/%d", d.name, d.index))
		}
	}
	// The other files ride along with the twins: without a twin nothing
	// needs keeping.
	if len(fds) > 0 {
		for _, name := range slices.Sorted(maps.Keys(m.extra)) {
			fds = append(fds, int(m.extra[name].Fd()))
			key = append(key, name)
		}
	}
	k := strings.Join(key, ",")
	if m.keeper != nil && m.keeper.key == k && m.keeper.alive() {
		m.endOldKeepersLocked()
		return
	}
	old := m.keeper
	m.keeper = nil
	if len(fds) > 0 {
		kp, err := startKeeper(m.opts.Keeper, m.opts.KeeperLinger, m.nsID, fds)
		if err != nil {
			m.log.Error("hostpath: cannot start the twin keeper; a restart will take the twins' carrier down", "err", err)
		} else {
			kp.key = k
			m.keeper = kp
		}
	}
	if old != nil {
		old.stop()
	}
	m.endOldKeepersLocked()
}

// KeepAlso makes the keeper hold files, by key, besides the twins' files
// (while there are twins): when the set of keys changed, a new keeper is
// started first and the old one ended, as for a change of the twins. The
// Manager takes ownership of files (it closes those of the previous call,
// and all at Close; a keeper holds copies of its own).
func (m *Manager) KeepAlso(files map[string]*os.File) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		for _, f := range files {
			f.Close()
		}
		return
	}
	m.closeExtraLocked()
	m.extra = files
	m.keepLocked()
}

func (m *Manager) closeExtraLocked() {
	for _, f := range m.extra {
		f.Close()
	}
	m.extra = nil
}

// endOldKeepersLocked ends the keepers of earlier processes whose files
// this Manager took.
func (m *Manager) endOldKeepersLocked() {
	for _, pid := range m.oldKeepers {
		if m.keeper == nil || pid != m.keeper.pid {
			syscall.Kill(pid, syscall.SIGTERM)
		}
	}
	m.oldKeepers = nil
}

func startKeeper(argv []string, linger time.Duration, nsID string, fds []int) (*keeperProc, error) {
	if linger <= 0 {
		linger = defaultKeeperLinger
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer devnull.Close()
	files := []uintptr{devnull.Fd(), devnull.Fd(), devnull.Fd()}
	for _, fd := range fds {
		files = append(files, uintptr(fd))
	}
	args := append(slices.Clone(argv), KeeperArg, strconv.Itoa(os.Getpid()), linger.String(), nsID)
	pid, err := syscall.ForkExec(argv[0], args, &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: files,
		// Its own session: no terminal's or process group's signals.
		Sys: &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	kp := &keeperProc{pid: pid, done: make(chan struct{})}
	go func() {
		var ws syscall.WaitStatus
		for {
			_, err := syscall.Wait4(pid, &ws, 0, nil)
			if !errors.Is(err, syscall.EINTR) {
				break
			}
		}
		close(kp.done)
	}()
	return kp, nil
}

func (k *keeperProc) alive() bool {
	select {
	case <-k.done:
		return false
	default:
		return true
	}
}

// stop ends the keeper and waits for it (bounded).
func (k *keeperProc) stop() {
	syscall.Kill(k.pid, syscall.SIGTERM)
	select {
	case <-k.done:
	case <-time.After(3 * time.Second):
	}
}

// netnsID names the network namespace netns ("" = the caller's) by its
// device and inode, as `stat -L /proc/self/ns/net` does.
func netnsID(netns string) (string, error) {
	var id string
	err := pktio.InNetns(netns, func() error {
		var st unix.Stat_t
		if err := unix.Stat(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), &st); err != nil {
			return err
		}
		id = fmt.Sprintf("netns:%d:%d", st.Dev, st.Ino)
		return nil
	})
	return id, err
}

// holderNetns returns the netnsID of the namespace of the TAP that holder
// h has open (TUNGETDEVNETNS on a copy of its descriptor), or "" when that
// cannot be learned (the process is gone, or h is not a real holder).
// fdinfo names a TAP but not its namespace: a TAP of the same name in
// another namespace (another netfwd's twin) must not count as a holder.
func holderNetns(h holder) string {
	pidfd, err := unix.PidfdOpen(h.pid, 0)
	if err != nil {
		return ""
	}
	defer unix.Close(pidfd)
	fd, err := unix.PidfdGetfd(pidfd, h.fd, 0)
	if err != nil {
		return ""
	}
	defer unix.Close(fd)
	nsfd, err := unix.IoctlRetInt(fd, unix.TUNGETDEVNETNS)
	if err != nil {
		return ""
	}
	defer unix.Close(nsfd)
	var st unix.Stat_t
	if unix.Fstat(nsfd, &st) != nil {
		return ""
	}
	return fmt.Sprintf("netns:%d:%d", st.Dev, st.Ino)
}

// inNetns drops the holders whose TAP is known to be in another namespace
// than nsID.
func inNetns(hs []holder, nsID string) []holder {
	return slices.DeleteFunc(hs, func(h holder) bool {
		if h.keeper && h.keeperNS != nsID {
			return true
		}
		ns := holderNetns(h)
		return ns != "" && ns != nsID
	})
}

// takeFromKeeper duplicates the keeper h's file of the TAP name into this
// process (pidfd_getfd: the same open file, still attached).
func takeFromKeeper(h holder, name string) (*os.File, error) {
	pidfd, err := unix.PidfdOpen(h.pid, 0)
	if err != nil {
		return nil, fmt.Errorf("pidfd_open %d: %w", h.pid, err)
	}
	defer unix.Close(pidfd)
	fd, err := unix.PidfdGetfd(pidfd, h.fd, 0)
	if err != nil {
		return nil, fmt.Errorf("pidfd_getfd %d/%d: %w", h.pid, h.fd, err)
	}
	f, err := tapFileOf(fd, name)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return f, nil
}

// RunKeeper is the keeper process's body (the command in Options.Keeper
// calls it with the pid and linger time that follow KeeperArg): it holds
// the files it inherited until SIGTERM, or until linger after process
// parent exited.
func RunKeeper(parent int, linger time.Duration) {
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		pidfd, err := unix.PidfdOpen(parent, 0)
		if err != nil {
			return // already gone
		}
		defer unix.Close(pidfd)
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); !errors.Is(err, unix.EINTR) {
				return
			}
		}
	}()
	select {
	case <-term:
		return
	case <-gone:
	}
	select {
	case <-term:
	case <-time.After(linger):
	}
}
