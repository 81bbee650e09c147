package afpacket

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/pktio/pktiotest"
)

func TestRecvIntact(t *testing.T) {
	for _, ring := range []Ring{RingV3, RingV2} {
		t.Run(fmt.Sprint("ring", ring), func(t *testing.T) { testRecvIntact(t, ring) })
	}
}

// testRecvIntact: frames of every size arrive byte for byte; with V2, the
// frames above its 2 KiB slot (jumbo, MTU 9000) come through the socket's
// queue (TP_STATUS_COPY) in their place in the order.
func testRecvIntact(t *testing.T, ring Ring) {
	p := pktiotest.NewPair(t, "mtu", "9000")
	port := openIn(t, p.NsB, p.B, Config{Ring: ring})
	c := pktiotest.RawSender(t, p.NsA, p.A)
	dst, src := pktiotest.MAC(t, p.NsB, p.B), pktiotest.MAC(t, p.NsA, p.A)
	rng := rand.New(rand.NewPCG(1, 2))
	var sent [][]byte
	for _, n := range []int{60, 61, 64, 100, 128, 500, 1000, 1514, 2100, 60, 9014, 3000, 1514} {
		sent = append(sent, pktiotest.Frame(rng, dst, src, n))
	}
	pktiotest.Send(t, c, sent...)
	got, meta := pktiotest.RecvN(t, port.Queue(0), len(sent), 2*time.Second)
	if len(got) != len(sent) {
		t.Fatalf("received %d frames, want %d", len(got), len(sent))
	}
	for i := range sent {
		if !bytes.Equal(got[i], sent[i]) {
			t.Errorf("frame %d (%d bytes) differs:\n got %x\nwant %x", i, len(sent[i]), got[i], sent[i])
		}
		if int(meta[i].Len) != len(sent[i]) || meta[i].Flags&pktio.FlagVLANRestored != 0 {
			t.Errorf("frame %d meta %+v", i, meta[i])
		}
	}
	st := port.Stats()
	if st.Rx.Packets != uint64(len(sent)) || st.Rx.RingDrops != 0 {
		t.Errorf("stats %+v", st.Rx)
	}
}

func TestRecvHeadroomAndVLANRestore(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"offload", Config{}},
		{"offload-headroom4", Config{Headroom: 4}},
		{"nooffload-headroom40", Config{NoOffload: true, Headroom: 40}},
		{"v2-offload-headroom4", Config{Ring: RingV2, Headroom: 4}},
		{"v2-nooffload-headroom40", Config{Ring: RingV2, NoOffload: true, Headroom: 40}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pktiotest.NewPair(t)
			port := openIn(t, p.NsB, p.B, tc.cfg)
			c := pktiotest.RawSender(t, p.NsA, p.A)
			dst, src := pktiotest.MAC(t, p.NsB, p.B), pktiotest.MAC(t, p.NsA, p.A)
			rng := rand.New(rand.NewPCG(3, 4))
			tagged := func(n int, tags ...uint32) []byte {
				inner := pktiotest.Frame(rng, dst, src, n)
				f := append([]byte{}, inner[:12]...)
				for _, tg := range tags {
					f = binary.BigEndian.AppendUint32(f, tg)
				}
				return append(f, inner[12:]...)
			}
			sent := [][]byte{
				tagged(60, 0x8100_a064),               // 802.1Q, PCP 5, VID 100
				tagged(60, 0x8100_0000),               // priority tag, VID 0
				tagged(1510, 0x8100_0fff),             // VID 4095, 1514 bytes
				tagged(1000, 0x88a8_00c8),             // 802.1ad, VID 200
				tagged(100, 0x88a8_012c, 0x8100_0010), // QinQ: outer offloaded, inner in bytes
				pktiotest.Frame(rng, dst, src, 60),    // untagged
			}
			pktiotest.Send(t, c, sent...)
			got, meta := pktiotest.RecvN(t, port.Queue(0), len(sent), 2*time.Second)
			if len(got) != len(sent) {
				t.Fatalf("received %d frames, want %d", len(got), len(sent))
			}
			for i := range sent {
				if !bytes.Equal(got[i], sent[i]) {
					t.Errorf("frame %d differs:\n got %x\nwant %x", i, got[i], sent[i])
				}
				restored := meta[i].Flags&pktio.FlagVLANRestored != 0
				if restored != (i < 5) || int(meta[i].Len) != len(sent[i]) {
					t.Errorf("frame %d meta %+v", i, meta[i])
				}
				if restored && meta[i].VLANTCI != binary.BigEndian.Uint16(sent[i][14:]) {
					t.Errorf("frame %d TCI %#x", i, meta[i].VLANTCI)
				}
			}
			if st := port.Stats().Rx; st.VLANRestored != 5 {
				t.Errorf("VLANRestored = %d, want 5", st.VLANRestored)
			}
		})
	}
}

