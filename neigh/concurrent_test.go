package neigh

// Concurrency: datapath lookups on several goroutines while a writer churns
// the table (ARP learning with changing addresses, admin replace/delete,
// flushes, timers, index rebuilds). Run under -race. Readers check that
//   - permanent keys that are never deleted are always found and usable
//     (the index never loses a live key, even across rebuilds);
//   - every header they get is a whole one: a destination MAC from the pool
//     the writer uses, the interface MAC, EtherType IPv4 (never torn).

import (
	"bytes"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/race"
	"github.com/netfwd/netfwd/wire"
)

func TestNeighConcurrentLookupsDuringUpdates(t *testing.T) {
	writes := 200_000
	if race.Enabled || testing.Short() {
		writes = 30_000
	}
	p := DefaultParams()
	p.GCThresh1, p.GCThresh2, p.GCThresh3 = 16, 256, 512
	h := newHarness(t, p)
	macs := []wire.MAC{tMAC1, tMAC2, {0x02, 0, 0, 0, 0, 0x33}}
	const stable = 32
	for i := uint32(0); i < stable; i++ {
		if err := h.tab.Add(Spec{IfIndex: tIf, IP: 0x0a010000 + wire.Addr4(i), LLAddr: macs[i%3], HasLLAddr: true,
			State: NUDPermanent, IfMAC: tIfMAC}, h.now, &h.out); err != nil {
			t.Fatal(err)
		}
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var hits atomic.Int64
	readers := 3
	for g := 0; g < readers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			w := h.tab.NewWorker()
			r := rand.New(rand.NewPCG(uint64(g), 9))
			hdr := make([]byte, 14)
			var n int64
			for !stop.Load() {
				var ip wire.Addr4
				stableKey := r.IntN(2) == 0
				if stableKey {
					ip = 0x0a010000 + wire.Addr4(r.Uint32N(stable))
				} else {
					ip = 0x0a020000 + wire.Addr4(r.Uint32N(2048))
				}
				ok := w.Output(tIf, ip, hdr)
				if stableKey && !ok {
					t.Errorf("permanent %s not found", ip)
					return
				}
				if ok {
					n++
					var dst wire.MAC
					copy(dst[:], hdr[:6])
					if (dst != macs[0] && dst != macs[1] && dst != macs[2]) ||
						!bytes.Equal(hdr[6:12], tIfMAC[:]) || hdr[12] != 0x08 || hdr[13] != 0 {
						t.Errorf("torn header %x", hdr)
						return
					}
				}
				if n%256 == 0 {
					w.Publish()
				}
			}
			hits.Add(n)
		}(g)
	}

	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < writes && !t.Failed(); i++ {
		ip := 0x0a020000 + wire.Addr4(r.Uint32N(2048))
		mac := macs[r.IntN(3)]
		switch r.IntN(10) {
		case 0, 1, 2, 3:
			h.arp(wire.ARPRequest, wire.BroadcastMAC, mac, ip, wire.MAC{}, tLocal)
		case 4, 5:
			h.replyToUs(mac, ip)
		case 6:
			h.tab.Replace(Spec{IfIndex: tIf, IP: ip, LLAddr: mac, HasLLAddr: true, State: NUDReachable, IfMAC: tIfMAC}, h.now, &h.out)
		case 7:
			h.tab.Delete(tIf, ip, h.now, &h.out)
		case 8:
			h.resolve(ip, ipPacket(1, ip, 64))
		case 9:
			h.now += int64(r.IntN(2000)) * int64(time.Millisecond)
			h.tab.Tick(h.now, &h.out)
			if r.IntN(50) == 0 {
				h.tab.FlushDev(tIf, true, h.now, &h.out)
			}
		}
		h.out.Reset()
	}
	stop.Store(true)
	wg.Wait()
	s := h.tab.Stats()
	t.Logf("%d writes, %d reader hits, %d index rebuilds, %d entries", writes, hits.Load(), s.HashRebuilds, s.Entries)
	if s.HashRebuilds == 0 {
		t.Fatal("no index rebuild happened while readers ran")
	}
	checkTableInvariants(t, h.tab)
}
