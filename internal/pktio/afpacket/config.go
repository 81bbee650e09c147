package afpacket

// Config: the knobs of a Port, their defaults and their validation.
//
// Locking: none; a Config is a value copied into the Port at Open.

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/net/bpf"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/wire"
)

// TxMode selects the transmit mechanism of Tx handles.
type TxMode int

const (
	// TxRing copies frames into a TPACKET_V3 TX ring and kicks it with one
	// send(2) per batch; frames too big for a slot (GSO super-frames) go
	// out through sendmmsg on a second socket, in order. The default: it
	// measured faster than sendmmsg here (docs/pktio.md).
	TxRing TxMode = iota
	// TxSendmmsg sends a batch with one sendmmsg(2): no copy in user space,
	// one msghdr per frame for the kernel to read, any frame size.
	TxSendmmsg
)

func (m TxMode) String() string {
	switch m {
	case TxSendmmsg:
		return "sendmmsg"
	case TxRing:
		return "txring"
	}
	return fmt.Sprintf("TxMode(%d)", int(m))
}

// Config configures a Port. The zero value is usable: Open fills defaults.
type Config struct {
	// Queues is the number of sockets (each with its own RX ring) joined in
	// one PACKET_FANOUT hash group: one per worker goroutine. Default 1.
	Queues int

	// BlockSize is the TPACKET_V3 block size in bytes (a power of two, at
	// least one page). A block is handed to user space whole, so it bounds
	// the batch and the largest frame: GSO super-frames need 128 KiB.
	// Default 128 KiB.
	BlockSize int
	// Blocks is the number of blocks per ring. Default: the port's rings
	// share 8 MiB (portRingBudget), at least 4 blocks a queue (two queues:
	// 32 blocks, 4 MiB each). What that holds while a worker is off the
	// CPU: on the V2 ring 2,048 frames a queue (2 KiB slots), whatever
	// their size; on V3 about Blocks milliseconds at moderate rates (a
	// partly filled block retires after BlockTimeout), more at high rates
	// (docs/pktio.md, "Ring depth").
	Blocks int
	// Ring is the receive ring's layout: RingV3 (RingDefault) or RingV2
	// (rxring_v2.go: per-frame wake-ups, for latency at low rates). The
	// ring's memory is BlockSize x Blocks either way.
	Ring Ring
	// SlotSize is RingV2's slot per frame (a multiple of 16, 512 to
	// BlockSize, dividing BlockSize). Frames that do not fit arrive through
	// the socket's queue. Default: the smallest slot that holds a frame of
	// the interface's MTU (at least 1500, with two VLAN tags) behind the
	// ring's headers, at most 2048 (v2SlotFor): 1,600 bytes for MTU 1500,
	// a quarter more frames in the same memory than 2 KiB slots. With
	// RingV2 and BlockSize unset, BlockSize is the smallest multiple of
	// the slot and the page size at or above 64 KiB, so slots never
	// straddle or pad a block (a slot's offset is index x SlotSize, as
	// before: a ring handed over by an older netfwd reads the same).
	SlotSize int
	// Spin is how long a RingV2 queue's Recv watches the ring before it
	// parks (its wake-ups are per frame). Default 50 µs; negative: none.
	Spin time.Duration

	// BlockTimeout retires a partly filled block after this long, so frames
	// wait at most that long at low rates. Millisecond granularity (kernel);
	// default 1 ms, the minimum.
	BlockTimeout time.Duration

	// Headroom is the number of writable bytes in front of every received
	// frame, included at the start of the slices Recv returns: the frame is
	// frames[i][Headroom:]. 4 lets the engine push an 802.1Q tag in place.
	// Default 0: frames[i] is exactly the frame.
	Headroom int

	// NoOffload disables PACKET_VNET_HDR. With offload (the default) the
	// kernel hands over GSO super-frames whole and describes partial
	// checksums exactly (csum_start/csum_offset); Tx passes GSO frames on
	// with a virtio-net header. Without it, frames above the MTU cannot be
	// transmitted and partial checksums are completed by parsing IPv4.
	NoOffload bool
	// KeepPartialChecksum leaves CHECKSUM_PARTIAL frames unfinished on
	// receive (Meta.Offload says so) instead of completing them; Tx then
	// asks the egress device to complete them. Only with offload.
	KeepPartialChecksum bool

	// Tx selects the transmit mechanism; see TxMode.
	Tx TxMode
	// TxBatch is the largest batch one Send call submits at once (more is
	// split). Default 256.
	TxBatch int
	// TxFrameSize and TxFrames size the TX ring (TxRing mode). Defaults
	// 2048 and 512.
	TxFrameSize int
	TxFrames    int
	// NoQdiscBypass keeps transmitted frames on the qdisc path
	// (PACKET_QDISC_BYPASS off): slower, but visible to tcpdump on the
	// egress port and shaped by tc.
	NoQdiscBypass bool
	// SndBuf is SO_SNDBUF(FORCE) of transmit sockets, bytes. Default 4 MiB,
	// so a burst of GSO super-frames does not stall on the default 208 KiB.
	SndBuf int

	// Filter is an optional classic BPF program applied to every RX socket
	// (before any frame is accepted). Frames it rejects never reach the ring.
	Filter []bpf.RawInstruction
	// NoRollover leaves a full queue's frames to be dropped instead of
	// rolled over to a sibling queue of the fanout group with room
	// (PACKET_FANOUT_FLAG_ROLLOVER, the default with Queues > 1): a burst
	// of one flow, which the hash puts on one queue, then has the whole
	// port's ring depth, and a worker kept off its CPU has its frames taken
	// by the others. The price: a flow is reordered when its queue is
	// three quarters full (the kernel rolls a flow that dominates the
	// recent traffic over at that point), where without it frames would
	// be dropped a little later. Rolled-over frames: RxStats.Rollover.
	NoRollover bool

	// Promiscuous puts the interface in promiscuous mode for the life of
	// the Port (PACKET_MR_PROMISC, dropped by the kernel on close). A router
	// or bridge port needs it; a sink that filters does not. Default true
	// unless NotPromiscuous.
	NotPromiscuous bool
}

