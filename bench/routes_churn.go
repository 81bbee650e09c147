package bench

// routeChurn: the route changes of benchmark 4(c), as zebra would stream
// them over FPM for a loaded table, and the paced writer that sends them.
//
// Changes, one FPM frame each: a random prefix of the table gets its
// nexthop switched between the two nexthop objects (RTM_NEWROUTE with the
// other RTA_NH_ID, create|replace) or, one time in five, is withdrawn
// (RTM_DELROUTE); a withdrawn prefix picked again is announced again.
// Every hotEvery-th change is one of the "hot" prefix (the destination of
// the traffic): its nexthop alternates between the two objects, one time
// as a plain replace, the next as RTM_DELROUTE + RTM_NEWROUTE in one frame
// (what zebra sends for some changes): a lookup must never find the hot
// prefix missing.
//
// The writer sends what is due at the rate (changes/s) every tick, catching
// up after a late wake-up, until stopped.
//
// Locking: a routeChurn belongs to one goroutine (the writer); its counts
// are read after the writer stopped.

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/netfwd/netfwd/internal/fpm"
	"github.com/netfwd/netfwd/internal/rtnl"
)

// churnRate is the target of the issue: route changes per second.
const churnRate = 10_000

// hotEvery: one change in hotEvery is the hot prefix's (100/s at churnRate).
const hotEvery = 100

// Per-prefix states of the churned table.
const (
	viaFirst  = 0 // the route uses nexthop object nhids[0]
	viaSecond = 1 // nhids[1]
	withdrawn = 2
)

type routeChurn struct {
	prefixes []netip.Prefix
	state    []uint8
	nhids    [2]uint32
	hot      netip.Prefix
	hotVia   int // hot's current nexthop (index into nhids)
	rng      *rand.Rand

	// Counts of changes sent, by kind.
	changes, replaced, withdrawals, announced, hotChanges, hotDelAdd uint64
	messages                                                         uint64 // netlink messages (a del+add frame is two)
}

// newRouteChurn churns prefixes (all via nhids[0] at the start) and the hot
// prefix (also via nhids[0]).
func newRouteChurn(prefixes []netip.Prefix, hot netip.Prefix, nhids [2]uint32, seed uint64) *routeChurn {
	return &routeChurn{prefixes: prefixes, state: make([]uint8, len(prefixes)), nhids: nhids, hot: hot,
		rng: rand.New(rand.NewPCG(seed, 0x636875726e))}
}

// withdrawnNow is the number of table prefixes withdrawn at this point.
func (c *routeChurn) withdrawnNow() int { return int(c.withdrawals - c.announced) }

// appendChange appends the next change's frame to b.
func (c *routeChurn) appendChange(b []byte) []byte {
	c.changes++
	if c.changes%hotEvery == 0 {
		return c.appendHot(b)
	}
	i := c.rng.IntN(len(c.prefixes))
	z := fpm.ZebraRoute{Prefix: c.prefixes[i], Metric: 20}
	c.messages++
	switch {
	case c.state[i] == withdrawn:
		c.state[i], z.NHID = viaFirst, c.nhids[viaFirst]
		c.announced++
		return fpm.AppendNewRoute(b, &z)
	case c.rng.IntN(5) == 0:
		c.state[i] = withdrawn
		c.withdrawals++
		return fpm.AppendDelRoute(b, &z)
	default:
		c.state[i] ^= 1
		z.NHID = c.nhids[c.state[i]]
		c.replaced++
		return fpm.AppendNewRoute(b, &z)
	}
}

// appendHot switches the hot prefix to its other nexthop.
func (c *routeChurn) appendHot(b []byte) []byte {
	c.hotChanges++
	c.hotVia ^= 1
	z := fpm.ZebraRoute{Prefix: c.hot, Metric: 20, NHID: c.nhids[c.hotVia]}
	if c.hotChanges%2 == 1 {
		c.messages++
		return fpm.AppendNewRoute(b, &z)
	}
	// RTM_DELROUTE + RTM_NEWROUTE in one frame: build both framed, then
	// frame their netlink messages together.
	c.hotDelAdd++
	c.messages += 2
	msgs := fpm.AppendDelRoute(nil, &z)[fpm.HeaderLen:]
	msgs = append(msgs, fpm.AppendNewRoute(nil, &z)[fpm.HeaderLen:]...)
	return fpm.AppendFrame(b, msgs)
}

// churnStats is what a writer sent.
type churnStats struct {
	elapsed time.Duration
	late    time.Duration // the longest a tick's changes were behind schedule
}

func (s churnStats) rate(c *routeChurn) float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(c.changes) / s.elapsed.Seconds()
}

// writeChurn sends c's changes to w at rate per second, every tick, until
// stop closes; it returns when the last write is done.
func writeChurn(w io.Writer, c *routeChurn, rate float64, tick time.Duration, stop <-chan struct{}) (churnStats, error) {
	var st churnStats
	buf := make([]byte, 0, 64<<10)
	start := time.Now()
	t := time.NewTicker(tick)
	defer t.Stop()
	sent := uint64(0)
	for {
		select {
		case <-stop:
			st.elapsed = time.Since(start)
			return st, nil
		case <-t.C:
		}
		now := time.Since(start)
		due := uint64(rate * now.Seconds())
		if due > sent+uint64(rate*tick.Seconds())+1 {
			// More than one tick behind: how late the oldest change is.
			st.late = max(st.late, now-time.Duration(float64(sent)/rate*float64(time.Second)))
		}
		buf = buf[:0]
		for ; sent < due; sent++ {
			buf = c.appendChange(buf)
		}
		if len(buf) > 0 {
			if _, err := w.Write(buf); err != nil {
				st.elapsed = time.Since(start)
				return st, fmt.Errorf("churn: %w", err)
			}
		}
	}
}

// churnBase is the stream that loads the churned table as zebra sends it:
// the first nexthop object (gateway gw[0] on interface oif) and every
// prefix via it, then the second object (gw[1]) and the hot prefix. It
// returns the stream and its number of netlink messages.
func churnBase(prefixes []netip.Prefix, hot netip.Prefix, nhids [2]uint32, gw [2]netip.Addr, oif uint32) ([]byte, uint64) {
	b := fpm.FullTableStream(prefixes, gw[0], oif, nhids[0], true)
	b = fpm.AppendNexthop(b, &rtnl.Nexthop{Family: rtnl.AF_INET, Protocol: 11, ID: nhids[1], OIF: oif, Gateway: gw[1]}, false)
	b = fpm.AppendNewRoute(b, &fpm.ZebraRoute{Prefix: hot, Metric: 20, NHID: nhids[0]})
	return b, uint64(1 + len(prefixes) + 2)
}

// withoutPrefix returns prefixes without p (the hot prefix is not churned
// like the others).
func withoutPrefix(prefixes []netip.Prefix, p netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(prefixes))
	for _, q := range prefixes {
		if q != p {
			out = append(out, q)
		}
	}
	return out
}
