package afxdp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/pktio/afpacket"
	"github.com/netfwd/netfwd/internal/pktio/pktiotest"
	"github.com/netfwd/netfwd/wire"
)

// openXDPIn opens an Port inside namespace ns, closed when the test ends.
func openXDPIn(t testing.TB, ns, iface string, cfg PortConfig) *Port {
	t.Helper()
	var p *Port
	err := pktio.InNetns(ns, func() error {
		var err error
		p, err = Open(iface, cfg)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// newXDPWorker returns a worker closed when the test ends (after the
// test's goroutines, which must stop on Shutdown).
func newXDPWorker(t testing.TB, cfg WorkerConfig) *Worker {
	t.Helper()
	w, err := NewWorker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func TestXDPRecvIntact(t *testing.T) {
	p := pktiotest.NewPair(t)
	port := openXDPIn(t, p.NsB, p.B, PortConfig{})
	t.Logf("attach %v, %d queues", port.Attach(), port.Queues())
	w := newXDPWorker(t, WorkerConfig{Headroom: 4})
	s, err := w.Bind(port, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("socket mode %s", s.Mode())
	c := pktiotest.RawSender(t, p.NsA, p.A)
	dst, src := port.MAC, pktiotest.MAC(t, p.NsA, p.A)
	rng := rand.New(rand.NewPCG(1, 2))
	var sent [][]byte
	for _, n := range []int{60, 61, 64, 100, 128, 500, 1000, 1514} {
		sent = append(sent, pktiotest.Frame(rng, dst, src, n))
	}
	pktiotest.Send(t, c, sent...)
	got, meta := pktiotest.RecvN(t, s, len(sent), 2*time.Second)
	if len(got) != len(sent) {
		t.Fatalf("received %d frames, want %d", len(got), len(sent))
	}
	for i := range sent {
		if !bytes.Equal(got[i], sent[i]) {
			t.Errorf("frame %d (%d bytes) differs", i, len(sent[i]))
		}
		if int(meta[i].Len) != len(sent[i]) {
			t.Errorf("frame %d meta %+v", i, meta[i])
		}
	}
	st := port.XDPStats()
	t.Logf("stats %+v", st)
	if st.Rx.Packets != uint64(len(sent)) {
		t.Errorf("stats %+v", st.Rx)
	}
}

// xdpChain is A (a) -- (fa) F (fb) -- (b) B: a worker in F forwards.
type xdpChain struct {
	nsA, nsF, nsB string
	fa, fb        *Port
	w             *Worker
	sa, sb        *Socket
}

func newXDPChain(t testing.TB, wcfg WorkerConfig, extra ...string) *xdpChain {
	t.Helper()
	return newXDPChainPorts(t, PortConfig{}, wcfg, extra...)
}

// newXDPChainPorts is newXDPChain with the ports' configuration.
func newXDPChainPorts(t testing.TB, pcfg PortConfig, wcfg WorkerConfig, extra ...string) *xdpChain {
	t.Helper()
	c := &xdpChain{nsA: pktiotest.Netns(t, "pxA"), nsF: pktiotest.Netns(t, "pxF"), nsB: pktiotest.Netns(t, "pxB")}
	pktiotest.AddVeth(t, c.nsA, "a", c.nsF, "fa", extra...)
	pktiotest.AddVeth(t, c.nsF, "fb", c.nsB, "b", extra...)
	c.fa = openXDPIn(t, c.nsF, "fa", pcfg)
	c.fb = openXDPIn(t, c.nsF, "fb", pcfg)
	c.w = newXDPWorker(t, wcfg)
	var err error
	if c.sa, err = c.w.Bind(c.fa, 0); err != nil {
		t.Fatal(err)
	}
	if c.sb, err = c.w.Bind(c.fb, 0); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestXDPForwardByDescriptor: frames received on fa and rewritten in place
// leave fb by descriptor, intact; a second output of the same frame, and a
// frame from outside the UMEM, are copied; all arrive, in order.
func TestXDPForwardByDescriptor(t *testing.T) {
	c := newXDPChain(t, WorkerConfig{Headroom: 4})
	peer := openIn(t, c.nsB, "b", afpacket.Config{})
	inj := pktiotest.RawSender(t, c.nsA, "a")
	rng := rand.New(rand.NewPCG(21, 22))
	var sent [][]byte
	for i := range 100 {
		f := pktiotest.Frame(rng, c.fa.MAC, pktiotest.MAC(t, c.nsA, "a"), 60+rng.IntN(1400))
		binary.BigEndian.PutUint32(f[14:], uint32(i))
		sent = append(sent, f)
	}
	pktiotest.Send(t, inj, sent...)
	frames, meta := make([][]byte, 256), make([]pktio.Meta, 256)
	var want [][]byte // what b must see, in order
	deadline := time.Now().Add(3 * time.Second)
	got, sends := 0, 0
	for got < len(sent) && time.Now().Before(deadline) {
		n, err := c.sa.TryRecv(frames, meta)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			time.Sleep(time.Millisecond)
			continue
		}
		out := frames[:0:0]
		for i := range n {
			f := frames[i][c.sa.Headroom():]
			copy(f[0:6], peer.MAC) // rewrite in place
			copy(f[6:12], c.fb.MAC)
			out = append(out, f)
			want = append(want, bytes.Clone(f))
		}
		// The first frame of each batch goes out twice (a flood's second
		// output: copied), and one generated frame follows.
		gen := pktiotest.Frame(rng, peer.MAC, c.fb.MAC, 80)
		out = append(out, out[0], gen)
		want = append(want, bytes.Clone(out[0]), gen)
		if k, err := c.sb.Send(out, nil); err != nil || k != len(out) {
			t.Fatalf("Send = %d, %v; want %d", k, err, len(out))
		}
		got += n
		sends++
	}
	if got != len(sent) {
		t.Fatalf("forwarded %d of %d", got, len(sent))
	}
	rcv, _ := pktiotest.RecvN(t, peer.Queue(0), len(want), 3*time.Second)
	if len(rcv) != len(want) {
		t.Fatalf("b received %d of %d", len(rcv), len(want))
	}
	for i := range want {
		if !bytes.Equal(rcv[i], want[i]) {
			t.Fatalf("frame %d differs:\n got %x\nwant %x", i, rcv[i], want[i])
		}
	}
	st := c.fb.XDPStats()
	t.Logf("fb %+v", st)
	if st.TxByDescriptor != uint64(len(sent)) || st.TxCopied != uint64(len(want)-len(sent)) {
		t.Errorf("by descriptor %d (want %d), copied %d (want %d)", st.TxByDescriptor, len(sent), st.TxCopied, len(want)-len(sent))
	}
	// Copy mode: every Send kicks at least once; a batch (at most 102
	// frames here) fits one kick of TxBudget (256), so extra kicks are
	// only EAGAIN retries.
	if st.TxKicks < uint64(sends) || st.TxKicks > uint64(sends)+st.TxKickAgain {
		t.Errorf("%d kicks (%d EAGAIN) for %d Sends", st.TxKicks, st.TxKickAgain, sends)
	}
	if sa := c.fa.XDPStats(); sa.TxKicks != 0 {
		t.Errorf("fa sent nothing but counts %d kicks", sa.TxKicks)
	}
	c.sa.Release()
	c.w.checkFrames(t)
}

// checkFrames checks the worker's frame accounting against a recount: the
// free list holds distinct frames, exactly those in state free, and every
// frame is in one known state.
func (w *Worker) checkFrames(t testing.TB) {
	t.Helper()
	seen := make([]bool, len(w.state))
	for _, f := range w.free[:w.nfree] {
		if seen[f] {
			t.Fatalf("frame %d twice on the free list", f)
		}
		seen[f] = true
		if w.state[f] != frameFree {
			t.Fatalf("frame %d on the free list in state %d", f, w.state[f])
		}
	}
	counts := map[uint8]int{}
	for f, st := range w.state {
		counts[st]++
		if st == frameFree && !seen[f] {
			t.Fatalf("frame %d free but not on the free list", f)
		}
		if st > frameDoneHeld {
			t.Fatalf("frame %d in unknown state %d", f, st)
		}
	}
	held := 0
	for _, s := range w.socks {
		if s != nil {
			held += len(s.batch)
		}
	}
	if counts[frameHeld]+counts[frameSentHeld]+counts[frameDoneHeld] != held {
		t.Fatalf("frames in held states %v, batches hold %d", counts, held)
	}
}

// TestXDPShutdownWakesWaitingOwner: an owner blocked in Wait, or in Recv,
// returns ErrClosed at once when another goroutine calls Shutdown.
func TestXDPShutdownWakesWaitingOwner(t *testing.T) {
	for _, how := range []string{"wait", "recv"} {
		t.Run(how, func(t *testing.T) {
			p := pktiotest.NewPair(t)
			port := openXDPIn(t, p.NsB, p.B, PortConfig{})
			w := newXDPWorker(t, WorkerConfig{Spin: -1})
			s, err := w.Bind(port, 0)
			if err != nil {
				t.Fatal(err)
			}
			errc := make(chan error, 1)
			go func() {
				if how == "wait" {
					for {
						if err := w.Wait(); err != nil {
							errc <- err
							return
						}
					}
				}
				frames, meta := make([][]byte, 8), make([]pktio.Meta, 8)
				_, err := s.Recv(frames, meta)
				errc <- err
			}()
			time.Sleep(50 * time.Millisecond)
			start := time.Now()
			w.Shutdown()
			select {
			case err := <-errc:
				if !errors.Is(err, pktio.ErrClosed) {
					t.Fatalf("after Shutdown: %v, want ErrClosed", err)
				}
				if d := time.Since(start); d > 100*time.Millisecond {
					t.Errorf("woke after %v", d)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("owner still blocked 2s after Shutdown")
			}
			if _, err := s.Send([][]byte{make([]byte, 60)}, nil); !errors.Is(err, pktio.ErrClosed) {
				t.Errorf("Send after Shutdown: %v", err)
			}
		})
	}
}

// TestXDPBatchSpanningRings: with 64-entry rings, bursts larger than the
// rings arrive in order, none twice, and what does not arrive is counted
// as a ring drop; frames move through the fill ring many times over.
func TestXDPBatchSpanningRings(t *testing.T) {
	c := newXDPChain(t, WorkerConfig{RingSize: 64, Frames: 256, FillPerSocket: 48})
	inj := pktiotest.RawSender(t, c.nsA, "a")
	src := pktiotest.MAC(t, c.nsA, "a")
	rng := rand.New(rand.NewPCG(13, 14))
	frames, meta := make([][]byte, 256), make([]pktio.Meta, 256)
	const rounds, perRound = 30, 100
	last, got := -1, 0
	for round := range rounds {
		var sent [][]byte
		for range perRound {
			f := pktiotest.Frame(rng, c.fa.MAC, src, 60+rng.IntN(200))
			binary.BigEndian.PutUint32(f[14:], uint32(round*perRound+len(sent)))
			sent = append(sent, f)
		}
		pktiotest.Send(t, inj, sent...)
		time.Sleep(2 * time.Millisecond)
		for {
			n, err := c.sa.TryRecv(frames, meta)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			for _, f := range frames[:n] {
				seq := int(binary.BigEndian.Uint32(f[14:]))
				if seq <= last {
					t.Fatalf("round %d: frame %d after %d", round, seq, last)
				}
				last = seq
				got++
			}
			// Forward half of them by descriptor: frames in flight too.
			if _, err := c.sb.Send(frames[:n/2], nil); err != nil {
				t.Fatal(err)
			}
			c.w.checkFrames(t)
		}
	}
	st := c.fa.XDPStats()
	t.Logf("received %d, stats %+v", got, st)
	if got == 0 || uint64(got)+st.Rx.RingDrops != rounds*perRound {
		t.Fatalf("received %d + ring drops %d != sent %d", got, st.Rx.RingDrops, rounds*perRound)
	}
}

// TestXDPDatapathAllocs: TryRecv and Send (by descriptor and by copy) do
// not allocate.
func TestXDPDatapathAllocs(t *testing.T) {
	c := newXDPChain(t, WorkerConfig{})
	gen := newUDPSender(t, c.nsA, "a", c.fa.MAC, 1)
	frames, meta := make([][]byte, 64), make([]pktio.Meta, 64)
	extra := pktiotest.UDPFrame(c.fb.MAC, c.fb.MAC, 7, 60) // generated: copied
	forwarded := 0
	allocs := testing.AllocsPerRun(50, func() {
		gen.Send(t, 32)
		if err := c.w.Wait(); err != nil {
			t.Fatal(err)
		}
		n := 0
		for range 1000 {
			k, err := c.sa.TryRecv(frames[n:], meta[n:])
			if err != nil {
				t.Fatal(err)
			}
			if k > 0 {
				n = k
				break
			}
		}
		frames[n] = extra
		k, err := c.sb.Send(frames[:n+1], nil)
		if err != nil {
			t.Fatal(err)
		}
		forwarded += k
	})
	if allocs != 0 {
		t.Errorf("%v allocations per batch, want 0", allocs)
	}
	if st := c.fb.XDPStats(); forwarded < 50*32 || st.TxByDescriptor == 0 || st.TxCopied == 0 {
		t.Errorf("forwarded %d, stats %+v", forwarded, st)
	}
}

// TestXDPMultiQueue: on a veth with two queue pairs, two workers each bind
// their queue; 64 flows spread over both, every frame arrives once, each
// flow on one queue only.
func TestXDPMultiQueue(t *testing.T) {
	p := pktiotest.NewPair(t, "numrxqueues", "2", "numtxqueues", "2")
	port := openXDPIn(t, p.NsB, p.B, PortConfig{})
	if port.Queues() != 2 {
		t.Fatalf("port has %d queues, want 2", port.Queues())
	}
	gen := newUDPSender(t, p.NsA, p.A, port.MAC, 64)
	const total = 64 * 40
	flows := make([]map[uint16]int, 2)
	done := make(chan int, 2)
	workers := make([]*Worker, 2)
	for q := range 2 {
		workers[q] = newXDPWorker(t, WorkerConfig{})
		s, err := workers[q].Bind(port, q)
		if err != nil {
			t.Fatal(err)
		}
		flows[q] = map[uint16]int{}
		go func() {
			defer func() { done <- q }()
			w := workers[q]
			frames, meta := make([][]byte, 256), make([]pktio.Meta, 256)
			for w.Wait() == nil {
				n, err := s.TryRecv(frames, meta)
				if err != nil {
					return
				}
				for _, f := range frames[:n] {
					flows[q][binary.BigEndian.Uint16(f[34:])]++
				}
			}
		}()
	}
	for range total / 256 { // bursts within the fill rings, even under -race
		gen.Send(t, 256)
		time.Sleep(5 * time.Millisecond)
	}
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if st := port.Stats().Rx; st.Packets+st.RingDrops >= total {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, w := range workers {
		w.Shutdown()
	}
	<-done
	<-done
	if st := port.Stats().Rx; st.Packets != total {
		t.Fatalf("received %d of %d (ring drops %d)", st.Packets, total, st.RingDrops)
	}
	for q := range 2 {
		n := 0
		for _, c := range flows[q] {
			n += c
		}
		t.Logf("queue %d: %d frames, %d flows", q, n, len(flows[q]))
		if len(flows[q]) == 0 {
			t.Errorf("queue %d got no flows", q)
		}
	}
	for f := range flows[0] {
		if _, both := flows[1][f]; both {
			t.Errorf("flow %d seen on both queues", f)
		}
	}
}

// TestXDPForwardRandomAgainstModel drives the worker's frame accounting
// with random batches: frames dropped, sent once (by descriptor), sent
// twice (the second copied), tagged in their headroom before sending, and
// generated frames mixed in, with small rings so frames cycle through
// fill, RX, TX and completion many times. The reference model is the plain
// list of byte copies of what was sent; b must receive exactly that, and
// the accounting must stay consistent after every step.
func TestXDPForwardRandomAgainstModel(t *testing.T) {
	for _, mode := range []Attach{AttachNative, AttachGeneric} {
		t.Run(mode.String(), func(t *testing.T) {
			c := &xdpChain{nsA: pktiotest.Netns(t, "pxA"), nsF: pktiotest.Netns(t, "pxF"), nsB: pktiotest.Netns(t, "pxB")}
			pktiotest.AddVeth(t, c.nsA, "a", c.nsF, "fa")
			pktiotest.AddVeth(t, c.nsF, "fb", c.nsB, "b")
			c.fa = openXDPIn(t, c.nsF, "fa", PortConfig{Attach: mode})
			c.fb = openXDPIn(t, c.nsF, "fb", PortConfig{Attach: mode})
			c.w = newXDPWorker(t, WorkerConfig{RingSize: 64, Frames: 512, FillPerSocket: 64, Headroom: 8})
			var err error
			if c.sa, err = c.w.Bind(c.fa, 0); err != nil {
				t.Fatal(err)
			}
			if c.sb, err = c.w.Bind(c.fb, 0); err != nil {
				t.Fatal(err)
			}
			peer := openIn(t, c.nsB, "b", afpacket.Config{})
			inj := pktiotest.RawSender(t, c.nsA, "a")
			srcA := pktiotest.MAC(t, c.nsA, "a")
			rng := rand.New(rand.NewPCG(31, 32))
			var want [][]byte
			checked := 0
			frames, meta := make([][]byte, 64), make([]pktio.Meta, 64)
			seq := 0
			for round := range 60 {
				var in [][]byte
				for range 1 + rng.IntN(30) { // within the 64-frame fill ring
					f := pktiotest.Frame(rng, c.fa.MAC, srcA, 60+rng.IntN(1000))
					binary.BigEndian.PutUint32(f[14:], uint32(seq))
					seq++
					in = append(in, f)
				}
				pktiotest.Send(t, inj, in...)
				got := 0
				for deadline := time.Now().Add(2 * time.Second); got < len(in) && time.Now().Before(deadline); {
					n, err := c.sa.TryRecv(frames[:1+rng.IntN(len(frames))], meta)
					if err != nil {
						t.Fatal(err)
					}
					if n == 0 {
						time.Sleep(100 * time.Microsecond)
						continue
					}
					got += n
					var out [][]byte
					for _, f := range frames[:n] {
						f = f[c.sa.Headroom():]
						copy(f[0:6], peer.MAC)
						f[20] ^= byte(round) // rewritten in place
						switch rng.IntN(5) {
						case 0: // dropped by the engine
							continue
						case 1: // flooded: two outputs
							out = append(out, f, f)
						case 2: // tagged in the headroom
							out = append(out, pushTag(f, c.sa.Headroom()))
						default:
							out = append(out, f)
						}
					}
					if rng.IntN(3) == 0 {
						out = append(out, pktiotest.Frame(rng, peer.MAC, c.fb.MAC, 60+rng.IntN(200)))
					}
					for _, f := range out {
						want = append(want, bytes.Clone(f))
					}
					// One Send or two.
					cut := rng.IntN(len(out) + 1)
					for _, part := range [][][]byte{out[:cut], out[cut:]} {
						if k, err := c.sb.Send(part, nil); err != nil || k != len(part) {
							t.Fatalf("round %d: Send = %d, %v; want %d", round, k, err, len(part))
						}
					}
					if rng.IntN(2) == 0 {
						c.sa.Release()
					}
					c.w.checkFrames(t)
				}
				if got != len(in) {
					t.Fatalf("round %d: forwarded %d of %d", round, got, len(in))
				}
				// What b received so far must be the model's next frames
				// (read each round: the checker's own ring stays small).
				rcv, _ := pktiotest.RecvN(t, peer.Queue(0), len(want)-checked, 3*time.Second)
				if len(rcv) != len(want)-checked {
					t.Fatalf("round %d: b received %d of %d (its ring drops %d)", round, len(rcv), len(want)-checked, peer.Stats().Rx.RingDrops)
				}
				for i := range rcv {
					if !bytes.Equal(rcv[i], want[checked+i]) {
						t.Fatalf("frame %d differs:\n got %x\nwant %x", checked+i, rcv[i], want[checked+i])
					}
				}
				checked = len(want)
			}
			st := c.fb.XDPStats()
			t.Logf("%d frames; fb %+v", len(want), st)
			if st.TxByDescriptor == 0 || st.TxCopied == 0 || st.TxNoBuffer != 0 {
				t.Errorf("by descriptor %d, copied %d, no buffer %d", st.TxByDescriptor, st.TxCopied, st.TxNoBuffer)
			}
		})
	}
}

// pushTag inserts an 802.1Q tag into f by moving its MACs into the
// headroom in front of it (f must have 4 writable bytes before it, inside
// the slice TryRecv returned) and returns the tagged frame.
func pushTag(f []byte, headroom int) []byte {
	if headroom < wire.VLANTagLen {
		panic("no headroom")
	}
	full := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(f)), -wire.VLANTagLen)), len(f)+wire.VLANTagLen)
	copy(full[0:12], f[0:12])
	binary.BigEndian.PutUint32(full[12:], 0x8100_0007)
	return full
}

// TestXDPSendOffloadLimits: AF_XDP carries no offload state. A frame with a
// partial checksum (forwarded from an AF_PACKET port) leaves with the
// checksum completed; a GSO super-frame cannot leave (BadOffload), nor can a
// frame larger than a UMEM frame (Refused) or shorter than an Ethernet
// header; the rest of the batch goes out.
func TestXDPSendOffloadLimits(t *testing.T) {
	c := newXDPChain(t, WorkerConfig{})
	peer := openIn(t, c.nsB, "b", afpacket.Config{})
	rng := rand.New(rand.NewPCG(41, 42))
	partial := pktiotest.RandomIPv4L4(rng)
	copy(partial[0:6], peer.MAC)
	copy(partial[6:12], c.fb.MAC)
	l3, _ := pktio.L3Offset(partial)
	ip := partial[l3:]
	csumOff := wire.TCPChecksumOffset
	if ip[9] == wire.ProtoUDP {
		csumOff = wire.UDPChecksumOffset
	}
	ps := wire.Sum(0, ip[12:20]) + uint64(ip[9]) + uint64(len(ip)-20)
	binary.BigEndian.PutUint16(ip[20+csumOff:], wire.Fold(ps))
	plain := pktiotest.Frame(rng, peer.MAC, c.fb.MAC, 100)
	gso := pktiotest.Frame(rng, peer.MAC, c.fb.MAC, 1000)
	huge := pktiotest.Frame(rng, peer.MAC, c.fb.MAC, 1900)
	frames := [][]byte{partial, gso, huge, plain, {1, 2, 3}}
	offl := []pktio.Offload{{NeedsCsum: true, L4Off: 20, CsumOffset: uint16(csumOff)},
		{GSOType: pktio.GSOTCPv4, GSOSize: 500}, {}, {}, {}}
	n, err := c.sb.Send(frames, offl)
	if err != nil || n != 2 {
		t.Fatalf("Send = %d, %v; want 2", n, err)
	}
	got, _ := pktiotest.RecvN(t, peer.Queue(0), 2, 2*time.Second)
	if len(got) != 2 || !bytes.Equal(got[1], plain) {
		t.Fatalf("peer got %d frames", len(got))
	}
	if !pktiotest.RefL4Valid(t, got[0]) {
		t.Errorf("partial checksum not completed: %x", got[0])
	}
	st := c.fb.XDPStats()
	if st.Tx.Packets != 2 || st.Tx.BadOffload != 2 || st.Tx.Refused != 1 {
		t.Errorf("tx stats %+v, want 2 sent, 2 bad offload (GSO, runt), 1 refused (too big)", st.Tx)
	}
}

// TestXDPPortNewTx: a goroutine without a socket on an XDP port (the
// housekeeping one) sends through the port's AF_PACKET handle; the frames
// arrive and count in the port's transmit counters.
func TestXDPPortNewTx(t *testing.T) {
	c := newXDPChain(t, WorkerConfig{})
	peer := openIn(t, c.nsB, "b", afpacket.Config{})
	tx, err := c.fb.NewTx()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(51, 52))
	var sent [][]byte
	for range 20 {
		sent = append(sent, pktiotest.Frame(rng, peer.MAC, c.fb.MAC, 60+rng.IntN(1400)))
	}
	if n, err := tx.Send(sent, nil); n != len(sent) || err != nil {
		t.Fatalf("Send = %d, %v", n, err)
	}
	got, _ := pktiotest.RecvN(t, peer.Queue(0), len(sent), 2*time.Second)
	if len(got) != len(sent) {
		t.Fatalf("peer received %d of %d", len(got), len(sent))
	}
	for i := range sent {
		if !bytes.Equal(got[i], sent[i]) {
			t.Fatalf("frame %d differs", i)
		}
	}
	if st := c.fb.Stats().Tx; st.Packets != uint64(len(sent)) {
		t.Errorf("port tx counters %+v", st)
	}
	if err := c.fb.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.fb.NewTx(); !errors.Is(err, pktio.ErrClosed) {
		t.Errorf("NewTx after Close: %v", err)
	}
}

// TestXDPGeneratedFramesAfterManyBinds: sockets bound one after the other
// each fill their ring before the fill target shrinks; a frame generated
// outside the UMEM (an ARP reply) must still find a free frame to be
// copied into (it found none with three sockets on the default UMEM).
func TestXDPGeneratedFramesAfterManyBinds(t *testing.T) {
	c := newXDPChain(t, WorkerConfig{})
	nsC := pktiotest.Netns(t, "pxC")
	pktiotest.AddVeth(t, c.nsF, "fc", nsC, "c")
	fc := openXDPIn(t, c.nsF, "fc", PortConfig{})
	if _, err := c.w.Bind(fc, 0); err != nil {
		t.Fatal(err)
	}
	peer := openIn(t, c.nsB, "b", afpacket.Config{})
	rng := rand.New(rand.NewPCG(5, 6))
	gen := pktiotest.Frame(rng, peer.MAC, c.fb.MAC, 60)
	if k, err := c.sb.Send([][]byte{gen}, nil); err != nil || k != 1 {
		t.Fatalf("Send of a generated frame = %d, %v; want 1 (free frames %d)", k, err, c.w.nfree)
	}
	rcv, _ := pktiotest.RecvN(t, peer.Queue(0), 1, 3*time.Second)
	if len(rcv) != 1 || !bytes.Equal(rcv[0], gen) {
		t.Fatalf("b received %d frames", len(rcv))
	}
	if st := c.fb.XDPStats(); st.TxNoBuffer != 0 || st.TxCopied != 1 {
		t.Errorf("copied %d, no buffer %d; want 1, 0", st.TxCopied, st.TxNoBuffer)
	}
}

// TestXDPFillRingsShared: with Sockets set, sockets bound one after the
// other all get frames in their fill rings (the last ones got none when
// each Bind filled its ring for the count so far).
func TestXDPFillRingsShared(t *testing.T) {
	nsF := pktiotest.Netns(t, "pxS")
	w := newXDPWorker(t, WorkerConfig{Sockets: 4})
	var socks []*Socket
	for i := range 4 {
		name := fmt.Sprintf("f%d", i)
		pktiotest.AddVeth(t, nsF, name, nsF, fmt.Sprintf("g%d", i))
		s, err := w.Bind(openXDPIn(t, nsF, name, PortConfig{}), 0)
		if err != nil {
			t.Fatal(err)
		}
		socks = append(socks, s)
	}
	for i, s := range socks {
		if s.fillOut < w.fillTarget/2 {
			t.Errorf("socket %d: %d frames in its fill ring, want about %d", i, s.fillOut, w.fillTarget)
		}
	}
}

// TestXDPWaitBusyPoll: after frames arrived, Wait spins for BusyPoll (not
// Spin) before it blocks, so a frame that comes a few milliseconds later
// is taken without a wake-up; once the traffic stopped for longer than
// BusyPoll, Wait blocks after Spin again. The counters say which happened.
func TestXDPWaitBusyPoll(t *testing.T) {
	const busy = 300 * time.Millisecond
	c := newXDPChain(t, WorkerConfig{Spin: -1, BusyPoll: busy})
	if d := c.w.spinFor(); d != 0 {
		t.Fatalf("idle worker spins %v, want 0 (Spin -1)", d)
	}
	gen := newUDPSender(t, c.nsA, "a", c.fa.MAC, 1)
	frames, meta := make([][]byte, 64), make([]pktio.Meta, 64)
	take := func() { // waits for a frame, for at most 5 Waits
		t.Helper()
		for range 5 {
			if err := c.w.Wait(); err != nil {
				t.Fatal(err)
			}
			n, err := c.sa.TryRecv(frames, meta)
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				return
			}
		}
		t.Fatal("no frame")
	}
	// Idle: the first Wait blocks in poll (no spin at all) and wakes.
	gen.Send(t, 1)
	take()
	w0 := c.w.WaitStats()
	if w0.Blocked == 0 && w0.Waits != 0 {
		t.Errorf("idle worker never blocked: %+v", w0)
	}
	if d := c.w.spinFor(); d != busy {
		t.Fatalf("after frames Wait spins %v, want BusyPoll %v", d, busy)
	}
	// Traffic flows: frames 20 ms apart are taken while spinning.
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		time.Sleep(20 * time.Millisecond)
		gen.Send(t, 1)
	}()
	take()
	<-sent
	w1 := c.w.WaitStats()
	if w1.Blocked != w0.Blocked || w1.Waits == w0.Waits {
		t.Errorf("busy worker blocked: before %+v, after %+v", w0, w1)
	}
	// Quiet for longer than BusyPoll: back to Spin.
	c.w.lastBusy = time.Now().Add(-2 * busy)
	if d := c.w.spinFor(); d != 0 {
		t.Errorf("quiet worker spins %v, want 0", d)
	}
	c.sa.Release()
	c.w.checkFrames(t)
}

