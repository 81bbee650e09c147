// Package handover carries a hot restart: a new netfwd process takes the
// ports over from the running one while that one still forwards, so an
// upgrade under traffic loses nothing.
//
// Flow (the new process is the client, the running one the server, on a
// root-only unix socket beside the control socket, Path):
//
//	new -> old  prepare   (with the new one's protocol Version) old: its
//	                      own Version, and what it holds: per port the
//	                      receive sockets and ring layout
//	                      (afpacket.PortState) or the XDP map, program and
//	                      link (afxdp.PortState), the port lock, the
//	                      listeners (metrics, pprof, FPM), its pid
//	new: takes each descriptor out of the old process (pidfd_getfd, the
//	     same open socket, not a copy of its state), maps the rings, builds
//	     its engine from the config, opens its transmit handles: everything
//	     but reading. The old one forwards throughout.
//	new -> old  pause     old: its workers stop at a batch boundary (all
//	                      frames released); it answers the ring positions,
//	                      each worker's AF_XDP state (UMEM memfd, frame
//	                      states, sockets) and the neighbours it learned
//	                      since prepare (prepare carried the others)
//	new: continues every ring where the old reader stopped (its own
//	     positions and mappings: nothing shared changes yet)
//	new -> old  commit    (protocol 1.1) old: "committed": from here the
//	                      rings are the new one's and the old one never
//	                      reads them again
//	new: only now starts its workers (frames that arrived meanwhile wait in
//	     the rings) and lets them catch up with the rings before anything
//	     else runs
//	new -> old  done      old: exits, closing only its own copies
//
// What lies between pause and the new workers' first read is the gap the
// rings must hold (2,560 frames a queue by default: 22 ms at 115 kpps), so
// the pause carries only what changed since prepare.
//
// A stalled successor (stopped, swapping, a page-fault storm) costs at most
// CommitTimeout: a paused daemon that has not read commit within
// CommitTimeout of the pause resumes forwarding and closes the
// connection. Two readers of one ring would corrupt it (a slot released
// under the other reader, an AF_XDP frame given to the kernel twice), so
// the rule that they never read at once is this, and only this:
//
//   - the old daemon reads its rings again only if it has not answered
//     commit, and once it has answered it never does (commit and the
//     deadline are decided on the one goroutine that serves the
//     connection: whichever comes first wins, and the other never
//     happens);
//   - the new one reads a ring only after it has received that answer
//     ("committed") on the connection, and before it changes nothing the
//     old one uses (no XSKMAP entry, no socket name, no ring index: it
//     keeps its positions to itself).
//
// So a successor that wakes up after the deadline finds the connection
// closed (or its commit unanswered) and exits without reading; one that
// commits in time reads, and the old daemon, committed, waits for done and
// exits even if done never comes (the connection ends first: the new one
// crashed after it took the rings, which the old one can no longer
// continue; it exits non-zero, so a supervisor starts netfwd afresh). If
// the answer to commit cannot be written (the successor's end is closed),
// the successor cannot have read it: the old daemon resumes. What neither
// side can resolve is an answer lost in between: an old daemon that
// stalls for longer than the successor waits for the answer (10 s) after
// it read commit, and writes it into a connection the successor is only
// about to close. The successor exits without reading, the old daemon
// finds the connection ended after its commit and exits 1 as above: no
// two readers, but nobody forwards until the supervisor starts netfwd.
// A successor that stalls after the commit stalls the router (it is the
// router then), as a stall of the running daemon would.
//
// The new process's control and handover sockets take their names over
// from the old ones (by rename) only once the commit is answered: a
// successor that gives up before leaves the old daemon reachable under
// them, as if nothing had happened.
//
// If the new process goes away after pause and before commit, the old one
// resumes forwarding at once: a failed upgrade costs a pause, never the
// router.
//
// A successor that speaks protocol 1.0 (before versions: it sends none)
// knows no commit: it reads right after pause and says done after its
// workers caught up. With it the old daemon keeps the 1.0 rule (it resumes
// if done has not come PauseTimeout after pause, or the connection ends),
// and a new successor of a 1.0 daemon skips commit likewise.
//
// Versions (Version): the protocol is MAJOR.MINOR. A hot restart needs
// the same major version on both sides; a successor whose major differs is
// refused at prepare, before anything is paused, with a VersionError that
// names both ("handover protocol: this netfwd speaks 2.0, the running one
// 1.1; ..."), and the running daemon forwards on. Within a major version:
//
//   - a field added later is optional: an older peer ignores it (JSON
//     decoding skips unknown fields) and a newer one works without it
//     (its zero value means what the older protocol did);
//   - a new step is a minor version: a side uses it only when the peer's
//     minor version has it (commit: 1.1), and falls back to the older
//     exchange otherwise;
//   - anything an older peer of the same major version would misread (a
//     changed encoding or meaning of a field, a step it cannot do without)
//     is a new major version.
//
// Frozen across all versions, so that any two can tell each other so:
// the request line {"op":"prepare","version":"M.N"} and Prepared's
// Version, Busy and Error fields. A peer that sends no version speaks 1.0:
// the protocol of netfwd up to 0c89dec (and 7e71f58, which added the
// optional Journal and Busy).
//
// One restart at a time: while a successor's exchange is in progress (from
// its prepare; for good once it took over), the prepare of any other is
// refused at once with a BusyError naming the pid of the one in progress
// (server.go); that one proceeds.
//
// Locking: a Server serves one successor at a time; the Source's methods
// are called from that successor's goroutine.
package handover

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/netfwd/netfwd/internal/pktio/afpacket"
	"github.com/netfwd/netfwd/internal/pktio/afxdp"
)

