package lab

// RawHost: an emulated host made of one AF_PACKET socket (pktio rings) on an
// interface in some namespace. It answers ARP requests and ICMP echo
// requests for its addresses, per VLAN (tagged replies for tagged
// requests), records what it receives, and sends whatever frames a caller
// crafts. It stands in for a tagged host behind a trunk port (this kernel
// has no 802.1Q devices), records what a real host's link carries (next to
// that host's kernel), and injects crafted or malformed frames.
//
// Frames arrive with their VLAN tag back in the bytes (pktio restores tags
// the kernel moved into packet metadata), so a recorded frame is what was
// on the wire.
//
// Locking: mu guards the recorded frames and serialises the Tx (the receive
// goroutine answers, callers send); counters are atomics.

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/pktio/afpacket"
)

// RawAddr is one address of a RawHost, in one VLAN (0: untagged).
type RawAddr struct {
	VID uint16
	IP  netip.Addr
}

// RawHostConfig describes a RawHost.
type RawHostConfig struct {
	// MAC is the host's address (ARP answers, echo replies); default: the
	// interface's own.
	MAC   net.HardwareAddr
	Addrs []RawAddr
	// NoEcho: do not answer echo requests.
	NoEcho bool
	// Record keeps copies of received frames (up to 4096) for Frames/WaitFor.
	Record bool
}

// RawHost is an emulated host; see the file comment.
type RawHost struct {
	cfg  RawHostConfig
	port *afpacket.Port
	done chan struct{}

	mu     sync.Mutex
	tx     *afpacket.Tx // guarded by mu
	frames []Frame      // guarded by mu
	cond   *sync.Cond

	ARPReplies, EchoReplies, Received atomic.Uint64
}

const maxRecorded = 4096

// StartRawHost opens iface in namespace ns and starts answering.
func StartRawHost(ns, iface string, cfg RawHostConfig) (*RawHost, error) {
	h := &RawHost{cfg: cfg, done: make(chan struct{})}
	h.cond = sync.NewCond(&h.mu)
	err := pktio.InNetns(ns, func() error {
		var err error
		h.port, err = afpacket.Open(iface, afpacket.Config{BlockSize: 1 << 16, Blocks: 8, NoOffload: true})
		if err != nil {
			return err
		}
		if h.cfg.MAC == nil {
			h.cfg.MAC = h.port.MAC
		}
		h.tx, err = h.port.NewTx()
		return err
	})
	if err != nil {
		if h.port != nil {
			h.port.Close()
		}
		return nil, fmt.Errorf("raw host on %s in %s: %w", iface, ns, err)
	}
	go h.run()
	return h, nil
}

// MAC is the host's MAC.
func (h *RawHost) MAC() net.HardwareAddr { return h.cfg.MAC }

func (h *RawHost) addr(vid uint16, ip netip.Addr) bool {
	for _, a := range h.cfg.Addrs {
		if a.VID == vid && a.IP == ip {
			return true
		}
	}
	return false
}

func (h *RawHost) run() {
	defer close(h.done)
	q := h.port.Queue(0)
	frames := make([][]byte, 64)
	meta := make([]pktio.Meta, 64)
	for {
		n, err := q.Recv(frames, meta)
		if err != nil {
			return
		}
		for _, raw := range frames[:n] {
			f := ParseFrame(append([]byte(nil), raw...))
			h.Received.Add(1)
			h.answer(f)
			if h.cfg.Record {
				h.mu.Lock()
				if len(h.frames) < maxRecorded {
					h.frames = append(h.frames, f)
				}
				h.cond.Broadcast()
				h.mu.Unlock()
			}
		}
	}
}

// answer replies to ARP requests and echo requests for our addresses.
func (h *RawHost) answer(f Frame) {
	vid := uint16(0)
	if f.Tagged {
		vid = f.VID
	}
	switch {
	case f.ARP && f.ARPOp == 1 && h.addr(vid, f.ARPTPA):
		reply := ARPFrame(2, f.Src, h.cfg.MAC, vid, h.cfg.MAC, f.ARPTPA, f.ARPSHA, f.ARPSPA)
		if h.Send(reply) == nil {
			h.ARPReplies.Add(1)
		}
	case !h.cfg.NoEcho && f.IPv4 && f.Proto == ProtoICMP && f.ICMPType == 8 && len(f.L4) >= 8 &&
		f.Dst.String() == h.cfg.MAC.String() && h.addr(vid, f.IPDst):
		id := uint16(f.L4[4])<<8 | uint16(f.L4[5])
		seq := uint16(f.L4[6])<<8 | uint16(f.L4[7])
		reply := ICMPEchoFrame(f.Src, h.cfg.MAC, vid, f.IPDst, f.IPSrc, 64, 0, id, seq, f.L4[8:])
		if h.Send(reply) == nil {
			h.EchoReplies.Add(1)
		}
	}
}

// Send transmits frames as they are.
func (h *RawHost) Send(frames ...[]byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, err := h.tx.Send(frames, nil)
	if err == nil && n < len(frames) {
		err = fmt.Errorf("raw host: kernel refused %d of %d frames", len(frames)-n, len(frames))
	}
	return err
}

// Frames returns the frames recorded so far.
func (h *RawHost) Frames() []Frame {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Frame(nil), h.frames...)
}

// ErrTimeout is returned by WaitFor when no frame matched in time.
var ErrTimeout = errors.New("raw host: no matching frame in time")

// WaitFor waits until a recorded frame (any, also one recorded before the
// call) satisfies match, and returns the first that does.
func (h *RawHost) WaitFor(timeout time.Duration, match func(Frame) bool) (Frame, error) {
	deadline := time.Now().Add(timeout)
	timer := time.AfterFunc(timeout, func() {
		h.mu.Lock()
		h.cond.Broadcast()
		h.mu.Unlock()
	})
	defer timer.Stop()
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := 0
	for {
		for ; seen < len(h.frames); seen++ {
			if match(h.frames[seen]) {
				return h.frames[seen], nil
			}
		}
		if !time.Now().Before(deadline) {
			return Frame{}, ErrTimeout
		}
		h.cond.Wait()
	}
}

// Close stops the host.
func (h *RawHost) Close() error {
	h.port.Shutdown()
	<-h.done
	h.mu.Lock()
	err := h.tx.Close()
	h.mu.Unlock()
	return errors.Join(err, h.port.Close())
}