// TestXDPWaitParksInNetpoller: an idle worker's Wait parks its goroutine in
// the Go netpoller ("IO wait" in a goroutine dump), not in a blocking
// poll(2) ("syscall"), which would keep its P: with as many Ps as workers,
// a worker woken meanwhile would wait for the runtime to take that P back
// while its ring fills. A frame then wakes it.
func TestXDPWaitParksInNetpoller(t *testing.T) {
	c := newXDPChain(t, WorkerConfig{Spin: -1})
	gen := newUDPSender(t, c.nsA, "a", c.fa.MAC, 1)
	done := make(chan error, 1)
	go func() { done <- c.w.Wait() }()
	state := ""
	for range 500 { // up to ~5 s for the goroutine to get there
		state = waitState(t, "(*Worker).Wait")
		if state != "" && state != "runnable" && state != "running" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.HasPrefix(state, "IO wait") {
		t.Fatalf("idle Wait's goroutine is in state %q, want IO wait (parked in the netpoller)", state)
	}
	gen.Send(t, 1)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a frame did not wake the parked Wait")
	}
	if !c.w.Ready() {
		t.Error("Wait returned with nothing ready")
	}
}

// waitState returns the state of the goroutine whose stack contains fn
// ("IO wait", "syscall", ...), "" when there is none.
func waitState(t *testing.T, fn string) string {
	t.Helper()
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, fn) {
			continue
		}
		head, _, _ := strings.Cut(g, "\n") // goroutine 7 [IO wait]:
		if i, j := strings.Index(head, "["), strings.LastIndex(head, "]"); i >= 0 && j > i {
			return head[i+1 : j]
		}
	}
	return ""
}