// Path is the handover socket of the daemon whose control socket is ctl.
func Path(ctl string) string { return ctl + ".handover" }

// Version is a handover protocol version, MAJOR.MINOR (see the package
// comment for the compatibility rule).
type Version struct{ Major, Minor int }

// V1 is the version of a peer that sends none: netfwd before versions.
var V1 = Version{1, 0}

// Protocol is the version this netfwd speaks. 1.1: the version fields and
// the commit step. (A variable only so that tests can pose as another
// version.)
var Protocol = Version{1, 1}

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// ParseVersion reads MAJOR.MINOR; "" (a peer that sends no version) is V1.
func ParseVersion(s string) (Version, error) {
	if s == "" {
		return V1, nil
	}
	ma, mi, ok := strings.Cut(s, ".")
	major, err1 := strconv.Atoi(ma)
	minor, err2 := strconv.Atoi(mi)
	if !ok || err1 != nil || err2 != nil || major < 0 || minor < 0 {
		return Version{}, fmt.Errorf("handover protocol: version %q is not MAJOR.MINOR", s)
	}
	return Version{major, minor}, nil
}

// Compatible: a hot restart between the two needs the same major version.
func (v Version) Compatible(w Version) bool { return v.Major == w.Major }

// Has reports whether a peer of version v knows what minor version minor
// of its major version added.
func (v Version) Has(minor int) bool { return v.Minor >= minor }

// VersionError refuses a hot restart between two major versions: This is
// the successor's (the netfwd that runs `netfwd restart`), Running the
// running daemon's.
type VersionError struct{ This, Running Version }

func (e *VersionError) Error() string {
	return fmt.Sprintf("handover protocol: this netfwd speaks %s, the running one %s; a hot restart needs the same major version: "+
		"stop the running netfwd and start this one instead (docs/reliability.md, \"Hot restart\")", e.This, e.Running)
}

// Port is one port as the running process holds it.
type Port struct {
	afpacket.PortState
	// Control is the host path's control ring of the port (nil: none).
	Control *afpacket.PortState `json:",omitempty"`
	// LockFD is the port lock's listening socket (portlock.go).
	LockFD int
	// IO is the port's backend: "afpacket" (PortState, Control) or
	// "afxdp" (XDP; PortState carries only the name).
	IO string
	// XDP is an AF_XDP port's socket map, program and link.
	XDP *afxdp.PortState `json:",omitempty"`
}

