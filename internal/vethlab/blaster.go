package vethlab

// Blaster and Sink: a built-in AF_PACKET traffic generator and counting
// receiver for the tests and `netfwd-lab`: 64-byte UDP/IPv4 frames at the
// highest rate one goroutine can push through an afpacket.Tx (TX ring), and a
// ring-based counter that recognises them. (`netfwd-bench veth` uses
// trafgen instead: one goroutine cannot outrun a forwarder.)
//
// Frames: Ethernet (optionally one 802.1Q tag) + IPv4 + UDP, checksum 0 (no
// checksum, legal in IPv4) so the payload can change without recomputing;
// the payload starts with BlastMagic and a 64-bit sequence number. Flows
// vary the UDP source port, so fanout hashing spreads them.
//
// Locking: none; a Blaster and a Sink each have one owner goroutine. Sink
// counters are atomics readable anywhere; Stop may be called from anywhere.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"golang.org/x/net/bpf"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/pktio/afpacket"
	"github.com/netfwd/netfwd/wire"
)

// BlastMagic starts the UDP payload of every blaster frame.
const BlastMagic = 0x4e465744 // "NFWD"

// blastHdrLen is the untagged frame's headers: Ethernet, IPv4, UDP.
const blastHdrLen = wire.EthernetHeaderLen + wire.IPv4MinHeaderLen + wire.UDPHeaderLen

// BlasterConfig describes the frames a Blaster sends.
type BlasterConfig struct {
	// Iface is the interface to send on (in the current network namespace).
	Iface string
	// DstMAC is required; SrcMAC defaults to the interface's address.
	SrcMAC, DstMAC net.HardwareAddr
	// SrcIP and DstIP are required IPv4 addresses.
	SrcIP, DstIP netip.Addr
	// SrcPort is the first UDP source port; Flows consecutive ports are used
	// round robin (default 1 flow). DstPort defaults to 9 (discard).
	SrcPort, DstPort uint16
	Flows            int
	// FrameLen is the frame length without FCS; default 60, a 64-byte frame
	// on the wire. At least 60 (Ethernet minimum); more pads the payload.
	FrameLen int
	// VLAN, when non-zero, adds an 802.1Q tag with this TCI.
	VLAN uint16
	// Batch is the number of frames per sendmmsg; default 256.
	Batch int
}

// Blaster sends UDP frames as fast as it can, or at a given rate.
type Blaster struct {
	cfg    BlasterConfig
	port   *afpacket.Port
	tx     *afpacket.Tx
	frames [][]byte
	seqOff int
	seq    uint64
}

// NewBlaster opens cfg.Iface for sending.
func NewBlaster(cfg BlasterConfig) (*Blaster, error) {
	if cfg.Flows == 0 {
		cfg.Flows = 1
	}
	if cfg.FrameLen == 0 {
		cfg.FrameLen = 60
	}
	if cfg.Batch == 0 {
		cfg.Batch = 256
	}
	if cfg.DstPort == 0 {
		cfg.DstPort = 9
	}
	tag := 0
	if cfg.VLAN != 0 {
		tag = wire.VLANTagLen
	}
	switch {
	case !cfg.SrcIP.Is4() || !cfg.DstIP.Is4():
		return nil, errors.New("vethlab: blaster needs IPv4 SrcIP and DstIP")
	case len(cfg.DstMAC) != 6:
		return nil, errors.New("vethlab: blaster needs DstMAC")
	case cfg.FrameLen < 60 || cfg.FrameLen < blastHdrLen+tag+12 || cfg.FrameLen > 1514+tag:
		return nil, fmt.Errorf("vethlab: blaster FrameLen %d out of range 60..%d", cfg.FrameLen, 1514+tag)
	case cfg.Flows < 1 || cfg.Flows > 65536-int(cfg.SrcPort):
		return nil, fmt.Errorf("vethlab: blaster Flows %d out of range", cfg.Flows)
	case cfg.Batch < 1 || cfg.Batch > 1024:
		return nil, fmt.Errorf("vethlab: blaster Batch %d out of range 1..1024", cfg.Batch)
	}
	// The blaster only sends: its receive socket filters everything out.
	p, err := afpacket.Open(cfg.Iface, afpacket.Config{BlockSize: 1 << 16, Blocks: 2, Filter: dropAll,
		NotPromiscuous: true, NoOffload: true, TxBatch: cfg.Batch})
	if err != nil {
		return nil, err
	}
	if cfg.SrcMAC == nil {
		cfg.SrcMAC = p.MAC
	}
	tx, err := p.NewTx()
	if err != nil {
		p.Close()
		return nil, err
	}
	b := &Blaster{cfg: cfg, port: p, tx: tx, seqOff: blastHdrLen + tag + 4}
	buf := make([]byte, cfg.Batch*cfg.FrameLen)
	for i := range cfg.Batch {
		f := buf[i*cfg.FrameLen : (i+1)*cfg.FrameLen]
		BuildUDPFrame(f, cfg.SrcMAC, cfg.DstMAC, cfg.VLAN, cfg.SrcIP, cfg.DstIP,
			cfg.SrcPort+uint16(i%cfg.Flows), cfg.DstPort)
		b.frames = append(b.frames, f)
	}
	return b, nil
}

