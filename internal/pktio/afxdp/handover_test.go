package afxdp

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/pktio/pktiotest"
)

// TestHandoverKeepsRing: an AF_XDP port and worker handed to a new owner
// (here: duplicated fds, as pidfd_getfd gives another process, and a second
// mapping of the UMEM's memfd) keep the frames already received: the new
// reader continues exactly where the old one stopped, nothing is lost or
// read twice, and the program stays attached after the old owner closed
// everything of its own.
func TestHandoverKeepsRing(t *testing.T) {
	p := pktiotest.NewPair(t)
	var old *Port
	pktiotest.Do(t, p.NsB, func() (err error) { old, err = Open(p.B, PortConfig{}); return err })
	t.Cleanup(func() { old.Close() })
	ow, err := NewWorker(WorkerConfig{Headroom: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ow.Close() })
	os, err := ow.Bind(old, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := pktiotest.RawSender(t, p.NsA, p.A)
	dst, src := old.MAC, pktiotest.MAC(t, p.NsA, p.A)
	rng := rand.New(rand.NewPCG(5, 6))
	var sent [][]byte
	for range 300 {
		sent = append(sent, pktiotest.Frame(rng, dst, src, 60+rng.IntN(1400)))
	}
	pktiotest.Send(t, c, sent[:100]...)
	// The old owner reads 37 frames in small batches; the last batch stays
	// held (Describe releases it, as a parked daemon worker's).
	// The frames of the last batch are echoed back by descriptor: they
	// are in flight (TX ring or completion ring) at the handover.
	var got [][]byte
	frames, meta := make([][]byte, 5), make([]pktio.Meta, 5)
	for deadline := time.Now().Add(2 * time.Second); len(got) < 37 && time.Now().Before(deadline); {
		n, err := os.TryRecv(frames[:min(5, 37-len(got))], meta)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range frames[:n] {
			got = append(got, bytes.Clone(f[os.Headroom():]))
		}
		if len(got) == 37 {
			echo := make([][]byte, n)
			for i, f := range frames[:n] {
				echo[i] = f[os.Headroom():]
			}
			if q, err := os.Send(echo, nil); q != n || err != nil {
				t.Fatalf("echo: %d of %d sent, %v", q, n, err)
			}
		}
	}
	pst, err := old.Describe()
	if err != nil {
		t.Fatal(err)
	}
	wst, err := ow.Describe()
	if err != nil {
		t.Fatal(err)
	}
	if len(wst.Sockets) != 1 {
		t.Fatalf("described %d sockets, want 1", len(wst.Sockets))
	}
	dup := func(fd int) int {
		d, err := unix.Dup(fd)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	mapFD, progFD, linkFD, memfd, sockFD := dup(pst.MapFD), dup(pst.ProgFD), dup(pst.LinkFD), dup(wst.MemFD), dup(wst.Sockets[0].FD)
	// The old owner goes away entirely: fds closed, rings and UMEM unmapped.
	old.HandOver()
	if err := ow.Close(); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	var np *Port
	pktiotest.Do(t, p.NsB, func() (err error) { np, err = AdoptPort(pst, mapFD, progFD, linkFD); return err })
	t.Cleanup(func() { np.Own(); np.Close() })
	u, err := MapUMEM(memfd) // as a successor does before the pause
	if err != nil {
		t.Fatal(err)
	}
	nw, err := AdoptWorkerUMEM(wst, u, []AdoptedSocket{{Port: np, FD: sockFD}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nw.Close() })
	ns := nw.Socket(np, 0)
	if ns == nil {
		t.Fatal("the adopted worker has no socket on queue 0")
	}
	pktiotest.Send(t, c, sent[100:]...) // still steered by the old process's program
	rest, _ := pktiotest.RecvN(t, ns, len(sent)-len(got), 2*time.Second)
	got = append(got, rest...)
	if len(got) != len(sent) {
		t.Fatalf("received %d frames across the handover, sent %d", len(got), len(sent))
	}
	for i := range sent {
		if !bytes.Equal(got[i], sent[i]) {
			t.Fatalf("frame %d differs after the handover (%d bytes, want %d)", i, len(got[i]), len(sent[i]))
		}
	}
	// The frames in flight at the handover complete in the new worker:
	// every frame is free or in the fill ring again, none lost.
	count := func(st uint8) (n int) {
		for _, x := range nw.state {
			if x == st {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(2 * time.Second); count(frameSent) > 0 && time.Now().Before(deadline); {
		ns.TryRecv(frames, meta)
		time.Sleep(time.Millisecond)
	}
	ns.Release()
	if free, kernel := count(frameFree), count(frameKernel); free != nw.nfree || kernel != ns.fillOut || free+kernel != len(nw.state) {
		t.Errorf("after the handover: %d frames free (list %d), %d in the kernel (fill %d), of %d",
			free, nw.nfree, kernel, ns.fillOut, len(nw.state))
	}
}

// TestAdoptWorkerRefusesOtherSockets: an fd that is not an XDP socket is
// refused (and closed), never mapped.
func TestAdoptWorkerRefusesOtherSockets(t *testing.T) {
	w, err := NewWorker(WorkerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := w.Describe()
	if err != nil {
		t.Fatal(err)
	}
	memfd, err := unix.Dup(st.MemFD)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	st.Sockets = []SocketState{{Port: "x", Queue: 0, Slot: 0, FD: 3}}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := &Port{Name: "x", queues: 1, socks: map[*Socket]struct{}{}}
	if _, err := AdoptWorker(st, memfd, []AdoptedSocket{{Port: p, FD: fd}}); err == nil {
		t.Fatal("a UDP socket was adopted as an XDP socket")
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
		t.Error("the refused fd was left open")
	}
	if _, err := unix.FcntlInt(uintptr(memfd), unix.F_GETFD, 0); err == nil {
		t.Error("the memfd was left open")
	}
}

// TestWorkerStateJSON: a worker's state survives the handover's JSON
// (the arrays travel as base64).
func TestWorkerStateJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	st := WorkerState{MemFD: 9, State: make([]uint8, 100), Owner: make(U16s, 100), Free: make(U32s, 37),
		Sockets: []SocketState{{Port: "p", Queue: 1, Slot: 2, FD: 3, FillOut: 4, NAPISet: true}}}
	for i := range st.State {
		st.State[i], st.Owner[i] = uint8(rng.IntN(6)), uint16(rng.Uint32())
	}
	for i := range st.Free {
		st.Free[i] = rng.Uint32()
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var got WorkerState
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, st) {
		t.Errorf("after JSON:\n%+v\nwant\n%+v", got, st)
	}
	if err := json.Unmarshal([]byte(`{"Owner":"AAA="}`), &got); err == nil {
		t.Error("an odd number of bytes decoded as 16-bit entries")
	}
}
