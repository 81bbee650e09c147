package l2

import (
	"fmt"
	"testing"
)

// Every frame queued on a Tx carries the origin it was made of: its input
// frame's index in ReceiveBatch (unicast, inline and deferred floods alike),
// the origin given to Output/Send/SendRaw, and -1 for Receive outside a
// batch. FlushOrigins hands them back beside the frames.
func TestFlushOrigins(t *testing.T) {
	for _, threshold := range []int{-1, 1} { // floods inline / deferred to Flush
		t.Run(fmt.Sprintf("defer%d", threshold), func(t *testing.T) {
			tb := newTestBridge(t, BridgeAttrs{FloodDeferThreshold: new(threshold)}, "p1", "p2", "p3", "p4")
			tb.send("p1", untagged(mac(9), mac(1))) // learn mac(1) on p1
			tb.flush()

			want := map[string]int32{} // frame bytes -> origin
			batch := [][]byte{
				untagged(mac(1), mac(2)),  // 0: known unicast to p1
				tagged(mac(8), mac(2), 7), // 1: unknown unicast, flooded to p1 p3 p4
			}
			want[string(batch[0])] = 0
			want[string(batch[1])] = 1
			tb.b.ReceiveBatch(tb.tx, tb.ports["p2"], batch)

			single := untagged(mac(1), mac(4))
			want[string(single)] = -1
			tb.b.Receive(tb.tx, tb.ports["p3"], single)

			out := untagged(mac(1), tb.b.MAC)
			want[string(out)] = 5
			if n := tb.b.Output(tb.tx, 0, out, 5); n != 1 {
				t.Fatalf("Output: %d copies", n)
			}
			raw := untagged(mac(6), mac(5))
			want[string(raw)] = 3
			tb.tx.SendRaw(tb.ports["p4"], raw, 3)

			got := map[string][]int32{}
			tb.tx.FlushOrigins(func(p *Port, frames [][]byte, origins []int32) {
				if len(origins) != len(frames) {
					t.Fatalf("%s: %d frames, %d origins", p.Name, len(frames), len(origins))
				}
				for i, f := range frames {
					o, ok := want[string(f)]
					if !ok {
						t.Fatalf("%s: unexpected frame %x", p.Name, f)
					}
					if origins[i] != o {
						t.Errorf("%s: frame %x has origin %d, want %d", p.Name, f[:12], origins[i], o)
					}
					got[p.Name] = append(got[p.Name], origins[i])
				}
			})
			counts := map[string]int{"p1": 4, "p3": 1, "p4": 2} // p1: 0, 1, -1, 5; p3: 1; p4: 1, 3
			for p, n := range counts {
				if len(got[p]) != n {
					t.Errorf("%s: origins %v, want %d frames", p, got[p], n)
				}
			}
			if len(got["p2"]) != 0 {
				t.Errorf("p2 (ingress) got %v", got["p2"])
			}
		})
	}
}
