package afxdp

// xdpconfig: the knobs of the AF_XDP backend, their defaults and their
// validation. PortConfig is per interface (the steering program),
// WorkerConfig per worker (its UMEM, rings and waiting policy).
//
// Locking: none; values copied at Open / NewWorker.

import (
	"fmt"
	"time"

	"github.com/netfwd/netfwd/internal/pktio/afpacket"
)

// PortConfig configures Open. The zero value is usable.
type PortConfig struct {
	// Attach selects native or generic XDP; default auto (native first).
	Attach Attach
	// Queues is the number of the interface's queues that sockets may be
	// bound to (their map slots). Default (0): all it has.
	Queues int
	// Tx configures the AF_PACKET transmit handles NewTx opens for
	// goroutines that own no socket on the port. Default: Config's.
	Tx afpacket.Config
	// NAPIDefer, when HardIRQs > 0, sets the interface's NAPI deferral
	// while the port is open (napidefer.go), for workers that busy-poll
	// (WorkerConfig.NAPIBusyPoll). Default: the interface as it is.
	NAPIDefer NAPIDefer
}

// WorkerConfig configures NewWorker. The zero value is usable.
type WorkerConfig struct {
	// Frames is the number of UMEM frames the worker owns, shared by its
	// sockets (fill rings, received frames held by the engine, frames in
	// flight on transmit). Default 2*RingSize (32768: 64 MiB of 2 KiB
	// frames).
	Frames int
	// FrameSize is the size of one UMEM frame: 2048 or 4096. The kernel
	// keeps XDP_PACKET_HEADROOM (256) bytes in front of each received
	// frame, so the largest frame is FrameSize-256. Default 2048.
	FrameSize int
	// RingSize is the number of entries of each socket's four rings (a
	// power of two). Default 16384: the fill rings are what the kernel
	// receives into while the scheduler keeps the worker off the CPU
	// (measured on the loaded 2-core test machine, one core each: with
	// 8192-entry rings, 6144 frames in the ingress fill ring, the
	// reflector lost 0-32 % of 300,000 frames to an empty fill ring;
	// with 16384, 0-0.5 %).
	RingSize int
	// FillPerSocket is the number of frames each socket keeps in its fill
	// ring: the frames the kernel can receive on that queue while the
	// worker is away (a worker descheduled for 40 ms at 0.1 Mpps needs
	// 4000: seen on a loaded machine). Default RingSize, lowered to three
	// quarters of Frames shared among the sockets.
	FillPerSocket int
	// Sockets is the number of sockets the worker is expected to bind (the
	// ports it serves): the fill rings are sized for at least that many
	// from the first Bind on (see FillPerSocket). Default 0: sized for the
	// sockets bound so far.
	Sockets int
	// Headroom is the number of writable bytes in front of every received
	// frame included at the start of the slices Recv returns, as in
	// Config.Headroom (0..256). Default 0.
	Headroom int
	// NoZeroCopy skips the XDP_ZEROCOPY bind attempt (copy mode always).
	NoZeroCopy bool
	// TxBudget is XDP_MAX_TX_SKB_BUDGET: how many frames one transmit kick
	// sends in copy mode (the kernel's default is 32, its range 32..RingSize;
	// larger values are lowered to RingSize). Default 256.
	TxBudget int
	// Spin is how long Wait polls the rings before it parks in the netpoller.
	// Spinning saves the wake-up (a few microseconds) when frames arrive
	// back to back, and burns a core when they do not. Default 50 µs;
	// negative: never spin.
	Spin time.Duration
	// BusyPoll is how long Wait spins while traffic flows: after a Wait
	// that found frames (spinning or woken), the next one spins for
	// BusyPoll instead of Spin before it blocks. 0: Spin always.
	BusyPoll time.Duration
	// NAPIBusyPoll turns on the kernel's preferred busy polling on every
	// socket (SO_PREFER_BUSY_POLL, SO_BUSY_POLL of this duration in µs,
	// SO_BUSY_POLL_BUDGET NAPIBudget): while Wait spins it asks the kernel
	// to run the device's receive NAPI in the worker's thread (a
	// recvfrom(MSG_DONTWAIT) per socket and round), so the receive work
	// (on veth in copy mode: the XDP program and the copy into the UMEM)
	// moves from the CPU that sent the frame to the worker's, in batches
	// of up to NAPIBudget. It pays off when the device's interrupts (veth:
	// its NAPI scheduling by the sender) stay deferred while the worker
	// polls: the interface's napi_defer_hard_irqs and gro_flush_timeout
	// (PortConfig.NAPIDefer); without them the sender's CPU still runs
	// most of the NAPI polls (measured on veth: docs/pktio.md). 0: off
	// (default).
	NAPIBusyPoll time.Duration
	// NAPIBudget is SO_BUSY_POLL_BUDGET: frames one busy poll may take
	// from the device. Default 256 (with NAPIBusyPoll).
	NAPIBudget int
}

