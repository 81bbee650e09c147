// Package handover carries a hot restart: a new netfwd process takes the
// ports over from the running one while that one still forwards, so an
// upgrade under traffic loses nothing.
//
// Flow (the new process is the client, the running one the server, on a
// root-only unix socket beside the control socket, Path):
//
//	new -> old  prepare   old: what it holds: per port the receive sockets
//	                      and ring layout (afpacket.PortState) or the XDP
//	                      map, program and link (afxdp.PortState), the port lock,
//	                      the listeners (metrics, pprof, FPM), its pid
//	new: takes each descriptor out of the old process (pidfd_getfd, the
//	     same open socket, not a copy of its state), maps the rings, builds
//	     its engine from the config, opens its transmit handles: everything
//	     but reading. The old one forwards throughout.
//	new -> old  pause     old: its workers stop at a batch boundary (all
//	                      frames released); it answers the ring positions,
//	                      each worker's AF_XDP state (UMEM memfd, frame
//	                      states, sockets) and the neighbours it learned
//	                      since prepare (prepare carried the others)
//	new: continues every ring where the old reader stopped, starts its
//	     workers (frames that arrived meanwhile wait in the rings), and
//	     lets them catch up with the rings before anything else runs
//	new -> old  done      old: exits, closing only its own copies
//
// What lies between pause and the new workers' first read is the gap the
// rings must hold (2,048 frames a queue by default: 18 ms at 115 kpps), so
// the pause carries only what changed since prepare.
//
// If the new process goes away (or says nothing for PauseTimeout) after
// pause and before done, the old one resumes forwarding: a failed upgrade
// costs a pause, never the router.
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
	"time"

	"github.com/netfwd/netfwd/internal/pktio/afpacket"
	"github.com/netfwd/netfwd/internal/pktio/afxdp"
)

// Path is the handover socket of the daemon whose control socket is ctl.
func Path(ctl string) string { return ctl + ".handover" }

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
	PID int
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
	Op string `json:"op"` // prepare, pause, done
}

// reply to done.
type doneReply struct {
	Error string `json:",omitempty"`
}