const (
	defaultBlockSize    = 128 << 10
	defaultV2Spin       = 50 * time.Microsecond
	portRingBudget      = 8 << 20 // a port's receive rings; docs/reliability.md promises 16 MiB a port in all
	defaultMTU          = 1500
	maxAutoSlotSize     = 2048     // above it (jumbo MTUs) big frames take the copy path: depth over copies
	minV2BlockSize      = 64 << 10 // V2 blocks: at least this (fewer, larger kernel allocations)
	minDefaultBlocks    = 4
	maxDefaultBlocks    = 256
	defaultBlockTimeout = time.Millisecond
	defaultTxBatch      = 256
	defaultTxFrameSize  = 2048
	defaultTxFrames     = 512
	defaultSndBuf       = 4 << 20
	maxHeadroom         = 256
)

// withDefaults returns cfg with zero fields defaulted, or an error naming
// the first invalid field.
func (cfg Config) withDefaults() (Config, error) { return cfg.withDefaultsFor(defaultMTU) }

// withDefaultsFor is withDefaults for an interface of this MTU (the V2
// ring's default slot).
func (cfg Config) withDefaultsFor(mtu int) (Config, error) {
	page := os.Getpagesize()
	if cfg.Queues == 0 {
		cfg.Queues = 1
	}
	if cfg.Ring == RingDefault {
		cfg.Ring = RingV3
	}
	if cfg.Ring == RingV2 {
		if cfg.SlotSize == 0 {
			cfg.SlotSize = v2SlotFor(mtu, !cfg.NoOffload, cfg.Headroom)
			if cfg.BlockSize > 0 {
				// A block the caller chose: the next slot that divides it.
				for s := cfg.SlotSize; s <= cfg.BlockSize; s += 16 {
					if cfg.BlockSize%s == 0 {
						cfg.SlotSize = s
						break
					}
				}
			}
		}
		if cfg.BlockSize == 0 && cfg.SlotSize > 0 && cfg.SlotSize%16 == 0 {
			cfg.BlockSize = v2BlockFor(cfg.SlotSize, page)
		}
	}
	if cfg.BlockSize == 0 {
		cfg.BlockSize = defaultBlockSize
	}
	if cfg.Blocks == 0 {
		maxBlocks := maxDefaultBlocks
		if cfg.Ring == RingV2 {
			maxBlocks = 1 << 16 // small blocks: the budget, not a block count, is the bound
		}
		cfg.Blocks = min(max(portRingBudget/cfg.BlockSize/cfg.Queues, minDefaultBlocks), maxBlocks)
	}
	if cfg.BlockTimeout == 0 {
		cfg.BlockTimeout = defaultBlockTimeout
	}
	if cfg.SlotSize == 0 {
		cfg.SlotSize = defaultSlotSize
	}
	if cfg.Spin == 0 {
		cfg.Spin = defaultV2Spin
	}
	if cfg.TxBatch == 0 {
		cfg.TxBatch = defaultTxBatch
	}
	if cfg.TxFrameSize == 0 {
		cfg.TxFrameSize = defaultTxFrameSize
	}
	if cfg.TxFrames == 0 {
		cfg.TxFrames = defaultTxFrames
	}
	if cfg.SndBuf == 0 {
		cfg.SndBuf = defaultSndBuf
	}
	switch {
	case cfg.Queues < 1 || cfg.Queues > pktio.MaxQueues:
		return cfg, fmt.Errorf("pktio: Queues %d out of range 1..%d", cfg.Queues, pktio.MaxQueues)
	case cfg.Ring == RingV3 && (cfg.BlockSize < page || cfg.BlockSize&(cfg.BlockSize-1) != 0 || cfg.BlockSize > 1<<24):
		return cfg, fmt.Errorf("pktio: BlockSize %d must be a power of two between the page size %d and 16 MiB", cfg.BlockSize, page)
	case cfg.Ring == RingV2 && (cfg.BlockSize < page || cfg.BlockSize%page != 0 || cfg.BlockSize > 1<<24):
		return cfg, fmt.Errorf("pktio: BlockSize %d must be a multiple of the page size %d up to 16 MiB", cfg.BlockSize, page)
	case cfg.Blocks < 2 || cfg.Blocks > 1<<16:
		return cfg, fmt.Errorf("pktio: Blocks %d out of range 2..65536", cfg.Blocks)
	case cfg.BlockTimeout < time.Millisecond || cfg.BlockTimeout > time.Minute:
		return cfg, fmt.Errorf("pktio: BlockTimeout %v out of range 1ms..1m", cfg.BlockTimeout)
	case cfg.Ring != RingV3 && cfg.Ring != RingV2:
		return cfg, fmt.Errorf("pktio: Ring %d: want RingV3 or RingV2", cfg.Ring)
	case cfg.SlotSize < 512 || cfg.SlotSize > cfg.BlockSize || cfg.SlotSize%16 != 0 || cfg.BlockSize%cfg.SlotSize != 0:
		return cfg, fmt.Errorf("pktio: SlotSize %d must be a multiple of 16 between 512 and BlockSize %d that divides it", cfg.SlotSize, cfg.BlockSize)
	case cfg.Headroom < 0 || cfg.Headroom > maxHeadroom:
		return cfg, fmt.Errorf("pktio: Headroom %d out of range 0..%d", cfg.Headroom, maxHeadroom)
	case cfg.KeepPartialChecksum && cfg.NoOffload:
		return cfg, fmt.Errorf("pktio: KeepPartialChecksum needs offload (NoOffload unset)")
	case cfg.Tx != TxSendmmsg && cfg.Tx != TxRing:
		return cfg, fmt.Errorf("pktio: unknown Tx mode %d", int(cfg.Tx))
	case cfg.TxBatch < 1 || cfg.TxBatch > 1024:
		return cfg, fmt.Errorf("pktio: TxBatch %d out of range 1..1024", cfg.TxBatch)
	case cfg.TxFrameSize < 128 || cfg.TxFrameSize%16 != 0 || cfg.TxFrameSize > cfg.BlockSize:
		return cfg, fmt.Errorf("pktio: TxFrameSize %d must be a multiple of 16 in 128..BlockSize", cfg.TxFrameSize)
	case cfg.TxFrames < 8 || cfg.TxFrames > 1<<16:
		return cfg, fmt.Errorf("pktio: TxFrames %d out of range 8..65536", cfg.TxFrames)
	case cfg.SndBuf < 0:
		return cfg, fmt.Errorf("pktio: negative SndBuf")
	}
	return cfg, nil
}

// v2SlotFor is the smallest V2 slot (a multiple of 16) that holds a frame
// of an interface of this MTU, with two VLAN tags in its bytes, where the
// kernel puts it: behind the tpacket2 header, the sockaddr_ll, the
// virtio-net header and the reserve for the headroom (setupV2's layout).
// At least MTU 1500's, at most maxAutoSlotSize.
func v2SlotFor(mtu int, vnet bool, headroom int) int {
	macOff := v2MacGap
	if vnet {
		macOff += vnetHdrLen
	}
	if r := tpacket2HdrLen + wire.VLANTagLen + headroom - v2MacGap; r > 0 {
		macOff += r // PACKET_RESERVE (setFrameLayout)
	}
	frame := 14 + 2*wire.VLANTagLen + max(mtu, defaultMTU)
	return min((macOff+frame+15)&^15, maxAutoSlotSize)
}

// v2BlockFor is the V2 ring's block for this slot: the smallest common
// multiple of the slot and the page size, repeated up to minV2BlockSize.
func v2BlockFor(slot, page int) int {
	l := slot / gcd(slot, page) * page
	return (minV2BlockSize + l - 1) / l * l
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
