package pktio

import (
	"bytes"
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
