package kmirror

// Applying one batch of kernel messages: dump replies and notifications
// alike, in arrival order, in one FIB transaction; the cycle's dump phases
// advance on NLMSG_DONE, and the last one sweeps what the cycle did not
// see.
//
// Locking: Run's goroutine.

import (
	"time"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/fpm"
	"github.com/netfwd/netfwd/internal/rtnl"
)

// apply applies the batch in m.raw: dump replies (dump) or notifications.
func (m *Mirror) apply(dump bool) error {
	n := countMessages(m.raw)
	f := m.opts.FIB
	hint := n
	if n >= 64 && dump && phases[max(m.phase, 0)] == rtnl.RTM_GETROUTE {
		hint = max(n, f.Size()) // a dump replaces the table: in place
	}
	tx := f.Begin(hint)
	var restore func()
	if tx.Bulk() {
		tx.AllowChanges(1 << 22)
		restore = fpm.BulkGC()
	}
	next, restart := false, false
	for b := m.raw; len(b) > 0; {
		h, body, rest, err := rtnl.NextMessage(b)
		if err != nil {
			break // nothing to apply past a broken datagram
		}
		b = rest
		m.stats.Messages.Add(1)
		if dump {
			if m.phase < 0 || !m.dumpc.IsReply(h, m.dumpSeq) {
				continue // a reply to a request of an earlier cycle
			}
			switch h.Type {
			case rtnl.NLMSG_ERROR:
				errno, _ := rtnl.ErrnoOf(body)
				m.log.Warn("kmirror: dump refused", "kind", phases[m.phase], "errno", errno)
				fallthrough
			case rtnl.NLMSG_DONE:
				if m.phase == len(phases)-1 {
					m.endCycle(tx)
					restart = m.again
				} else {
					m.phase++
					next = true
				}
				continue
			}
		}
		m.handle(tx, h, body)
	}
	tx.Commit()
	if !m.first.IsZero() {
		m.stats.C.Lag.Observe(time.Since(m.first))
	}
	if restore != nil {
		restore()
	}
	m.stats.Batches.Add(1)
	m.noteBurst(n)
	m.flushNeigh()
	if next {
		if err := m.requestPhase(); err != nil {
			return err
		}
	}
	if restart {
		return m.startCycle("events during the last resync")
	}
	return nil
}

func countMessages(b []byte) int {
	n := 0
	for len(b) > 0 {
		_, _, rest, err := rtnl.NextMessage(b)
		if err != nil {
			break
		}
		b = rest
		n++
	}
	return n
}

// endCycle finishes a cycle: sweep unless something made its result
// doubtful (then the caller starts another).
func (m *Mirror) endCycle(tx *fib.Txn) {
	// A trigger from the held notifications asks for another cycle once
	// this one is done (phase stays set until the sweep).
	defer func() {
		m.phase = -1
		m.stats.Resyncing.Store(m.again)
	}()
	// The notifications of the cycle, in order, after the dump.
	for b := m.held; len(b) > 0; {
		h, body, rest, err := rtnl.NextMessage(b)
		if err != nil {
			break
		}
		b = rest
		m.handle(tx, h, body)
	}
	m.held = m.held[:0]
	if m.dirty {
		return
	}
	n := tx.SweepLearned(fib.OwnerKernel, m.mark)
	m.tr.SweepNexthops(tx, m.mark)
	for k, mark := range m.addrs {
		if mark != m.mark {
			tx.DelOwnedAddress(fib.OwnerKernel, k.dev, k.p)
			delete(m.addrs, k)
		}
	}
	if m.opts.Neigh != nil {
		for k, mark := range m.neighs {
			if mark != m.mark {
				m.nq = append(m.nq, NeighUpdate{Dev: k.dev, IP: k.ip, Delete: true})
				delete(m.neighs, k)
			}
		}
	}
	m.stats.Sweeps.Add(1)
	m.stats.SweptRoutes.Add(uint64(n))
	if !m.stats.Synced.Load() {
		m.log.Info("kmirror: following the kernel", "routes", m.stats.C.RoutesAdded.Load())
	} else if n > 0 {
		m.log.Info("kmirror: resync removed stale routes", "routes", n)
	}
	m.stats.Synced.Store(true)
}

