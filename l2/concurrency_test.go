package l2

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netfwd/netfwd/wire"
)

// TestConcurrentWorkersAndConfig runs several datapath workers (own Tx each)
// while the control plane changes VLANs, flags and static entries, ages the
// FDB and reads counters and dumps. Run under -race it checks the lock-free
// protocol; it also checks that counters add up across workers.
func TestConcurrentWorkersAndConfig(t *testing.T) {
	names := []string{"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9"}
	tb := newTestBridge(t, BridgeAttrs{VLANFiltering: new(true), FloodDeferThreshold: new(5)}, names...)
	for _, n := range names {
		tb.apply(VLANAdd{Dev: n, VID: 10, VIDEnd: 14})
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var sent atomic.Uint64
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			tx := tb.d.NewTx(TxOptions{})
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := 0; !stop.Load() || i < 2000; i++ {
				in := tb.ports[names[rng.IntN(len(names))]]
				src, dst := mac(1+rng.IntN(300)), mac(1+rng.IntN(300))
				if rng.IntN(5) == 0 {
					dst = wire.BroadcastMAC
				}
				tb.b.Receive(tx, in, tagged(dst, src, 10+rng.IntN(6)))
				sent.Add(1)
				if i%16 == 15 {
					tx.Flush(func(*Port, [][]byte) {})
				}
			}
			tx.Flush(nil)
		}(w)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		p := names[rng.IntN(len(names))]
		vid := uint16(10 + rng.IntN(5))
		var op Op
		switch rng.IntN(5) {
		case 0:
			op = VLANAdd{Dev: p, VID: vid, Untagged: rng.IntN(2) == 0}
		case 1:
			op = VLANDel{Dev: p, VID: vid}
		case 2:
			op = LinkSet{Dev: p, Set: FlagIsolated}
		case 3:
			op = LinkSet{Dev: p, Clear: FlagIsolated, State: new(StateForwarding)}
		default:
			op = FDBAdd{MAC: mac(1 + rng.IntN(300)), Dev: p, VID: vid, HasVID: true, Kind: FDBStatic, Replace: true}
		}
		_ = tb.d.Apply(op)
		tb.clock.Advance(time.Second)
		tb.b.Age()
		_ = tb.d.Stats()
		_ = tb.b.FDB().Entries()
		runtime.Gosched()
	}
	stop.Store(true)
	wg.Wait()
	st := tb.d.Stats()
	var rx uint64
	for _, ps := range st.Ports {
		rx += ps.RxPackets
	}
	// The test bridge's own tx handled a few frames during setup: none here.
	if rx != sent.Load() {
		t.Fatalf("rx %d, sent %d", rx, sent.Load())
	}
}

// TestMACFloodDefaultLimit: a bridge without fdb_max_learned stops
// learning at DefaultFDBMaxLearned and counts the sources it refused;
// fdb_max_learned raises the limit at run time, and 0 brings the default
// back.
func TestMACFloodDefaultLimit(t *testing.T) {
	tb := newTestBridge(t, BridgeAttrs{}, "p1", "p2")
	in := tb.ports["p1"]
	frame := untagged(mac(1), mac(2))
	next := uint64(0)
	flood := func(n int) {
		for i := 0; i < n; i++ {
			next++
			x := next
			frame[6], frame[7], frame[8], frame[9], frame[10], frame[11] = 0x02, byte(x>>32), byte(x>>24), byte(x>>16), byte(x>>8), byte(x)
			tb.b.Receive(tb.tx, in, frame)
			if i%64 == 63 {
				tb.tx.Flush(nil)
			}
		}
		tb.tx.Flush(nil)
	}
	flood(DefaultFDBMaxLearned + 1000)
	if n := tb.b.FDB().Learned(); n != DefaultFDBMaxLearned {
		t.Fatalf("learned %d, want the default limit %d", n, DefaultFDBMaxLearned)
	}
	if st := tb.d.Stats(); st.FDBLimitHit != 1000 {
		t.Fatalf("limit hits %d, want 1000", st.FDBLimitHit)
	}
	if got := tb.b.FDB().MaxLearned(); got != DefaultFDBMaxLearned {
		t.Fatalf("MaxLearned %d", got)
	}
	tb.apply(BridgeSet{Name: "br0", Attrs: BridgeAttrs{FDBMaxLearned: new(uint32(DefaultFDBMaxLearned + 500))}})
	flood(1000)
	if n := tb.b.FDB().Learned(); n != DefaultFDBMaxLearned+500 {
		t.Fatalf("learned %d after raising the limit by 500", n)
	}
	tb.apply(BridgeSet{Name: "br0", Attrs: BridgeAttrs{FDBMaxLearned: new(uint32(0))}})
	if got := tb.b.FDB().MaxLearned(); got != DefaultFDBMaxLearned {
		t.Fatalf("MaxLearned %d after fdb_max_learned 0", got)
	}
}

// TestMACFloodStaysAtLimit: a flood of 1M random source MACs (2^20) leaves
// the FDB at fdb_max_learned, and a second flood of fresh MACs does not grow
// the heap (refused entries allocate nothing).
func TestMACFloodStaysAtLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("1M frames")
	}
	const limit = 4096
	tb := newTestBridge(t, BridgeAttrs{FDBMaxLearned: new(uint32(limit))}, "p1", "p2")
	in := tb.ports["p1"]
	frame := untagged(mac(1), mac(2))
	rng := rand.New(rand.NewPCG(1, 1))
	flood := func(n int) {
		for i := 0; i < n; i++ {
			x := rng.Uint64()
			frame[6], frame[7], frame[8], frame[9], frame[10], frame[11] = byte(x)&0xfe, byte(x>>8), byte(x>>16), byte(x>>24), byte(x>>32), byte(x>>40)|1
			tb.b.Receive(tb.tx, in, frame)
			if i%64 == 63 {
				tb.tx.Flush(nil)
			}
		}
		tb.tx.Flush(nil)
	}
	flood(1 << 19)
	var m1, m2 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m1)
	flood(1 << 19)
	runtime.GC()
	runtime.ReadMemStats(&m2)
	if n := tb.b.FDB().Learned(); n != limit {
		t.Fatalf("learned %d, limit %d", n, limit)
	}
	if st := tb.d.Stats(); st.FDBLimitHit < 1<<19 {
		t.Fatalf("limit hits %d", st.FDBLimitHit)
	}
	if grow := int64(m2.HeapAlloc) - int64(m1.HeapAlloc); grow > 1<<20 {
		t.Fatalf("heap grew %d bytes during the second half of the flood", grow)
	}
	if m2.Mallocs-m1.Mallocs > 1000 {
		t.Fatalf("%d allocations for 512K refused MACs", m2.Mallocs-m1.Mallocs)
	}
	t.Logf("FDB %d entries, heap %d KiB", tb.b.FDB().Len(), m2.HeapAlloc>>10)
}
