package bench

// reflector: the I/O-only AF_XDP forwarder of the veth suite: pktio's
// AF_XDP backend with nothing of netfwd's engine between receive and
// transmit. Frames received on the router's ingress get the next hop's
// MAC, the egress port's MAC and TTL-1 (incremental checksum), and leave
// the egress port by descriptor from the same UMEM. What netfwd with AF_XDP
// adds to it is the engine; what it costs is the backend's floor.
//
// Flow: one worker (afxdp.Worker) with a socket on each port's queue 0, in a
// goroutine locked to its OS thread (pinned to a CPU when asked): Wait,
// TryRecv on the ingress socket, rewrite, Send on the egress socket.
//
// Locking: none; the loop's goroutine owns the worker until stop.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/pktio/afxdp"
)

type reflector struct {
	in, out *afxdp.Port
	w       *afxdp.Worker
	sin     *afxdp.Socket
	sout    *afxdp.Socket
	nextHop net.HardwareAddr
	batch   int
	tid     int // the loop's thread
	done    chan error
}

// reflectorConfig tunes the reflector (the suite uses the zero value:
// pktio's defaults, batches of 256).
type reflectorConfig struct {
	port   afxdp.PortConfig
	worker afxdp.WorkerConfig
	batch  int
}

// startReflector forwards from port in to port out (namespace ns), frames
// to nextHop; cpu >= 0 pins the loop's thread to that CPU.
func startReflector(ns, in, out string, nextHop net.HardwareAddr, cpu int, cfg reflectorConfig) (*reflector, error) {
	if cfg.batch == 0 {
		cfg.batch = 256
	}
	r := &reflector{nextHop: nextHop, batch: cfg.batch, done: make(chan error, 1)}
	err := pktio.InNetns(ns, func() error {
		var err error
		if r.in, err = afxdp.Open(in, cfg.port); err != nil {
			return err
		}
		r.out, err = afxdp.Open(out, cfg.port)
		return err
	})
	if err != nil {
		r.close()
		return nil, err
	}
	if r.w, err = afxdp.NewWorker(cfg.worker); err != nil {
		r.close()
		return nil, err
	}
	if r.sin, err = r.w.Bind(r.in, 0); err == nil {
		r.sout, err = r.w.Bind(r.out, 0)
	}
	if err != nil {
		r.close()
		return nil, err
	}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if cpu >= 0 {
			var set unix.CPUSet
			set.Set(cpu)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				started <- fmt.Errorf("pin reflector to CPU %d: %w", cpu, err)
				return
			}
		}
		r.tid = unix.Gettid()
		started <- nil
		r.done <- r.loop()
	}()
	if err := <-started; err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// cpu is the CPU time of the loop's thread so far.
func (r *reflector) cpu() time.Duration {
	return statCPU(fmt.Sprintf("/proc/self/task/%d/stat", r.tid))
}

// diag reads the reflector's counters: frames its sockets dropped (not
// received: fill ring empty, RX ring full; or not sent), transmit kicks,
// and the waits that blocked in poll(2) (a wake-up each).
func (r *reflector) diag() fwdDiag {
	in, out := r.in.XDPStats(), r.out.XDPStats()
	ws := r.w.WaitStats()
	return fwdDiag{drops: in.Rx.RingDrops + out.Tx.Errors + out.Tx.Refused, fillEmpty: in.FillRingEmpty,
		sent: out.Tx.Packets, kicks: out.TxKicks, kickAgain: out.TxKickAgain, waits: ws.Waits, blocked: ws.Blocked}
}

// Mode is the sockets' data path ("native copy").
func (r *reflector) Mode() string { return r.sin.Mode() }

func (r *reflector) loop() error {
	frames, meta := make([][]byte, r.batch), make([]pktio.Meta, r.batch)
	src := r.out.MAC
	for {
		if err := r.w.Wait(); err != nil {
			return err
		}
		n, err := r.sin.TryRecv(frames, meta)
		if err != nil {
			return err
		}
		if n == 0 {
			continue
		}
		for _, f := range frames[:n] {
			rewrite(f, r.nextHop, src)
		}
		if _, err := r.sout.Send(frames[:n], nil); err != nil {
			return err
		}
	}
}

// rewrite sets the MACs and, for IPv4, decrements the TTL with the
// incremental checksum update (RFC 1624: the TTL is the high byte of its
// 16-bit word, so the checksum gains 0x0100).
func rewrite(f []byte, dst, src net.HardwareAddr) {
	if len(f) < 34 {
		return
	}
	copy(f[0:6], dst)
	copy(f[6:12], src)
	if binary.BigEndian.Uint16(f[12:]) != 0x0800 || f[22] <= 1 {
		return
	}
	f[22]--
	sum := uint32(binary.BigEndian.Uint16(f[24:])) + 0x0100
	binary.BigEndian.PutUint16(f[24:], uint16(sum+sum>>16))
}

// stop ends the loop and releases everything; it returns the loop's
// error other than the shutdown itself.
func (r *reflector) stop() error {
	r.w.Shutdown()
	err := <-r.done
	if errors.Is(err, pktio.ErrClosed) {
		err = nil
	}
	return errors.Join(err, r.close())
}

func (r *reflector) close() error {
	var errs []error
	if r.w != nil {
		errs = append(errs, r.w.Close())
	}
	for _, p := range []*afxdp.Port{r.in, r.out} {
		if p != nil {
			errs = append(errs, p.Close())
		}
	}
	return errors.Join(errs...)
}
