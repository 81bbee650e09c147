package routinglab

// The kernel's table in a namespace, as the daemons program it: a watcher
// that notes when the kernel holds a whole table (from the route
// notifications, at no cost to the daemons: no dumps while they work), and
// a count by dump to check the end state.
//
// Locking: a watcher's goroutine owns its socket and its set; the caller
// gets one value on the channel.

import (
	"errors"
	"net/netip"
	"time"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/rtnl"
)

// Routing protocols (rtm_protocol) of the routes the daemons install.
const (
	ProtoBird = 12  // BIRD's kernel protocol
	ProtoBGP  = 186 // zebra, for bgpd's routes
)

const tableMain = 254

// watchBuffer is the watcher's receive buffer: a full table's
// notifications arrive faster than a busy machine schedules the reader.
const watchBuffer = 256 << 20

// WatchKernelRoutes listens to the IPv4 route notifications of namespace
// ns and sends on the channel the time the kernel's main table first held
// n distinct prefixes of protocol proto (added and not deleted since the
// watch began). It sends the zero time when the socket overran (the count
// is lost: use CountKernelRoutes), after timeout, or after stop.
func WatchKernelRoutes(ns string, proto uint8, n int, timeout time.Duration) (done <-chan time.Time, stop func(), err error) {
	var c *rtnl.Conn
	if err := pktio.InNetns(ns, func() (err error) { c, err = rtnl.Open(rtnl.RTNLGRP_IPV4_ROUTE); return }); err != nil {
		return nil, nil, err
	}
	c.SetReceiveBuffer(watchBuffer)
	c.SetReadTimeout(200 * time.Millisecond)
	ch := make(chan time.Time, 1)
	quit := make(chan struct{})
	go func() {
		defer c.Close()
		held := make(map[netip.Prefix]struct{}, n)
		var r rtnl.Route
		for deadline := time.Now().Add(timeout); time.Now().Before(deadline); {
			select {
			case <-quit:
				ch <- time.Time{}
				return
			default:
			}
			b, err := c.Receive()
			if err != nil && !errors.Is(err, rtnl.ErrTimeout) {
				break // an overrun: no figure
			}
			for len(b) > 0 {
				h, body, rest, err := rtnl.NextMessage(b)
				if err != nil {
					break
				}
				b = rest
				if (h.Type != rtnl.RTM_NEWROUTE && h.Type != rtnl.RTM_DELROUTE) || r.Decode(body) != nil ||
					r.Protocol != proto || r.Table != tableMain {
					continue
				}
				p, ok := r.Prefix()
				if !ok {
					continue
				}
				if h.Type == rtnl.RTM_DELROUTE {
					delete(held, p)
					continue
				}
				if held[p] = struct{}{}; len(held) == n {
					ch <- time.Now()
					return
				}
			}
		}
		ch <- time.Time{}
	}()
	var stopped bool
	return ch, func() {
		if !stopped {
			stopped = true
			close(quit)
		}
	}, nil
}

// CountKernelRoutes dumps namespace ns's IPv4 routes and counts those of
// protocol proto in table main.
func CountKernelRoutes(ns string, proto uint8) (int, error) {
	var c *rtnl.Conn
	if err := pktio.InNetns(ns, func() (err error) { c, err = rtnl.Open(); return }); err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetReceiveBuffer(8 << 20)
	c.SetReadTimeout(5 * time.Second)
	n := 0
	var r rtnl.Route
	err := c.Dump(rtnl.RTM_GETROUTE, rtnl.AF_INET, func(_ rtnl.Header, body []byte) error {
		if r.Decode(body) == nil && r.Protocol == proto && r.Table == tableMain {
			n++
		}
		return nil
	}, nil)
	return n, err
}