// handle applies one message.
func (m *Mirror) handle(tx *fib.Txn, h rtnl.Header, body []byte) {
	switch h.Type {
	case rtnl.RTM_NEWLINK, rtnl.RTM_DELLINK:
		m.link(h, body)
	case rtnl.RTM_NEWADDR, rtnl.RTM_DELADDR:
		m.addr(tx, h, body)
	case rtnl.RTM_NEWROUTE, rtnl.RTM_DELROUTE:
		var r rtnl.Route
		if err := r.Decode(body); err != nil {
			return
		}
		if h.Type == rtnl.RTM_NEWROUTE {
			m.tr.NewRoute(tx, h.Flags, &r)
		} else {
			m.tr.DelRoute(tx, &r)
		}
	case rtnl.RTM_NEWNEXTHOP, rtnl.RTM_DELNEXTHOP:
		var n rtnl.Nexthop
		if err := n.Decode(body); err != nil {
			return
		}
		if h.Type == rtnl.RTM_NEWNEXTHOP {
			m.tr.NewNexthop(tx, &n)
		} else {
			m.tr.DelNexthop(tx, &n)
		}
	case rtnl.RTM_NEWNEIGH, rtnl.RTM_DELNEIGH:
		m.neigh(h, body)
	}
}

// link follows names and notices links going down or away: the kernel
// then flushes routes through them without telling.
func (m *Mirror) link(h rtnl.Header, body []byte) {
	var l rtnl.Link
	if err := l.Decode(body); err != nil {
		return
	}
	m.links.Apply(h.Type, body)
	m.tr.ForgetIfaces() // a rename or a reused index
	up := h.Type == rtnl.RTM_NEWLINK && l.Flags&rtnl.IFF_UP != 0
	was, known := m.up[l.Index]
	if h.Type == rtnl.RTM_DELLINK {
		delete(m.up, l.Index)
	} else {
		m.up[l.Index] = up
	}
	if known && was && !up {
		m.trigger("link down or removed")
	}
}

// addr records the kernel's addresses for source selection (not those of
// scope host).
func (m *Mirror) addr(tx *fib.Txn, h rtnl.Header, body []byte) {
	var a rtnl.Addr
	if err := a.Decode(body); err != nil || a.Family != rtnl.AF_INET {
		return
	}
	dev, ok := m.tr.Iface(a.Index)
	if !ok {
		return
	}
	k := addrKey{dev, a.Prefix()}
	if h.Type == rtnl.RTM_NEWADDR && a.Scope >= uint8(fib.ScopeHost) {
		// 127.0.0.1 on lo: the kernel never picks a host-scope address
		// as a source beyond the host (inet_select_addr skips scopes
		// wider than the route's); netfwd's addresses carry no scope.
		if _, had := m.addrs[k]; had {
			tx.DelOwnedAddress(fib.OwnerKernel, dev, k.p)
			delete(m.addrs, k)
		}
		return
	}
	if h.Type == rtnl.RTM_NEWADDR {
		tx.SetOwnedAddress(fib.OwnerKernel, dev, k.p, a.Flags&rtnl.IFA_F_SECONDARY != 0)
		m.addrs[k] = m.mark
		return
	}
	tx.DelOwnedAddress(fib.OwnerKernel, dev, k.p)
	delete(m.addrs, k)
	// Routes through a gateway that only this address made reachable are
	// flushed by the kernel without notifications.
	m.trigger("address removed")
}

var neighStates = []struct {
	nud  uint16
	name string
}{
	{rtnl.NUD_PERMANENT, "permanent"}, {rtnl.NUD_NOARP, "noarp"}, {rtnl.NUD_REACHABLE, "reachable"},
	{rtnl.NUD_STALE | rtnl.NUD_DELAY | rtnl.NUD_PROBE, "stale"},
}

// neigh queues a neighbour change for the hook.
func (m *Mirror) neigh(h rtnl.Header, body []byte) {
	if m.opts.Neigh == nil {
		return
	}
	var n rtnl.Neigh
	if err := n.Decode(body); err != nil || n.Family != rtnl.AF_INET || !n.Dst.Is4() {
		return
	}
	dev, ok := m.tr.Iface(n.IfIndex)
	if !ok {
		return
	}
	k := neighKey{dev, n.Dst}
	state := ""
	for _, s := range neighStates {
		if n.State&s.nud != 0 {
			state = s.name
			break
		}
	}
	if h.Type == rtnl.RTM_DELNEIGH || state == "" || !n.HasLLAddr && state != "noarp" {
		if _, had := m.neighs[k]; had {
			delete(m.neighs, k)
			m.nq = append(m.nq, NeighUpdate{Dev: dev, IP: n.Dst, Delete: true})
		}
		return
	}
	m.neighs[k] = m.mark
	m.nq = append(m.nq, NeighUpdate{Dev: dev, IP: n.Dst, MAC: n.LLAddr, State: state})
}

// flushNeigh hands the queued neighbour changes to the hook.
func (m *Mirror) flushNeigh() {
	for _, u := range m.nq {
		if err := m.opts.Neigh(u); err != nil {
			m.stats.NeighErrors.Add(1)
		}
	}
	m.nq = m.nq[:0]
}
