package afpacket

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/pktio/pktiotest"
)

// TestHandoverKeepsRing: a port's receive sockets handed to a new owner
// (here: duplicated fds, as pidfd_getfd gives another process) keep the
// frames already in the ring: the new reader continues exactly where the
// old one stopped, partly read V3 block included, and nothing is lost or
// read twice.
func TestHandoverKeepsRing(t *testing.T) {
	for _, ring := range []Ring{RingV2, RingV3} {
		t.Run(fmt.Sprint("ring", ring), func(t *testing.T) { testHandoverKeepsRing(t, ring) })
	}
}

func testHandoverKeepsRing(t *testing.T, ring Ring) {
	p := pktiotest.NewPair(t)
	old := openIn(t, p.NsB, p.B, Config{Ring: ring, BlockTimeout: time.Millisecond})
	c := pktiotest.RawSender(t, p.NsA, p.A)
	dst, src := pktiotest.MAC(t, p.NsB, p.B), pktiotest.MAC(t, p.NsA, p.A)
	rng := rand.New(rand.NewPCG(3, 4))
	var sent [][]byte
	for range 300 {
		sent = append(sent, pktiotest.Frame(rng, dst, src, 60+rng.IntN(1400)))
	}
	pktiotest.Send(t, c, sent[:100]...)
	time.Sleep(20 * time.Millisecond) // a V3 block retires
	// The old owner reads 37 frames in small batches, releasing each.
	var got [][]byte
	frames, meta := make([][]byte, 5), make([]pktio.Meta, 5)
	for deadline := time.Now().Add(2 * time.Second); len(got) < 37 && time.Now().Before(deadline); {
		n, err := old.Queue(0).TryRecv(frames[:min(5, 37-len(got))], meta)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range frames[:n] {
			got = append(got, bytes.Clone(f[old.Queue(0).Headroom():]))
		}
		old.Queue(0).Release()
	}
	st, err := old.Describe()
	if err != nil {
		t.Fatal(err)
	}
	pos, err := old.QueuePositions()
	if err != nil {
		t.Fatal(err)
	}
	fds := dupFDs(t, st.FDs)
	// The old owner goes away entirely: its fds closed, its ring unmapped.
	old.Shutdown()
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	adopted := adoptIn(t, p.NsB, st, fds, pos)
	pktiotest.Send(t, c, sent[100:]...) // while nobody reads: they wait in the ring
	rest, _ := pktiotest.RecvN(t, adopted.Queue(0), len(sent)-len(got), 2*time.Second)
	got = append(got, rest...)
	if len(got) != len(sent) {
		t.Fatalf("received %d frames across the handover, sent %d", len(got), len(sent))
	}
	for i := range sent {
		if !bytes.Equal(got[i], sent[i]) {
			t.Fatalf("frame %d differs after the handover (%d bytes, want %d)", i, len(got[i]), len(sent[i]))
		}
	}
	if d := adopted.Stats().Rx.RingDrops; d != 0 {
		t.Errorf("ring drops %d", d)
	}
}

// TestAdoptRefusesOtherSockets: fds that are not the port's packet
// sockets are refused (and closed), never mapped.
func TestAdoptRefusesOtherSockets(t *testing.T) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Adopt(PortState{Name: "lo", Index: 1, Config: Config{Queues: 1}, FDs: []int{3}}, []int{fd})
	if err == nil {
		t.Fatal("a UDP socket was adopted as a packet socket")
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
		t.Error("the refused fd was left open")
	}
}