const (
	defaultXDPFrameSize = 2048
	defaultXDPRingSize  = 16384
	defaultXDPTxBudget  = 256
	defaultXDPSpin      = 50 * time.Microsecond
	defaultSndBuf       = 4 << 20 // as AF_PACKET's transmit sockets
	defaultNAPIBudget   = 256
	xdpPacketHeadroom   = 256 // XDP_PACKET_HEADROOM
)

// UMEM sizing for WithUMEMBytes: at least 8 MiB of 2 KiB frames, at most
// the 64 MiB default.
const (
	minSizedXDPFrames = 4096
	maxSizedXDPFrames = 2 * defaultXDPRingSize
)

// WithUMEMBytes sizes a UMEM left unset (Frames and RingSize zero) to about
// bytes: Frames = bytes / FrameSize, between 4096 and 32768, and RingSize
// half of that rounded down to a power of two (at most the default 16384).
// A caller that knows how many ports a worker serves (the daemon: 12 MiB of
// frames a port, docs/pktio.md) keeps memory per port bounded; the fill
// rings get the usual three quarters of the frames. A set Frames or
// RingSize is kept.
func (cfg WorkerConfig) WithUMEMBytes(bytes int) WorkerConfig {
	if cfg.Frames != 0 || cfg.RingSize != 0 {
		return cfg
	}
	fs := cfg.FrameSize
	if fs == 0 {
		fs = defaultXDPFrameSize
	}
	cfg.Frames = min(max(bytes/fs, minSizedXDPFrames), maxSizedXDPFrames)
	cfg.RingSize = 1
	for cfg.RingSize*2 <= cfg.Frames/2 && cfg.RingSize < defaultXDPRingSize {
		cfg.RingSize *= 2
	}
	return cfg
}

func (cfg WorkerConfig) withDefaults() (WorkerConfig, error) {
	if cfg.RingSize == 0 {
		cfg.RingSize = defaultXDPRingSize
	}
	if cfg.Frames == 0 {
		cfg.Frames = 2 * cfg.RingSize
	}
	if cfg.FrameSize == 0 {
		cfg.FrameSize = defaultXDPFrameSize
	}
	if cfg.FillPerSocket == 0 {
		cfg.FillPerSocket = cfg.RingSize
	}
	if cfg.TxBudget == 0 {
		cfg.TxBudget = defaultXDPTxBudget
	}
	if cfg.Spin == 0 {
		cfg.Spin = defaultXDPSpin
	}
	if cfg.NAPIBusyPoll > 0 && cfg.NAPIBudget == 0 {
		cfg.NAPIBudget = defaultNAPIBudget
	}
	switch {
	case cfg.FrameSize != 2048 && cfg.FrameSize != 4096:
		return cfg, fmt.Errorf("pktio: XDP FrameSize %d: want 2048 or 4096", cfg.FrameSize)
	case cfg.RingSize < 64 || cfg.RingSize > 1<<16 || cfg.RingSize&(cfg.RingSize-1) != 0:
		return cfg, fmt.Errorf("pktio: XDP RingSize %d: want a power of two in 64..65536", cfg.RingSize)
	case cfg.Frames < 2*cfg.RingSize || cfg.Frames > 1<<20:
		return cfg, fmt.Errorf("pktio: XDP Frames %d out of range %d..%d", cfg.Frames, 2*cfg.RingSize, 1<<20)
	case cfg.FillPerSocket < 16 || cfg.FillPerSocket > cfg.RingSize:
		return cfg, fmt.Errorf("pktio: XDP FillPerSocket %d out of range 16..RingSize", cfg.FillPerSocket)
	case cfg.Headroom < 0 || cfg.Headroom > xdpPacketHeadroom:
		return cfg, fmt.Errorf("pktio: XDP Headroom %d out of range 0..%d", cfg.Headroom, xdpPacketHeadroom)
	case cfg.TxBudget < 32 || cfg.TxBudget > 1<<16:
		return cfg, fmt.Errorf("pktio: XDP TxBudget %d out of range 32..65536", cfg.TxBudget)
	case cfg.NAPIBusyPoll < 0 || cfg.NAPIBusyPoll > time.Second:
		return cfg, fmt.Errorf("pktio: XDP NAPIBusyPoll %v out of range 0..1s", cfg.NAPIBusyPoll)
	case cfg.NAPIBusyPoll > 0 && cfg.NAPIBusyPoll < time.Microsecond:
		return cfg, fmt.Errorf("pktio: XDP NAPIBusyPoll %v: at least 1µs (SO_BUSY_POLL counts microseconds)", cfg.NAPIBusyPoll)
	case cfg.NAPIBudget < 0 || cfg.NAPIBudget > 1<<16-1:
		return cfg, fmt.Errorf("pktio: XDP NAPIBudget %d out of range 0..65535", cfg.NAPIBudget)
	}
	return cfg, nil
}