// BuildUDPFrame writes a blaster frame into f (its whole length): Ethernet,
// an 802.1Q tag if vlan != 0, IPv4 (valid header checksum), UDP without
// checksum, payload BlastMagic, sequence 0, zero padding.
func BuildUDPFrame(f []byte, src, dst net.HardwareAddr, vlan uint16, sip, dip netip.Addr, sport, dport uint16) {
	clear(f)
	copy(f[0:6], dst)
	copy(f[6:12], src)
	off := 12
	if vlan != 0 {
		binary.BigEndian.PutUint16(f[off:], wire.EtherTypeVLAN)
		binary.BigEndian.PutUint16(f[off+2:], vlan)
		off += wire.VLANTagLen
	}
	binary.BigEndian.PutUint16(f[off:], wire.EtherTypeIPv4)
	ip := f[off+2:]
	ipLen := len(ip)
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(ipLen))
	binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF
	ip[8] = 64
	ip[9] = wire.ProtoUDP
	s4, d4 := sip.As4(), dip.As4()
	copy(ip[12:16], s4[:])
	copy(ip[16:20], d4[:])
	binary.BigEndian.PutUint16(ip[10:], wire.Checksum(ip[:wire.IPv4MinHeaderLen]))
	udp := ip[wire.IPv4MinHeaderLen:]
	binary.BigEndian.PutUint16(udp[0:], sport)
	binary.BigEndian.PutUint16(udp[2:], dport)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	binary.BigEndian.PutUint32(udp[8:], BlastMagic)
}

// Port is the blaster's port (for its counters).
func (b *Blaster) Port() *afpacket.Port { return b.port }

