package main

// `netfwd restart [--ctl SOCKET] [--timeout D]`: a hot restart of the
// running daemon with this binary (an upgrade: install the new binary, run
// its `restart`). It finds the daemon behind the control socket's handover
// socket (its pid from the socket's peer credentials), starts this binary
// with the daemon's own command line plus --takeover, in the daemon's
// network namespace, working directory and environment (NOTIFY_SOCKET
// included: under systemd the new process reports itself as the main pid),
// detached in a session of its own, with the daemon's stderr where it can
// be opened (a pipe, a file, a terminal; else this command's), at the
// background priority (internal/daemon/priority.go). The new process
// takes the ports over while the old one forwards (internal/handover);
// this command waits, at the background priority too, until the old one
// has exited and the new one answers, and reports both pids. Exit 0 on
// success; 1 when the new process failed (the old one then forwards on:
// nothing changed), or when another restart was in progress: the running
// daemon refuses a second successor, naming the first
// (handover.BusyError), and this command says so.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/netfwd/netfwd/internal/ctlsock"
	"github.com/netfwd/netfwd/internal/daemon"
	"github.com/netfwd/netfwd/internal/handover"
	"golang.org/x/sys/unix"
)

func init() {
	register(command{
		name:  "restart",
		usage: "[--ctl SOCKET] [--timeout DURATION]   # hot restart: this binary takes the ports over from the running netfwd",
		run:   runRestart,
	})
}

func runRestart(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("restart", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ctl := fs.String("ctl", defaultCtl, "control socket of the running daemon")
	timeout := fs.Duration("timeout", time.Minute, "how long the new process may take to take over")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: netfwd restart", commands["restart"].usage)
		return 2
	}
	oldPid, err := handoverPeer(handover.Path(*ctl))
	if err != nil {
		fmt.Fprintf(stderr, "netfwd restart: %v\n", err)
		return 1
	}
	cmd, err := successorCommand(oldPid)
	if err != nil {
		fmt.Fprintf(stderr, "netfwd restart: %v\n", err)
		return 1
	}
	pidfd, err := unix.PidfdOpen(oldPid, 0)
	if err != nil {
		fmt.Fprintf(stderr, "netfwd restart: pidfd_open(%d): %v\n", oldPid, err)
		return 1
	}
	defer unix.Close(pidfd)
	pr, pw, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(stderr, "netfwd restart: %v\n", err)
		return 1
	}
	cmd.ExtraFiles = []*os.File{pw}
	cmd.Env = append(cmd.Env, takeoverStatusEnv+"=3")
	err = startInNetnsOf(oldPid, cmd)
	if err == nil {
		// Its session is an autogroup of its own, which weighs against
		// the running daemon's whole whatever its threads' nice: the
		// background too, before its start takes CPU (autogroup.go).
		if gerr := daemon.LowerSuccessorGroup(cmd.Process.Pid); gerr != nil {
			fmt.Fprintf(stderr, "netfwd restart: warning: %v\n", gerr)
		}
	}
	pw.Close()
	if err != nil {
		pr.Close()
		fmt.Fprintf(stderr, "netfwd restart: starting %s: %v\n", cmd.Path, err)
		return 1
	}
	// From here this command only waits: its wake-ups, its final query and
	// its exit take no CPU from the workers (both daemons' and the
	// successor's catching up).
	daemon.LowerPriority()
	statusLine := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(pr, 64<<10))
		pr.Close()
		statusLine <- strings.TrimSpace(string(b))
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(*timeout)
	for {
		select {
		case err := <-exited:
			why := <-statusLine
			if busy, ok := handover.ParseBusy(why); ok {
				fmt.Fprintf(stderr, "netfwd restart: %v\n", busy)
				return 1
			}
			if why == "" || why == "ok" {
				why = err.Error()
			}
			fmt.Fprintf(stderr, "netfwd restart: the new process (pid %d) failed: %s; pid %d forwards on\n",
				cmd.Process.Pid, why, oldPid)
			return 1
		default:
		}
		pfd := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		if n, _ := unix.Poll(pfd, 50); n > 0 { // the old daemon is gone
			// Gone for this successor, or for another restart's (this one
			// was refused, or failed): its status line says which.
			var why string
			select {
			case why = <-statusLine:
			case <-time.After(time.Until(deadline)):
				why = "no status within the timeout"
			}
			if why != "ok" {
				if busy, ok := handover.ParseBusy(why); ok {
					fmt.Fprintf(stderr, "netfwd restart: %v\n", busy)
					return 1
				}
				if why == "" {
					why = "it exited without a status"
				}
				fmt.Fprintf(stderr, "netfwd restart: the new process (pid %d) failed: %s; pid %d exited meanwhile\n", cmd.Process.Pid, why, oldPid)
				return 1
			}
			if _, err := ctlsock.Do(*ctl, []string{"link show"}, false); err != nil {
				fmt.Fprintf(stderr, "netfwd restart: pid %d exited but the new process (pid %d) does not answer: %v\n", oldPid, cmd.Process.Pid, err)
				return 1
			}
			fmt.Fprintf(stdout, "netfwd restarted: pid %d took over from pid %d\n", cmd.Process.Pid, oldPid)
			cmd.Process.Release()
			return 0
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(stderr, "netfwd restart: no takeover within %v; pid %d still runs, the new process (pid %d) is left running\n", *timeout, oldPid, cmd.Process.Pid)
			return 1
		}
	}
}

