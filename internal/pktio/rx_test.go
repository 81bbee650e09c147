package pktio

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/mdlayher/packet"
	"net"
)

// rawSender opens a plain packet socket on iface in ns for injecting frames.
func rawSender(t testing.TB, ns, iface string) *packet.Conn {
	t.Helper()
	var c *packet.Conn
	err := InNetns(ns, func() error {
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		c, err = packet.Listen(ifi, packet.Raw, 0, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func send(t testing.TB, c *packet.Conn, frames ...[]byte) {
	t.Helper()
	for _, f := range frames {
		if _, err := c.WriteTo(f, &packet.Addr{HardwareAddr: f[0:6]}); err != nil {
			t.Fatalf("inject %d bytes: %v", len(f), err)
		}
	}
}

// recvN receives until want frames arrived (copies) or the deadline.
func recvN(t testing.TB, q *Queue, want int, d time.Duration) ([][]byte, []Meta) {
	t.Helper()
	var got [][]byte
	var metas []Meta
	frames := make([][]byte, 64)
	meta := make([]Meta, 64)
	deadline := time.Now().Add(d)
	for len(got) < want && time.Now().Before(deadline) {
		n, err := q.TryRecv(frames, meta)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			time.Sleep(time.Millisecond)
			continue
		}
		for i := range n {
			got = append(got, bytes.Clone(frames[i][q.Headroom():]))
			metas = append(metas, meta[i])
		}
	}
	return got, metas
}

// testFrame builds an Ethernet frame of length n with a private ethertype
// and a random payload.
func testFrame(rng *rand.Rand, dst, src net.HardwareAddr, n int) []byte {
	f := make([]byte, n)
	copy(f, dst)
	copy(f[6:], src)
	binary.BigEndian.PutUint16(f[12:], 0x88b5)
	for i := 14; i < n; i++ {
		f[i] = byte(rng.Uint32())
	}
	return f
}

func TestRecvIntact(t *testing.T) {
	p := newPair(t)
	port := openIn(t, p.nsB, p.b, Config{})
	c := rawSender(t, p.nsA, p.a)
	dst, src := macIn(t, p.nsB, p.b), macIn(t, p.nsA, p.a)
	rng := rand.New(rand.NewPCG(1, 2))
	var sent [][]byte
	for _, n := range []int{60, 61, 64, 100, 128, 500, 1000, 1514} {
		sent = append(sent, testFrame(rng, dst, src, n))
	}
	send(t, c, sent...)
	got, meta := recvN(t, port.Queue(0), len(sent), 2*time.Second)
	if len(got) != len(sent) {
		t.Fatalf("received %d frames, want %d", len(got), len(sent))
	}
	for i := range sent {
		if !bytes.Equal(got[i], sent[i]) {
			t.Errorf("frame %d (%d bytes) differs:\n got %x\nwant %x", i, len(sent[i]), got[i], sent[i])
		}
		if int(meta[i].Len) != len(sent[i]) || meta[i].Flags&FlagVLANRestored != 0 {
			t.Errorf("frame %d meta %+v", i, meta[i])
		}
	}
	st := port.Stats()
	if st.Rx.Packets != uint64(len(sent)) || st.Rx.RingDrops != 0 {
		t.Errorf("stats %+v", st.Rx)
	}
}
