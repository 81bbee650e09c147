package fpm

// Who may speak FPM: every route a peer sends is installed, so only the
// routing daemon may connect. A peer whose socket is on this host (in the
// listener's namespace) is judged by the user owning that socket, as the
// kernel reports it (sockdiag.go): by default root and the users Debian's
// routing daemons run as (frr: zebra drops to it; bird). A peer that is not on this host cannot be asked for a user:
// it is refused unless its address is in an explicitly allowed network.
// A loopback peer whose socket cannot be found (it closed already) is
// refused too.
//
// Flow: Listen resolves the allowed users (Options.AllowUsers, or
// DefaultAllowUsers where they exist) and opens the diag socket; Serve
// calls admit for each accepted connection before anything is read from
// it.
//
// Locking: none of its own (the diag socket has its lock).

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/user"
	"slices"
	"strconv"
	"strings"
)

// DefaultAllowUsers are the users allowed when Options.AllowUsers is nil:
// root, and FRR's and BIRD's users where they exist.
var DefaultAllowUsers = []string{"0", "frr", "bird"}

// ResolveUsers turns user names or numeric uids into uids. With required,
// a name that does not exist is an error; without, it is left out (the
// defaults name daemons that may not be installed).
func ResolveUsers(names []string, required bool) ([]uint32, error) {
	var out []uint32
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if id, err := strconv.ParseUint(n, 10, 32); err == nil {
			out = append(out, uint32(id))
			continue
		}
		u, err := user.Lookup(n)
		if err != nil {
			if required {
				return nil, fmt.Errorf("fpm: allowed user %q: %w", n, err)
			}
			continue
		}
		id, err := strconv.ParseUint(u.Uid, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("fpm: user %q has uid %q", n, u.Uid)
		}
		out = append(out, uint32(id))
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// peer is what admission learned about a connection's other end.
type peer struct {
	addr  netip.AddrPort
	uid   uint32
	local bool // its socket is on this host: uid is its owner
}

// logArgs are the peer's attributes for a log line: its address, and its
// user when its socket is on this host.
func (p peer) logArgs() []any {
	if p.local {
		return []any{"peer", p.addr, "uid", p.uid}
	}
	return []any{"peer", p.addr, "local", false}
}

func (p peer) String() string {
	if p.local {
		return fmt.Sprintf("%s (uid %d)", p.addr, p.uid)
	}
	return p.addr.String() + " (not local)"
}

// admit decides whether a connection may speak FPM; why is the reason of a
// refusal ("" when admitted).
func (s *Server) admit(c net.Conn) (p peer, why string) {
	ra, ok1 := c.RemoteAddr().(*net.TCPAddr)
	la, ok2 := c.LocalAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return p, "not a TCP connection"
	}
	p.addr = ra.AddrPort()
	uid, err := s.diag.tcpOwner(p.addr, la.AddrPort())
	switch {
	case err == nil:
		p.uid, p.local = uid, true
		if !slices.Contains(s.uids, uid) {
			return p, "user not allowed"
		}
		return p, ""
	case !errors.Is(err, errNoSocket):
		return p, "owner unknown: " + err.Error()
	case p.addr.Addr().Unmap().IsLoopback():
		return p, "owner unknown: the peer's socket is gone"
	}
	a := p.addr.Addr().Unmap()
	for _, n := range s.opts.AllowNets {
		if n.Contains(a) {
			return p, ""
		}
	}
	return p, "remote peer not allowed"
}
