package afpacket

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/pktio/pktiotest"
)

func TestSendBatchArrives(t *testing.T) {
	for _, mode := range []TxMode{TxSendmmsg, TxRing} {
		for _, noOffload := range []bool{false, true} {
			name := mode.String()
			if noOffload {
				name += "-nooffload"
			}
			t.Run(name, func(t *testing.T) {
				p := pktiotest.NewPair(t)
				src := openIn(t, p.NsB, p.B, Config{Tx: mode, NoOffload: noOffload, TxFrames: 64})
				dst := openIn(t, p.NsA, p.A, Config{})
				tx, err := src.NewTx()
				if err != nil {
					t.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(7, 8))
				var sent [][]byte
				for i := range 300 { // more than the 64-slot ring: exercises waiting
					sent = append(sent, pktiotest.Frame(rng, dst.MAC, src.MAC, 60+rng.IntN(1455)))
					_ = i
				}
				n, err := tx.Send(sent, nil)
				if err != nil || n != len(sent) {
					t.Fatalf("Send = %d, %v; want %d", n, err, len(sent))
				}
				got, _ := pktiotest.RecvN(t, dst.Queue(0), len(sent), 3*time.Second)
				if len(got) != len(sent) {
					t.Fatalf("peer received %d of %d frames", len(got), len(sent))
				}
				for i := range sent {
					if !bytes.Equal(got[i], sent[i]) {
						t.Fatalf("frame %d differs", i)
					}
				}
				st := src.Stats().Tx
				if st.Packets != uint64(len(sent)) || st.Refused+st.Errors+st.BadOffload != 0 {
					t.Errorf("tx stats %+v", st)
				}
			})
		}
	}
}

func TestSendRefusesBadFramesAndGoesOn(t *testing.T) {
	p := pktiotest.NewPair(t)
	src := openIn(t, p.NsB, p.B, Config{})
	dst := openIn(t, p.NsA, p.A, Config{})
	tx, err := src.NewTx()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(9, 10))
	good1 := pktiotest.Frame(rng, dst.MAC, src.MAC, 100)
	tooBig := pktiotest.Frame(rng, dst.MAC, src.MAC, 3000) // above the MTU, not GSO
	good2 := pktiotest.Frame(rng, dst.MAC, src.MAC, 200)
	runt := []byte{1, 2, 3}
	// A partial checksum whose field lies beyond the end of the frame.
	badOffl := []pktio.Offload{{}, {}, {}, {}, {NeedsCsum: true, L4Off: 200, CsumOffset: 16}}
	n, err := tx.Send([][]byte{good1, tooBig, runt, good2, good1}, badOffl)
	if err != nil || n != 2 {
		t.Fatalf("Send = %d, %v; want 2, nil (stats %+v)", n, err, src.Stats().Tx)
	}
	got, _ := pktiotest.RecvN(t, dst.Queue(0), 2, 2*time.Second)
	if len(got) != 2 || !bytes.Equal(got[0], good1) || !bytes.Equal(got[1], good2) {
		t.Fatalf("peer got %d frames", len(got))
	}
	st := src.Stats().Tx
	if st.Packets != 2 || st.Refused != 1 || st.BadOffload != 2 {
		t.Errorf("tx stats %+v, want 2 sent, 1 refused, 2 bad offload", st)
	}
}

