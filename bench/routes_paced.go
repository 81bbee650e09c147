package bench

// Paced FPM streams: the full table sent to the real FPM server over
// loopback TCP at the rate zebra sends it, to measure how far netfwd's
// FIB lags behind the stream (issue 13's targets: complete within 0.5 s of
// zebra's last message on a first load, within zebra's replay time + 1 s
// after a netfwd restart).
//
//   fpm-paced-replay  400,000 routes/s: zebra replaying its table to a
//                     netfwd that just restarted (measured here: 901,899
//                     routes in 2.0-2.4 s), into a FIB that holds only the
//                     connected routes, as after a restart
//   fpm-paced-first   76,000 routes/s: zebra's first load of a full table
//                     learned over BGP (11.7-12.0 s for 901,899)
//   daemon-paced-replay, daemon-paced-first: the same streams into
//                     `netfwd run --fpm` as a child process (root), the
//                     daemon as deployed (compiled FIB, engine, metrics
//                     polled every 50 ms for the applied count)
//
// The writer sends what is due every 5 ms; lag = the last frame applied
// (the server's frame counter, counted after each commit) - the writer's
// last write.
//
// Locking: none; the writer goroutine owns the connection.

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/fpm"
)

// Zebra's FPM rates measured on this machine (issue 13).
const (
	zebraReplayRate    = 400_000 // routes/s, a replay after the listener restarted
	zebraFirstLoadRate = 76_000  // routes/s, the first load over BGP
)

// pacedRun is one paced load.
type pacedRun struct {
	write, applied time.Duration // from the first write
	cpu            time.Duration // this process, all threads
	batches, bulk  uint64
	maxBatch       time.Duration
}

func (r pacedRun) lag() time.Duration { return r.applied - r.write }

// pacedLoad streams s.NHG at rate routes/s to a fresh in-process server
// with the daemon's FIB options.
func (s *RoutesSetup) pacedLoad(rate float64, opts fib.Options) (pacedRun, error) {
	f := newRoutesFIBWith(opts)
	srv, c, err := loopbackFPM(f)
	if err != nil {
		return pacedRun{}, err
	}
	defer srv.Close()
	defer c.Close()
	r, err := pacedStream(c, s.NHG, uint64(len(s.Prefixes)+1), rate, srv.Stats().Frames.Load, cpuTime, 200*time.Microsecond)
	if err != nil {
		return r, err
	}
	st := srv.Stats()
	r.batches, r.bulk = st.Batches.Load(), st.BulkBatches.Load()
	r.maxBatch = time.Duration(st.MaxBatchNanos.Load())
	return r, expectRoutes(f, len(s.Prefixes))
}

// pacedStream writes stream (frames FPM frames) to c at rate frames/s and
// waits until applied() counts all of them (polled every poll).
func pacedStream(c net.Conn, stream []byte, frames uint64, rate float64, applied func() uint64,
	cpu func() time.Duration, poll time.Duration) (pacedRun, error) {
	perFrame := float64(len(stream)) / float64(frames)
	type wrote struct {
		at  time.Duration
		err error
	}
	done := make(chan wrote, 1)
	stop := make(chan struct{})
	defer close(stop)
	c0, t0 := cpu(), time.Now()
	go func() {
		pos := 0
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for pos < len(stream) {
			select {
			case <-tick.C:
			case <-stop:
				done <- wrote{err: errors.New("stopped")}
				return
			}
			due := min(len(stream), int(time.Since(t0).Seconds()*rate*perFrame))
			if due <= pos {
				continue
			}
			if _, err := c.Write(stream[pos:due]); err != nil {
				done <- wrote{err: err}
				return
			}
			pos = due
		}
		done <- wrote{at: time.Since(t0)}
	}()
	var r pacedRun
	deadline := t0.Add(5 * time.Minute)
	for applied() < frames {
		if time.Now().After(deadline) {
			return r, fmt.Errorf("%d of %d frames applied after 5 minutes", applied(), frames)
		}
		time.Sleep(poll)
	}
	r.applied, r.cpu = time.Since(t0), cpu()-c0
	w := <-done
	r.write = w.at
	return r, w.err
}