// Send sends n frames (whole batches, the last one partial) and returns how
// many the kernel accepted.
func (b *Blaster) Send(n int) (int, error) {
	sent := 0
	for sent < n {
		k := min(n-sent, len(b.frames))
		for _, f := range b.frames[:k] {
			binary.BigEndian.PutUint64(f[b.seqOff:], b.seq)
			b.seq++
		}
		m, err := b.tx.Send(b.frames[:k], nil)
		sent += m
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// Run sends until ctx is done, at rate frames per second (0: as fast as
// possible), and returns the number of frames sent.
func (b *Blaster) Run(ctx context.Context, rate float64) (uint64, error) {
	var sent uint64
	start := time.Now()
	timer := time.NewTimer(time.Hour) // one timer for the pacing: no allocation per batch
	defer timer.Stop()
	for ctx.Err() == nil {
		if rate > 0 {
			due := start.Add(time.Duration(float64(sent) / rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				timer.Reset(d)
				select {
				case <-ctx.Done():
					return sent, nil
				case <-timer.C:
				}
			}
		}
		n, err := b.Send(len(b.frames))
		sent += uint64(n)
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// Close closes the blaster's port.
func (b *Blaster) Close() error {
	b.port.Shutdown()
	return b.port.Close()
}

// Sink counts blaster frames arriving on an interface.
type Sink struct {
	port    *afpacket.Port
	packets atomic.Uint64
	bytes   atomic.Uint64
	bad     atomic.Uint64
	started atomic.Bool
	done    chan struct{}
}

// SinkConfig describes what a Sink counts.
type SinkConfig struct {
	// Iface is the interface to listen on (in the current namespace).
	Iface string
	// DstPort selects blaster frames by UDP destination port (default 9).
	DstPort uint16
	// Promiscuous: count frames addressed to other MACs too (a sink behind a
	// router sees its own MAC; one behind a bridge may not).
	Promiscuous bool
}

// NewSink opens cfg.Iface with a filter that passes only IPv4 UDP frames to
// cfg.DstPort; call Run to count them.
func NewSink(cfg SinkConfig) (*Sink, error) {
	if cfg.DstPort == 0 {
		cfg.DstPort = 9
	}
	prog, err := bpf.Assemble(udpPortFilter(cfg.DstPort))
	if err != nil {
		return nil, err
	}
	p, err := afpacket.Open(cfg.Iface, afpacket.Config{Filter: prog, NotPromiscuous: !cfg.Promiscuous, BlockSize: 1 << 17, Blocks: 64})
	if err != nil {
		return nil, err
	}
	return &Sink{port: p, done: make(chan struct{})}, nil
}

// udpPortFilter accepts unfragmented IPv4 UDP frames to port (untagged, or
// with the tag offloaded, which is how the kernel shows them to filters).
func udpPortFilter(port uint16) []bpf.Instruction {
	return []bpf.Instruction{
		bpf.LoadAbsolute{Off: 12, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: wire.EtherTypeIPv4, SkipFalse: 8},
		bpf.LoadAbsolute{Off: 23, Size: 1},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: wire.ProtoUDP, SkipFalse: 6},
		bpf.LoadAbsolute{Off: 20, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: wire.IPv4OffsetMask, SkipTrue: 4},
		bpf.LoadMemShift{Off: wire.EthernetHeaderLen},
		bpf.LoadIndirect{Off: wire.EthernetHeaderLen + 2, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(port), SkipFalse: 1},
		bpf.RetConstant{Val: 1 << 18},
		bpf.RetConstant{Val: 0},
	}
}

// Run counts frames until Stop; it returns nil after Stop.
func (s *Sink) Run() error {
	if s.started.Swap(true) {
		return errors.New("vethlab: Sink.Run called twice")
	}
	defer close(s.done)
	q := s.port.Queue(0)
	frames := make([][]byte, 1024)
	meta := make([]pktio.Meta, 1024)
	for {
		n, err := q.Recv(frames, meta)
		if errors.Is(err, pktio.ErrClosed) {
			return nil
		}
		if err != nil {
			return err
		}
		var pk, by, bad uint64
		for _, f := range frames[:n] {
			if IsBlasterFrame(f) {
				pk++
				by += uint64(len(f))
			} else {
				bad++
			}
		}
		s.packets.Add(pk)
		s.bytes.Add(by)
		s.bad.Add(bad)
	}
}

// IsBlasterFrame reports whether f (Ethernet, up to two VLAN tags) carries
// an IPv4 UDP payload that starts with BlastMagic.
func IsBlasterFrame(f []byte) bool {
	off := 12
	for range 3 {
		if len(f) < off+2 {
			return false
		}
		switch binary.BigEndian.Uint16(f[off:]) {
		case wire.EtherTypeVLAN, wire.EtherTypeQinQ:
			off += wire.VLANTagLen
			continue
		case wire.EtherTypeIPv4:
			ip := off + 2
			return len(f) >= ip+wire.IPv4MinHeaderLen+12 && binary.BigEndian.Uint32(f[ip+wire.IPv4MinHeaderLen+8:]) == BlastMagic
		}
		return false
	}
	return false
}

// dropAll is a classic BPF program that accepts nothing.
var dropAll = []bpf.RawInstruction{{Op: 0x06 /* BPF_RET|BPF_K */, K: 0}}

// Packets and Bytes are the blaster frames counted so far; Other counts
// frames that passed the filter without the blaster's magic.
func (s *Sink) Packets() uint64 { return s.packets.Load() }
func (s *Sink) Bytes() uint64   { return s.bytes.Load() }
func (s *Sink) Other() uint64   { return s.bad.Load() }

// Port is the sink's port (for its ring drop counters).
func (s *Sink) Port() *afpacket.Port { return s.port }

// Stop ends Run (from any goroutine).
func (s *Sink) Stop() { s.port.Shutdown() }

// Close stops the sink, waits for Run if it was started, and closes the port.
func (s *Sink) Close() error {
	s.Stop()
	if s.started.Load() {
		<-s.done
	}
	return s.port.Close()
}
