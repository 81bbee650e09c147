package neigh

// Benchmarks: the datapath lookup (hit) with 1K and 1M entries, on random
// and on one hot next hop, next to two baselines measured in the same run
// on the same keys doing the same work (find the entry, write the header):
// a plain Go map (not safe against a concurrent writer: the lower bound of
// a map design) and a map behind a sync.RWMutex (what a locked table costs); Resolve queueing
// behind an unresolved neighbour; the answer to an ARP request.
//
//   go test ./l3 -run XXX -bench 'entry|ARP' -benchmem

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/netfwd/netfwd/wire"
)

var benchSink bool

type benchTable struct {
	tab    *Table
	w      *Worker
	probes []wire.Addr4 // shuffled addresses, len a power of two
	m      map[uint64]*entry
}

var benchTables = map[int]*benchTable{}

func getBenchTable(b *testing.B, entries int) *benchTable {
	if bt := benchTables[entries]; bt != nil {
		return bt
	}
	tab, err := NewTable(Config{}, 1)
	if err != nil {
		b.Fatal(err)
	}
	bt := &benchTable{tab: tab, w: tab.NewWorker(), m: make(map[uint64]*entry, entries)}
	for i := 0; i < entries; i++ {
		ip := 0x0a000000 + wire.Addr4(i) + 1
		if err := tab.Add(Spec{IfIndex: 1, IP: ip, LLAddr: wire.MAC{2, 0, byte(i >> 16), byte(i >> 8), byte(i), 1},
			HasLLAddr: true, State: NUDPermanent, IfMAC: tIfMAC}, 1, nil); err != nil {
			b.Fatal(err)
		}
		bt.m[entryKey(1, ip)] = tab.lookup(1, ip)
	}
	n := 1
	for n < entries {
		n <<= 1
	}
	r := rand.New(rand.NewPCG(1, 1))
	bt.probes = make([]wire.Addr4, n)
	for i := range bt.probes {
		bt.probes[i] = 0x0a000000 + wire.Addr4(r.IntN(entries)) + 1
	}
	benchTables[entries] = bt
	return bt
}

func BenchmarkNeighOutput(b *testing.B) {
	for _, entries := range []int{1 << 10, 1 << 20} {
		bt := getBenchTable(b, entries)
		mask := len(bt.probes) - 1
		for _, probe := range []string{"random", "hot"} {
			hot := probe == "hot"
			name := fmt.Sprintf("entries=%dK/probe=%s", entries>>10, probe)
			b.Run(name+"/impl=neigh", func(b *testing.B) {
				hdr := make([]byte, 14)
				ok := true
				for i := 0; b.Loop(); i++ {
					ip := bt.probes[i&mask]
					if hot {
						ip = bt.probes[0]
					}
					ok = bt.w.Output(1, ip, hdr) && ok
				}
				if !ok {
					b.Fatal("miss")
				}
			})
			b.Run(name+"/impl=map", func(b *testing.B) {
				hdr := make([]byte, 14)
				ok := true
				for i := 0; b.Loop(); i++ {
					ip := bt.probes[i&mask]
					if hot {
						ip = bt.probes[0]
					}
					n := bt.m[entryKey(1, ip)]
					ok = n != nil && n.WriteHeader(hdr) && ok
				}
				benchSink = ok
			})
			b.Run(name+"/impl=rwmutex-map", func(b *testing.B) {
				var mu sync.RWMutex
				hdr := make([]byte, 14)
				ok := true
				for i := 0; b.Loop(); i++ {
					ip := bt.probes[i&mask]
					if hot {
						ip = bt.probes[0]
					}
					mu.RLock()
					n := bt.m[entryKey(1, ip)]
					ok = n != nil && n.WriteHeader(hdr) && ok
					mu.RUnlock()
				}
				benchSink = ok
			})
		}
	}
}

// Queueing behind an INCOMPLETE neighbour whose queue is full (steady state
// of traffic to an unresolved next hop).
func BenchmarkNeighResolveQueued(b *testing.B) {
	tab, _ := NewTable(Config{}, 1)
	w := tab.NewWorker()
	var out Actions
	pkt := ipPacket(1, tPeer, 64)
	for i := 0; i < 5000; i++ {
		w.Resolve(1, tPeer, tIfMAC, pkt, 0, 1, &out)
	}
	out.Reset()
	for i := 0; b.Loop(); i++ {
		if w.Resolve(1, tPeer, tIfMAC, pkt, 0, 1, &out).Verdict != Queued {
			b.Fatal("not queued")
		}
	}
}

// Resolve for new destinations: create, queue, broadcast request; the table
// stays full (forced gc and refusals).
func BenchmarkNeighResolveNew(b *testing.B) {
	tab, _ := NewTable(Config{}, 1)
	w := tab.NewWorker()
	var out Actions
	pkt := ipPacket(1, tPeer, 64)
	now := int64(1)
	for i := 0; b.Loop(); i++ {
		now += 10_000
		w.Resolve(1, 0x0b000000+wire.Addr4(i&0xffffff), tIfMAC, pkt, 0, now, &out)
		out.Reset()
		if i&1023 == 0 {
			tab.Tick(now, &out)
			out.Reset()
		}
	}
}

// The answer to an ARP request for our address from a known sender.
func BenchmarkARPReply(b *testing.B) {
	tab, _ := NewTable(Config{}, 1)
	w := tab.NewWorker()
	in := &ARPInput{IfIndex: 1, IfMAC: tIfMAC, Addrs: refAddrs{tLocal: true}}
	frame := arpFrame(wire.BroadcastMAC, wire.ARPRequest, tMAC1, tPeer, wire.MAC{}, tLocal)
	reply := make([]byte, 64)
	var out Actions
	w.InputARP(in, frame, 1, reply, &out)
	for i := 0; b.Loop(); i++ {
		if n, _ := w.InputARP(in, frame, 1, reply, &out); n == 0 {
			b.Fatal("no reply")
		}
	}
}

// Building a reply alone (the baseline for BenchmarkARPReply).
func BenchmarkARPBuildReply(b *testing.B) {
	reply := make([]byte, 64)
	for i := 0; b.Loop(); i++ {
		wire.BuildARPReply(reply, tIfMAC, tLocal, tMAC1, tPeer)
	}
}