// handoverPeer returns the pid of the daemon listening on the handover
// socket at path.
func handoverPeer(path string) (int, error) {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return 0, fmt.Errorf("netfwd is not running (no handover socket at %s)", path)
		}
		return 0, err
	}
	defer c.Close()
	rc, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var cerr error
	rc.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if cerr != nil {
		return 0, cerr
	}
	return int(cred.Pid), nil
}

// successorCommand is this binary with the running daemon's arguments
// and --takeover, in its directory and environment.
func successorCommand(pid int) (*exec.Cmd, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, err
	}
	argv := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	i := slices.Index(argv, "run")
	if i < 0 {
		return nil, fmt.Errorf("pid %d is not `netfwd run` (%q)", pid, argv)
	}
	args := slices.Clone(argv[i:])
	if !slices.Contains(args, "--takeover") && !slices.Contains(args, "-takeover") {
		args = append(args, "--takeover")
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, args...)
	if cmd.Dir, err = os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err != nil {
		return nil, err
	}
	if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err == nil {
		cmd.Env = strings.Split(strings.TrimRight(string(env), "\x00"), "\x00")
	}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if f, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/2", pid), os.O_WRONLY|os.O_APPEND, 0); err == nil {
		cmd.Stdout, cmd.Stderr = f, f // the daemon's log goes on where it went
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd, nil
}

// The status pipe: `netfwd restart` gives the successor the write end as
// fd 3 (takeoverStatusEnv names it); the successor writes "ok" once it
// forwards, or its error, and closes it. The successor's log goes to the
// running daemon's stderr, where an operator does not look while the
// command fails: the reason comes back this way.
const takeoverStatusEnv = "NETFWD_TAKEOVER_STATUS_FD"

// statusPipe is the successor's end (nil: not started by netfwd restart).
type statusPipe struct{ f *os.File }

func takeoverStatus(takeover bool) *statusPipe {
	if !takeover || os.Getenv(takeoverStatusEnv) != "3" {
		return &statusPipe{}
	}
	os.Unsetenv(takeoverStatusEnv) // not for the twin keeper or the next restart
	unix.CloseOnExec(3)            // nor the fd: a child holding it would keep restart waiting for its end
	return &statusPipe{f: os.NewFile(3, "takeover status")}
}

func (s *statusPipe) running() {
	if s.f != nil {
		s.f.WriteString("ok\n")
		s.f.Close()
		s.f = nil
	}
}

func (s *statusPipe) failed(err error) {
	var busy *handover.BusyError
	if errors.As(err, &busy) {
		err = busy // as handover.ParseBusy reads it back
	}
	if s.f != nil {
		s.f.WriteString(err.Error() + "\n")
		s.f.Close()
		s.f = nil
	}
}

// startInNetnsOf starts cmd in the network namespace of process pid (a
// daemon started with `ip netns exec` lives in one) at the background
// priority: from a thread moved there, whose namespace and priority the child inherits;
// the thread is not given back to Go.
func startInNetnsOf(pid int, cmd *exec.Cmd) error {
	target, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return err
	}
	defer target.Close()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return err
	}
	defer self.Close()
	same, err := sameFile(target, self)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread dies with its namespace and priority.
		runtime.LockOSThread()
		if !same {
			if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
				errc <- err
				return
			}
		}
		// The successor prepares at the background priority and takes
		// the running daemon's when it takes over
		// (internal/daemon/priority.go): its start must not take CPU from
		// the forwarding it is about to replace.
		daemon.LowerThreadForSuccessor()
		errc <- cmd.Start()
	}()
	return <-errc
}

func sameFile(a, b *os.File) (bool, error) {
	var sa, sb unix.Stat_t
	if err := unix.Fstat(int(a.Fd()), &sa); err != nil {
		return false, err
	}
	if err := unix.Fstat(int(b.Fd()), &sb); err != nil {
		return false, err
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino, nil
}