// TestHandedOverLetsGo: once HandedOver, a port's process holds no
// descriptor of the receive sockets it shared (each would stay in its Go
// netpoller and be woken by every frame the new owner reads), the new
// owner reads on, and Close afterwards still unmaps cleanly.
func TestHandedOverLetsGo(t *testing.T) {
	p := pktiotest.NewPair(t)
	old := openIn(t, p.NsB, p.B, Config{Ring: RingV2})
	st, err := old.Describe()
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[int]uint64{}
	for _, fd := range st.FDs {
		var s unix.Stat_t
		if err := unix.Fstat(fd, &s); err != nil {
			t.Fatal(err)
		}
		inodes[fd] = s.Ino
	}
	fds := dupFDs(t, st.FDs)
	pos, err := old.QueuePositions()
	if err != nil {
		t.Fatal(err)
	}
	adopted := adoptIn(t, p.NsB, st, fds, pos)
	if err := old.HandedOver(); err != nil {
		t.Fatal(err)
	}
	for fd, ino := range inodes {
		var s unix.Stat_t
		if err := unix.Fstat(fd, &s); err == nil && s.Ino == ino {
			t.Errorf("fd %d still holds the handed-over socket", fd)
		}
	}
	if _, err := old.Queue(0).TryRecv(make([][]byte, 1), make([]pktio.Meta, 1)); err != pktio.ErrClosed {
		t.Errorf("the handed-over queue reads: %v", err)
	}
	c := pktiotest.RawSender(t, p.NsA, p.A)
	dst, src := pktiotest.MAC(t, p.NsB, p.B), pktiotest.MAC(t, p.NsA, p.A)
	rng := rand.New(rand.NewPCG(5, 6))
	var sent [][]byte
	for range 50 {
		sent = append(sent, pktiotest.Frame(rng, dst, src, 60+rng.IntN(1400)))
	}
	pktiotest.Send(t, c, sent...)
	got, _ := pktiotest.RecvN(t, adopted.Queue(0), len(sent), 2*time.Second)
	if len(got) != len(sent) {
		t.Fatalf("the new owner read %d of %d frames", len(got), len(sent))
	}
	if err := old.Close(); err != nil {
		t.Fatalf("Close after HandedOver: %v", err)
	}
}

// dupFDs duplicates a port's descriptors, as pidfd_getfd gives them to
// another process.
func dupFDs(t *testing.T, fds []int) []int {
	t.Helper()
	var out []int
	for _, fd := range fds {
		d, err := unix.Dup(fd)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// adoptIn adopts a described port's duplicated descriptors in namespace
// ns and continues its queues at pos; the port is closed at the test's end.
func adoptIn(t *testing.T, ns string, st PortState, fds []int, pos []QueuePosition) *Port {
	t.Helper()
	adopted := adoptOnly(t, ns, st, fds)
	if err := adopted.SetQueuePositions(pos); err != nil {
		t.Fatal(err)
	}
	return adopted
}

// adoptOnly is adoptIn without the positions: a successor before its
// takeover.
func adoptOnly(t *testing.T, ns string, st PortState, fds []int) *Port {
	t.Helper()
	var adopted *Port
	if err := pktio.InNetns(ns, func() error {
		var err error
		adopted, err = Adopt(st, fds)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { adopted.Shutdown(); adopted.Close() })
	return adopted
}

// TestAdoptedStaysOutOfNetpoller: until SetQueuePositions (the takeover),
// no epoll set of the adopting process watches the adopted sockets: the
// running daemon still reads them, and every frame it received woke the
// successor's netpoller for the whole of its start. After it, the
// netpoller has them (the owner's reads wait there).
func TestAdoptedStaysOutOfNetpoller(t *testing.T) {
	p := pktiotest.NewPair(t)
	old := openIn(t, p.NsB, p.B, Config{Ring: RingV2})
	st, err := old.Describe()
	if err != nil {
		t.Fatal(err)
	}
	fds := dupFDs(t, st.FDs)
	adopted := adoptOnly(t, p.NsB, st, fds)
	watched := epollWatched(t)
	for _, fd := range fds {
		if watched[fd] {
			t.Errorf("adopted socket fd %d is in an epoll set before the takeover", fd)
		}
	}
	pos, err := old.QueuePositions()
	if err != nil {
		t.Fatal(err)
	}
	if err := adopted.SetQueuePositions(pos); err != nil {
		t.Fatal(err)
	}
	watched = epollWatched(t)
	for _, fd := range fds {
		if !watched[fd] {
			t.Errorf("adopted socket fd %d is in no epoll set after SetQueuePositions", fd)
		}
	}
}

// epollWatched is the set of fds some epoll instance of this process
// watches (the "tfd:" lines of its fdinfo).
func epollWatched(t *testing.T) map[int]bool {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]bool{}
	for _, e := range ents {
		if l, _ := os.Readlink("/proc/self/fd/" + e.Name()); l != "anon_inode:[eventpoll]" {
			continue
		}
		b, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "tfd:" {
				if fd, err := strconv.Atoi(f[1]); err == nil {
					out[fd] = true
				}
			}
		}
	}
	return out
}