func TestRecvTruncatedDropped(t *testing.T) {
	p := pktiotest.NewPair(t)
	// 4 KiB blocks cannot hold the 9000-byte frame the MTU lets through.
	for _, dev := range []struct{ ns, name string }{{p.NsA, p.A}, {p.NsB, p.B}} {
		pktiotest.IP(t, dev.ns, "link", "set", "dev", dev.name, "mtu", "9000")
	}
	port := openIn(t, p.NsB, p.B, Config{BlockSize: 4096, Blocks: 8})
	c := pktiotest.RawSender(t, p.NsA, p.A)
	dst, src := pktiotest.MAC(t, p.NsB, p.B), pktiotest.MAC(t, p.NsA, p.A)
	rng := rand.New(rand.NewPCG(5, 6))
	small := pktiotest.Frame(rng, dst, src, 100)
	pktiotest.Send(t, c, pktiotest.Frame(rng, dst, src, 9000), small)
	got, _ := pktiotest.RecvN(t, port.Queue(0), 1, 2*time.Second)
	if len(got) != 1 || !bytes.Equal(got[0], small) {
		t.Fatalf("got %d frames, want only the small one", len(got))
	}
	if st := port.Stats().Rx; st.Truncated != 1 {
		t.Errorf("Truncated = %d, want 1", st.Truncated)
	}
}

func TestRecvShutdownWakesBlockedOwner(t *testing.T) {
	p := pktiotest.NewPair(t)
	port := openIn(t, p.NsB, p.B, Config{})
	errc := make(chan error, 1)
	go func() {
		frames, meta := make([][]byte, 8), make([]pktio.Meta, 8)
		_, err := port.Queue(0).Recv(frames, meta)
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	port.Shutdown()
	select {
	case err := <-errc:
		if !errors.Is(err, pktio.ErrClosed) {
			t.Fatalf("Recv after Shutdown: %v, want ErrClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Recv still blocked 2s after Shutdown")
	}
}

// TestRecvBatchSpanningRing: a batch larger than the ring holds (few small
// blocks, big frames, the ring full when read) never wraps onto blocks the
// caller still holds: frames arrive once and in order, and what does not
// arrive is counted as a ring drop.
func TestRecvBatchSpanningRing(t *testing.T) {
	// V3: 4 blocks of three frames; V2: 8 slots of one.
	for _, ring := range []Ring{RingV3, RingV2} {
		t.Run(fmt.Sprint("ring", ring), func(t *testing.T) { testRecvBatchSpanningRing(t, ring) })
	}
}

func testRecvBatchSpanningRing(t *testing.T, ring Ring) {
	p := pktiotest.NewPair(t)
	port := openIn(t, p.NsB, p.B, Config{BlockSize: 4096, Blocks: 4, Ring: ring})
	c := pktiotest.RawSender(t, p.NsA, p.A)
	dst, src := pktiotest.MAC(t, p.NsB, p.B), pktiotest.MAC(t, p.NsA, p.A)
	rng := rand.New(rand.NewPCG(13, 14))
	q := port.Queue(0)
	frames, meta := make([][]byte, 64), make([]pktio.Meta, 64)
	const rounds, perRound = 20, 12 // three 1200-byte frames fill a 4 KiB block
	last, got := -1, 0
	for round := range rounds {
		var sent [][]byte
		for range perRound {
			f := pktiotest.Frame(rng, dst, src, 1200)
			binary.BigEndian.PutUint32(f[14:], uint32(round*perRound+len(sent)))
			sent = append(sent, f)
		}
		pktiotest.Send(t, c, sent...)
		time.Sleep(5 * time.Millisecond) // let the blocks retire: the ring is full
		for {
			n, err := q.TryRecv(frames, meta)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			for _, f := range frames[:n] {
				seq := int(binary.BigEndian.Uint32(f[14:]))
				if seq <= last {
					t.Fatalf("round %d: frame %d after %d: a block was read twice", round, seq, last)
				}
				last = seq
				got++
			}
		}
	}
	st := port.Stats().Rx
	if got == 0 || uint64(got)+st.RingDrops != rounds*perRound {
		t.Fatalf("received %d + ring drops %d != sent %d", got, st.RingDrops, rounds*perRound)
	}
}