// Listener is a listening socket to take over instead of binding anew
// (the address is still the old process's until it exits).
type Listener struct {
	Addr string
	FD   int
}

// Prepared answers prepare.
type Prepared struct {
	// Version is the running daemon's protocol version ("": 1.0, from
	// before versions).
	Version string `json:",omitempty"`
	PID     int
	// Workers is the running process's --workers: AF_XDP sockets and
	// UMEMs are handed over worker by worker, by index.
	Workers int
	// XDPMemFDs are the datapath workers' UMEM memfds (by worker index):
	// the successor maps them before the pause.
	XDPMemFDs map[int]int `json:",omitempty"`
	Ports     []Port
	Listeners map[string]Listener // by purpose: "metrics", "pprof", "fpm"
	// Neighbours are the neighbours the running process has learned so
	// far: the successor installs them before the pause, so the pause
	// carries only the few learned (or changed) since.
	Neighbours []Neighbour `json:",omitempty"`
	// Journal is the config lines the control socket applied since start,
	// one slice a request, in order (internal/daemon/journal.go): the
	// successor applies them after its config file. The running daemon
	// refuses ctl changes from here on, so it is final.
	Journal [][]string `json:",omitempty"`
	// Busy refuses the successor: the pid of the restart in progress
	// (Error says so too, for clients that do not know the field).
	Busy  int    `json:",omitempty"`
	Error string `json:",omitempty"`
}

// BusyError is the refusal of a successor while another restart is in
// progress: PID is that restart's new process.
type BusyError struct{ PID int }

func (e *BusyError) Error() string {
	return fmt.Sprintf("another restart (pid %d) is in progress", e.PID)
}

// ParseBusy reads a BusyError back from its text (a successor reports its
// failure to `netfwd restart` as a line of text).
func ParseBusy(s string) (*BusyError, bool) {
	var pid int
	if n, err := fmt.Sscanf(s, "another restart (pid %d) is in progress", &pid); n != 1 || err != nil || pid <= 0 {
		return nil, false
	}
	if (&BusyError{pid}).Error() != s {
		return nil, false
	}
	return &BusyError{PID: pid}, true
}

// Paused answers pause: where each ring's reader stopped, and the
// neighbours the old process learned or changed since prepare.
type Paused struct {
	Positions        map[string][]afpacket.QueuePosition
	ControlPositions map[string][]afpacket.QueuePosition `json:",omitempty"`
	// XDP is each datapath worker's AF_XDP state (UMEM memfd, frames,
	// sockets), by worker index.
	XDP        map[int]afxdp.WorkerState `json:",omitempty"`
	Neighbours []Neighbour
	// Took is how long the running process took from reading pause to
	// answering (the rest of the successor's wait is the way there and
	// back: scheduling, mostly).
	Took  time.Duration
	Error string `json:",omitempty"`
}

// Neighbour is a learned neighbour entry. The new process installs it
// STALE: usable at once, confirmed on first use, as the kernel treats an
// entry it has not confirmed lately.
type Neighbour struct {
	Dev    string
	IP     netip.Addr
	LLAddr [6]byte
}

// request is what the client sends: one op per line.
type request struct {
	Op string `json:"op"` // prepare, pause, commit (1.1), done
	// Version is the successor's protocol version, sent with prepare
	// ("": 1.0).
	Version string `json:"version,omitempty"`
}

// reply to commit: Committed is the old daemon's word that it will not
// read the rings again; anything else (an error, the connection's end)
// means it did not commit.
type commitReply struct {
	Committed bool   `json:",omitempty"`
	Error     string `json:",omitempty"`
}

// reply to done.
type doneReply struct {
	Error string `json:",omitempty"`
}