// pacedRecords runs the paced cases: in process, and against the daemon
// when root can build its topology (else a record says why not).
func (s *RoutesSetup) pacedRecords(o Options) ([]Record, error) {
	var recs []Record
	for _, c := range []struct {
		impl   string
		rate   float64
		target time.Duration
	}{
		{"fpm-paced-replay", zebraReplayRate, time.Second},
		{"fpm-paced-first", zebraFirstLoadRate, 500 * time.Millisecond},
	} {
		for _, where := range []string{"in-process", "daemon"} {
			var r pacedRun
			var err error
			impl := c.impl
			if where == "daemon" {
				impl = "daemon-" + strings.TrimPrefix(c.impl, "fpm-")
			}
			if !o.Wants(impl) {
				continue
			}
			if where == "daemon" {
				if os.Geteuid() != 0 {
					o.Log("%s: skipped: needs root (network namespaces)", impl)
					recs = append(recs, Record{Suite: "routes", Impl: impl, Extra: map[string]any{"error": "needs root"}})
					continue
				}
				r, err = daemonPacedLoad(s.Prefixes, c.rate)
			} else {
				r, err = s.pacedLoad(c.rate, fib.Options{Compiled: true})
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", impl, err)
			}
			recs = append(recs, pacedRecord(o, impl, len(s.Prefixes), c.rate, c.target, r))
		}
	}
	return recs, nil
}

func pacedRecord(o Options, impl string, routes int, rate float64, target time.Duration, r pacedRun) Record {
	o.Log("%-20s %4.0f K routes/s offered: written in %.3f s, applied %.3f s: lag %.3f s (target <= %v)  cpu %.3f s",
		impl, rate/1e3, r.write.Seconds(), r.applied.Seconds(), r.lag().Seconds(), target, r.cpu.Seconds())
	extra := map[string]any{"write_s": r.write.Seconds(), "applied_s": r.applied.Seconds(),
		"lag_s": r.lag().Seconds(), "target_lag_s": target.Seconds(), "cpu_seconds": r.cpu.Seconds()}
	if r.batches > 0 {
		extra["transactions"], extra["transactions_in_place"] = r.batches, r.bulk
		extra["longest_transaction_s"] = r.maxBatch.Seconds()
	}
	return Record{Suite: "routes", Impl: impl,
		Params: map[string]any{"routes": routes, "offered_routes_per_s": rate},
		NsOp:   float64(r.applied.Nanoseconds()) / float64(routes),
		Mops:   float64(routes) / r.applied.Seconds() / 1e6,
		Extra:  extra}
}

// daemonPacedLoad is pacedLoad against `netfwd run --fpm` as a child
// process in a veth topology (root): the daemon as deployed, its FIB
// options, engine and metrics included. Applied frames are read from its
// metrics every 20 ms.
func daemonPacedLoad(prefixes []netip.Prefix, rate float64) (r pacedRun, err error) {
	n, err := newVethNet(countAtH2, vethFAMAC)
	if err != nil {
		return r, err
	}
	defer func() { err = errors.Join(err, n.close()) }()
	child, err := startNetfwd(n.r, n.netfwdConfig(), "afpacket", -1, "--fpm", "127.0.0.1:0", "--metrics", "127.0.0.1:0")
	if err != nil {
		return r, err
	}
	defer func() { err = errors.Join(err, child.stop()) }()
	fpmAddr, metricsAddr, err := child.listenAddrs()
	if err != nil {
		return r, err
	}
	conn, oif, err := n.dialFPM(fpmAddr)
	if err != nil {
		return r, err
	}
	defer conn.Close()
	stream := fpm.FullTableStream(prefixes, netip.MustParseAddr(vethH2IP), oif, 31, true)
	applied := func() uint64 { return fpmApplied(metricsAddr) }
	return pacedStream(conn, stream, uint64(len(prefixes)+1), rate, applied, child.cpu, 50*time.Millisecond)
}