// TestOwnFramesNotReceived: what a port transmits never comes back through
// its own queues (qdisc bypass skips the taps; PACKET_IGNORE_OUTGOING covers
// the qdisc path), while the peer does get it.
func TestOwnFramesNotReceived(t *testing.T) {
	for _, bypass := range []bool{true, false} {
		name := "bypass"
		if !bypass {
			name = "qdisc"
		}
		t.Run(name, func(t *testing.T) {
			p := pktiotest.NewPair(t)
			port := openIn(t, p.NsB, p.B, Config{NoQdiscBypass: !bypass})
			peer := openIn(t, p.NsA, p.A, Config{})
			tx, err := port.NewTx()
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(11, 12))
			var frames [][]byte
			for range 20 {
				frames = append(frames, pktiotest.Frame(rng, peer.MAC, port.MAC, 80))
			}
			if n, err := tx.Send(frames, nil); n != len(frames) || err != nil {
				t.Fatalf("Send = %d, %v", n, err)
			}
			if got, _ := pktiotest.RecvN(t, peer.Queue(0), len(frames), 2*time.Second); len(got) != len(frames) {
				t.Fatalf("peer received %d of %d", len(got), len(frames))
			}
			// A marker from the peer: once it is here, own frames would
			// have been seen before it.
			marker := pktiotest.Frame(rng, port.MAC, peer.MAC, 90)
			ptx, err := peer.NewTx()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ptx.Send([][]byte{marker}, nil); err != nil {
				t.Fatal(err)
			}
			got, _ := pktiotest.RecvN(t, port.Queue(0), 1, 2*time.Second)
			if len(got) != 1 || !bytes.Equal(got[0], marker) {
				t.Fatalf("port received %d frames before/instead of the marker", len(got))
			}
			if extra, _ := pktiotest.RecvN(t, port.Queue(0), 1, 20*time.Millisecond); len(extra) != 0 {
				t.Fatalf("port received %d own frames", len(extra))
			}
		})
	}
}

// TestFanoutSpreadsFlows: a port with two queues gets every frame exactly
// once, each flow (UDP source port) on one queue only, and both queues busy.
func TestFanoutSpreadsFlows(t *testing.T) {
	p := pktiotest.NewPair(t)
	port := openIn(t, p.NsB, p.B, Config{Queues: 2})
	if port.FanoutID() < 0 {
		t.Fatal("no fanout group")
	}
	gen := newUDPSender(t, p.NsA, p.A, port.MAC, 64)
	const total = 64 * 50
	type result struct{ flows map[uint16]int }
	results := make([]result, 2)
	done := make(chan int, 2)
	for qi := range 2 {
		results[qi].flows = map[uint16]int{}
		go func() {
			q := port.Queue(qi)
			frames, meta := make([][]byte, 256), make([]pktio.Meta, 256)
			for {
				n, err := q.Recv(frames, meta)
				if err != nil {
					done <- qi
					return
				}
				for _, f := range frames[:n] {
					results[qi].flows[uint16(f[34])<<8|uint16(f[35])]++
				}
			}
		}()
	}
	gen.Send(t, total)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if st := port.Stats().Rx; st.Packets+st.RingDrops >= total {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	port.Shutdown()
	<-done
	<-done
	st := port.Stats().Rx
	if st.Packets != total {
		t.Fatalf("received %d of %d (ring drops %d)", st.Packets, total, st.RingDrops)
	}
	for qi, r := range results {
		n := 0
		for _, c := range r.flows {
			n += c
		}
		t.Logf("queue %d: %d frames, %d flows", qi, n, len(r.flows))
		if len(r.flows) == 0 {
			t.Errorf("queue %d got no flows", qi)
		}
	}
	for f := range results[0].flows {
		if _, both := results[1].flows[f]; both {
			t.Errorf("flow %d seen on both queues", f)
		}
	}
	if len(results[0].flows)+len(results[1].flows) != 64 {
		t.Errorf("flows seen: %d + %d, want 64", len(results[0].flows), len(results[1].flows))
	}
}

// TestDatapathAllocs: Recv and Send do not allocate per batch or frame.
func TestDatapathAllocs(t *testing.T) {
	p := pktiotest.NewPair(t)
	port := openIn(t, p.NsB, p.B, Config{})
	peer := openIn(t, p.NsA, p.A, Config{})
	gen := newUDPSender(t, p.NsA, p.A, port.MAC, 1)
	tx, err := port.NewTx()
	if err != nil {
		t.Fatal(err)
	}
	q := port.Queue(0)
	frames, meta := make([][]byte, 64), make([]pktio.Meta, 64)
	offl := make([]pktio.Offload, 64)
	allocs := testing.AllocsPerRun(50, func() {
		gen.Send(t, 32)
		n, err := q.Recv(frames, meta)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			offl[i] = meta[i].Offload
		}
		if _, err := tx.Send(frames[:n], offl[:n]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per blast+Recv+Send, want 0", allocs)
	}
	if port.Stats().Tx.Packets < 50*32 || peer.MAC == nil {
		t.Errorf("%d frames forwarded, want at least %d", port.Stats().Tx.Packets, 50*32)
	}
}
