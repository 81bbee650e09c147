package pktio

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"
)

// openXDPIn opens an XDPPort inside namespace ns, closed when the test ends.
func openXDPIn(t testing.TB, ns, iface string, cfg XDPPortConfig) *XDPPort {
	t.Helper()
	var p *XDPPort
	err := InNetns(ns, func() error {
		var err error
		p, err = OpenXDP(iface, cfg)
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
func newXDPWorker(t testing.TB, cfg XDPWorkerConfig) *XDPWorker {
	t.Helper()
	w, err := NewXDPWorker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// xdpRecvN receives until want frames arrived (copies) or the deadline.
func xdpRecvN(t testing.TB, s *XDPSocket, want int, d time.Duration) ([][]byte, []Meta) {
	t.Helper()
	var got [][]byte
	var metas []Meta
	frames, meta := make([][]byte, 64), make([]Meta, 64)
	deadline := time.Now().Add(d)
	for len(got) < want && time.Now().Before(deadline) {
		n, err := s.TryRecv(frames, meta)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			time.Sleep(time.Millisecond)
			continue
		}
		for i := range n {
			got = append(got, bytes.Clone(frames[i][s.Headroom():]))
			metas = append(metas, meta[i])
		}
	}
	return got, metas
}

func TestXDPRecvIntact(t *testing.T) {
	p := newPair(t)
	port := openXDPIn(t, p.nsB, p.b, XDPPortConfig{})
	t.Logf("attach %v, %d queues", port.Attach(), port.Queues())
	w := newXDPWorker(t, XDPWorkerConfig{Headroom: 4})
	s, err := w.Bind(port, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("socket mode %s", s.Mode())
	c := rawSender(t, p.nsA, p.a)
	dst, src := port.MAC, macIn(t, p.nsA, p.a)
	rng := rand.New(rand.NewPCG(1, 2))
	var sent [][]byte
	for _, n := range []int{60, 61, 64, 100, 128, 500, 1000, 1514} {
		sent = append(sent, testFrame(rng, dst, src, n))
	}
	send(t, c, sent...)
	got, meta := xdpRecvN(t, s, len(sent), 2*time.Second)
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
	fa, fb        *XDPPort
	w             *XDPWorker
	sa, sb        *XDPSocket
}

func newXDPChain(t testing.TB, wcfg XDPWorkerConfig, extra ...string) *xdpChain {
	t.Helper()
	c := &xdpChain{nsA: netns(t, "pxA"), nsF: netns(t, "pxF"), nsB: netns(t, "pxB")}
	addVeth(t, c.nsA, "a", c.nsF, "fa", extra...)
	addVeth(t, c.nsF, "fb", c.nsB, "b", extra...)
	c.fa = openXDPIn(t, c.nsF, "fa", XDPPortConfig{})
	c.fb = openXDPIn(t, c.nsF, "fb", XDPPortConfig{})
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
	c := newXDPChain(t, XDPWorkerConfig{Headroom: 4})
	peer := openIn(t, c.nsB, "b", Config{})
	inj := rawSender(t, c.nsA, "a")
	rng := rand.New(rand.NewPCG(21, 22))
	var sent [][]byte
	for i := range 100 {
		f := testFrame(rng, c.fa.MAC, macIn(t, c.nsA, "a"), 60+rng.IntN(1400))
		binary.BigEndian.PutUint32(f[14:], uint32(i))
		sent = append(sent, f)
	}
	send(t, inj, sent...)
	frames, meta := make([][]byte, 256), make([]Meta, 256)
	var want [][]byte // what b must see, in order
	deadline := time.Now().Add(3 * time.Second)
	got := 0
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
		gen := testFrame(rng, peer.MAC, c.fb.MAC, 80)
		out = append(out, out[0], gen)
		want = append(want, bytes.Clone(out[0]), gen)
		if k, err := c.sb.Send(out, nil); err != nil || k != len(out) {
			t.Fatalf("Send = %d, %v; want %d", k, err, len(out))
		}
		got += n
	}
	if got != len(sent) {
		t.Fatalf("forwarded %d of %d", got, len(sent))
	}
	rcv, _ := recvN(t, peer.Queue(0), len(want), 3*time.Second)
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
	c.sa.Release()
	c.w.checkFrames(t)
}

// checkFrames checks the worker's frame accounting against a recount: the
// free list holds distinct frames, exactly those in state free, and every
// frame is in one known state.
func (w *XDPWorker) checkFrames(t testing.TB) {
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
