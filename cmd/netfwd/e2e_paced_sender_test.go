package main

// The tests' paced UDP generator: 64-frame batches from a host's interface
// at a fixed average rate, each sequence number sent exactly once.
//
// On these 2-vCPU machines the generator shares the CPUs with the router
// it measures. A generator kept off its CPU falls behind its schedule and
// then sends what it owes at once: behind by 100 ms at 178 kpps, that is
// one burst of ~18,000 frames, four times what a port's receive rings
// hold, which no link at that rate would send (measured during hot
// restarts: the successor's start takes a CPU for ~200 ms). So the
// generator reports how far behind it fell (pacedStats.maxLate), and
// pacedOptions.realtime runs it as a real-time thread (SCHED_FIFO, sleeping
// in clock_nanosleep until each batch's due time): what a tester on a machine of
// its own does, keeping its pace whatever the router's processes do. It
// still takes the CPU it needs from the router (half a core at 178 kpps),
// only never waits for it.
//
// Locking: the counters are atomics with one writer, the sender goroutine,
// which owns the rest; readers read them between windows.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/lab"
	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/pktio/afpacket"
)

// pacedOptions are the generator's options beyond rate and count.
type pacedOptions struct {
	stop     *atomic.Bool // set: stop after the current batch
	realtime bool         // run at SCHED_FIFO 1 (needs CAP_SYS_NICE; the sender fails without it)
	stats    *pacedStats  // where to report how it kept its schedule (nil: nowhere)
}

// pacedStats is how well the generator kept its schedule.
type pacedStats struct {
	maxLate   atomic.Int64 // the furthest behind schedule at a batch's start, ns
	maxLateAt atomic.Int64 // when (unix ns)
}

// reset starts a new measurement.
func (s *pacedStats) reset() { s.maxLate.Store(0); s.maxLateAt.Store(0) }

// note records that a batch started late by late.
func (s *pacedStats) note(late time.Duration) {
	if s != nil && int64(late) > s.maxLate.Load() {
		s.maxLate.Store(int64(late))
		s.maxLateAt.Store(time.Now().UnixNano())
	}
}

// startPacedUDP sends frames 0..total-1 (template with the sequence
// number in the first 8 bytes of the UDP payload) from host h at rate
// frames/s (0: as fast as it goes) in batches; a batch the kernel takes only
// in part is sent on from where it stopped, so every sequence number
// leaves exactly once. sent counts them; the channel gets the outcome when
// all are sent.
func startPacedUDP(t *testing.T, h *lab.Host, total, rate int, template []byte, sent *atomic.Uint64, stop *atomic.Bool) <-chan error {
	t.Helper()
	return startPacedUDPWith(t, h, total, rate, template, sent, pacedOptions{stop: stop})
}

// startPacedUDPWith is startPacedUDP with options.
func startPacedUDPWith(t *testing.T, h *lab.Host, total, rate int, template []byte, sent *atomic.Uint64, opts pacedOptions) <-chan error {
	t.Helper()
	if opts.realtime && rate <= 0 {
		t.Fatal("paced sender: a real-time sender needs a rate (unpaced, it would hold a CPU)")
	}
	var port *afpacket.Port
	err := pktio.InNetns(h.NS, func() error {
		var err error
		port, err = afpacket.Open(h.Iface, afpacket.Config{BlockSize: 1 << 16, Blocks: 2, Filter: dropAllFilter,
			NotPromiscuous: true, NoOffload: true, Tx: afpacket.TxSendmmsg})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	txh, err := port.NewTx()
	if err != nil {
		port.Close()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		defer func() { txh.Close(); port.Shutdown(); port.Close() }()
		wait := sleepUntil
		if opts.realtime {
			restore, err := realtimeThread()
			if err != nil {
				done <- err
				return
			}
			defer restore()
			wait = nanosleepUntil
		}
		const batch = 64
		start := time.Now()
		bufs := make([][]byte, batch)
		for i := range bufs {
			bufs[i] = bytes.Clone(template)
		}
		frames := make([][]byte, 0, batch)
		for seq := 0; seq < total && (opts.stop == nil || !opts.stop.Load()); seq += batch {
			if rate > 0 {
				due := start.Add(time.Duration(float64(seq) / float64(rate) * float64(time.Second)))
				wait(due)
				opts.stats.note(time.Since(due))
			}
			frames = frames[:0]
			for i := seq; i < min(seq+batch, total); i++ {
				f := bufs[i-seq]
				binary.BigEndian.PutUint64(f[14+28:], uint64(i)) // no UDP checksum: lab.UDPFrame leaves it 0
				frames = append(frames, f)
			}
			for tries := 0; len(frames) > 0; tries++ {
				n, err := txh.Send(frames, nil)
				frames = frames[n:]
				sent.Add(uint64(n))
				if err != nil && tries > 1000 {
					done <- fmt.Errorf("sender: %v", err)
					return
				}
				if len(frames) > 0 {
					wait(time.Now().Add(time.Millisecond))
				}
			}
		}
		done <- nil
	}()
	return done
}

// realtimeThread locks the calling goroutine to its thread and puts the
// thread at SCHED_FIFO 1; restore puts the thread's priority back and
// unlocks it. Not left to die with the goroutine: a process started from
// that thread earlier (the daemon, started with Pdeathsig) would be
// killed with it (it was: the daemon died after the first window).
func realtimeThread() (restore func(), err error) {
	runtime.LockOSThread()
	orig, err := unix.SchedGetAttr(0, 0)
	if err == nil {
		err = unix.SchedSetAttr(0, &unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: 1}, 0)
	}
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("paced sender: SCHED_FIFO: %w", err)
	}
	return func() {
		if unix.SchedSetAttr(0, orig, 0) == nil {
			runtime.UnlockOSThread() // else the thread stays at FIFO, locked, and dies with the goroutine
		}
	}, nil
}

// sleepUntil waits for t on the Go scheduler's timers.
func sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }

// nanosleepUntil waits for t in the calling thread (clock_nanosleep): a
// real-time thread runs again the moment the kernel's timer fires, without
// waiting for a Go timer to be run by a thread of normal priority.
func nanosleepUntil(t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	ts := unix.NsecToTimespec(int64(d))
	for unix.ClockNanosleep(unix.CLOCK_MONOTONIC, 0, &ts, &ts) == unix.EINTR {
	}
}
