package neigh

// Randomized differential test: random sequences of datapath uses, packets
// to resolve, ARP requests and replies (valid and broken), clock advances
// with Tick, static adds/replaces/changes/deletes and link flushes, applied
// to the fast table and to the reference model; after every step the
// answers, the actions (requests, frames, events), the full dump and the
// counters must agree.

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/race"
	"github.com/netfwd/netfwd/wire"
)

type keyed struct {
	key uint64
	s   string
}

func canon(items []keyed) []string {
	sort.SliceStable(items, func(i, j int) bool { return items[i].key < items[j].key })
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.s
	}
	return out
}

func describeActions(reqs []ARPRequest, tx, unr, dropped []Frame, evs []Event) [5][]string {
	var r, t, u, d, e []keyed
	for _, q := range reqs {
		r = append(r, keyed{refKey(q.IfIndex, q.Target), fmt.Sprintf("%+v", q)})
	}
	for _, f := range tx {
		t = append(t, keyed{refKey(f.IfIndex, f.IP), fmt.Sprintf("%d/%s %x mark %d", f.IfIndex, f.IP, f.Data, f.Mark)})
	}
	for _, f := range unr {
		u = append(u, keyed{refKey(f.IfIndex, f.IP), fmt.Sprintf("%d/%s %x mark %d", f.IfIndex, f.IP, f.Data, f.Mark)})
	}
	for _, f := range dropped {
		d = append(d, keyed{refKey(f.IfIndex, f.IP), fmt.Sprintf("%d/%s %x mark %d", f.IfIndex, f.IP, f.Data, f.Mark)})
	}
	for _, v := range evs {
		e = append(e, keyed{refKey(v.IfIndex, v.IP), fmt.Sprintf("%v %d/%s %s %v %v", v.Kind, v.IfIndex, wire.Addr4.String(v.IP), v.LLAddr, v.State, v.Reason)})
	}
	return [5][]string{canon(r), canon(t), canon(u), canon(d), canon(e)}
}

func sameActions(t *testing.T, step int, what string, got *Actions, want *refOut) {
	t.Helper()
	g := describeActions(got.Requests, got.Transmit, got.Unreachable, got.Dropped, got.Events)
	w := describeActions(want.requests, want.transmit, want.unreachable, want.dropped, want.events)
	names := [5]string{"requests", "transmit", "unreachable", "dropped", "events"}
	for i := range g {
		if fmt.Sprint(g[i]) != fmt.Sprint(w[i]) {
			t.Fatalf("step %d %s: %s differ\n got  %q\n want %q", step, what, names[i], g[i], w[i])
		}
	}
}

// diffEnv is the fixture: two interfaces, two local addresses, ten
// neighbour addresses per interface, three MACs the neighbours use.
type diffEnv struct {
	ifMAC  map[uint32]wire.MAC
	local  refAddrs
	neighs []wire.Addr4
	macs   []wire.MAC
}

func newDiffEnv() *diffEnv {
	e := &diffEnv{
		ifMAC: map[uint32]wire.MAC{1: {0x02, 0xaa, 0, 0, 0, 1}, 2: {0x02, 0xaa, 0, 0, 0, 2}},
		local: refAddrs{0x0a000001: true, 0x0a000101: true},
		macs:  []wire.MAC{{0x02, 0, 0, 0, 0, 1}, {0x02, 0, 0, 0, 0, 2}, {0x02, 0, 0, 0, 0, 3}},
	}
	for i := uint32(2); i < 12; i++ {
		e.neighs = append(e.neighs, 0x0a000000+wire.Addr4(i))
	}
	return e
}

func smallParams() Params {
	p := DefaultParams()
	p.GCThresh1, p.GCThresh2, p.GCThresh3 = 2, 4, 6
	p.UnresQlenBytes = 600
	p.UnresQlenBytesTotal = 1500 // a few entries' queues: the global budget is hit often
	return p
}

func arpFrame(ethDst wire.MAC, op uint16, sha wire.MAC, sip wire.Addr4, tha wire.MAC, tip wire.Addr4) []byte {
	b := make([]byte, wire.ARPFrameLen)
	wire.BuildARP(b, ethDst, sha, op, sha, sip, tha, tip)
	return b
}

func (e *diffEnv) randomARP(r *rand.Rand, ifindex uint32) []byte {
	sha := e.macs[r.IntN(len(e.macs))]
	sip := e.neighs[r.IntN(len(e.neighs))]
	tip := wire.Addr4(0x0a000001)
	if r.IntN(3) == 0 {
		tip = e.neighs[r.IntN(len(e.neighs))]
	}
	dst := wire.BroadcastMAC
	op := uint16(wire.ARPRequest)
	var tha wire.MAC
	if r.IntN(2) == 0 {
		op = wire.ARPReply
		if r.IntN(3) > 0 {
			dst, tha = e.ifMAC[ifindex], e.ifMAC[ifindex]
		}
	}
	switch r.IntN(12) {
	case 0: // gratuitous
		tip = sip
		if op == wire.ARPReply {
			tha = sha
		}
	case 1: // DAD probe
		sip = 0
	case 2: // sender claims our address
		sip = 0x0a000101
	case 3: // martian sender
		sip = 0xe0000001
	}
	f := arpFrame(dst, op, sha, sip, tha, tip)
	switch r.IntN(25) {
	case 0:
		f = f[:r.IntN(len(f))]
	case 1:
		f[14+r.IntN(8)] ^= byte(1 + r.IntN(255)) // break a header field
	case 2:
		f[0] = 0x02 // another host
	case 3:
		f[8] = 0x01 // multicast sender MAC
	}
	return f
}

func randomPacket(r *rand.Rand) []byte {
	p := make([]byte, 20+r.IntN(180))
	p[0] = 0x45
	for i := 1; i < len(p); i++ {
		p[i] = byte(r.Uint32())
	}
	return p
}

func TestNeighDifferential(t *testing.T) {
	seeds, steps := 40, 3000
	if race.Enabled || testing.Short() {
		seeds, steps = 8, 1500
	}
	var total refCounters
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			c := runDifferential(t, seed, steps)
			total.notLearned += c.notLearned
			total.budgetDrops += c.budgetDrops
			total.forcedGCEvictions += c.forcedGCEvictions
		})
	}
	// The random steps reach the pressure policies (else they prove nothing).
	if total.notLearned == 0 || total.budgetDrops == 0 || total.forcedGCEvictions == 0 {
		t.Errorf("the random steps never reached a limit: %+v", total)
	}
}

func runDifferential(t *testing.T, seed uint64, steps int) refCounters {
	env := newDiffEnv()
	p := smallParams()
	now := int64(1_000_000_000_000)
	tab, err := NewTable(Config{Params: p, Seed: seed}, now)
	if err != nil {
		t.Fatal(err)
	}
	ref := newRefTable(p, seed, now)
	w := tab.NewWorker()
	r := rand.New(rand.NewPCG(seed, 7))
	var out Actions
	reply := make([]byte, 64)
	in := map[uint32]*ARPInput{}
	for ifi, mac := range env.ifMAC {
		in[ifi] = &ARPInput{IfIndex: ifi, IfMAC: mac, Addrs: env.local}
	}
	waiting := 0 // packets Resolve queued that have not come back in an Actions
	for step := 0; step < steps; step++ {
		out.Reset()
		ro := &refOut{}
		ifi := uint32(1 + r.IntN(2))
		ip := env.neighs[r.IntN(len(env.neighs))]
		var what string
		switch op := r.IntN(100); {
		case op < 25:
			what = "output"
			hdr := make([]byte, 14)
			ok := w.Output(ifi, ip, hdr)
			want, wok := ref.output(ifi, ip)
			if ok != wok || (ok && !bytes.Equal(hdr, want)) {
				t.Fatalf("step %d output %d/%s: got %v %x want %v %x", step, ifi, ip, ok, hdr, wok, want)
			}
		case op < 45:
			what = "resolve"
			pkt := randomPacket(r)
			if r.IntN(50) == 0 {
				ip = 0xe0000005
			}
			mark := uint8(r.IntN(3))
			res := w.Resolve(ifi, ip, env.ifMAC[ifi], pkt, mark, now, &out)
			v, hdr := ref.resolve(ifi, ip, env.ifMAC[ifi], pkt, mark, now, ro)
			if res.Verdict != v || (v == Send && !bytes.Equal(res.Header[:], hdr)) {
				t.Fatalf("step %d resolve %d/%s: got %v %x want %v %x", step, ifi, ip, res.Verdict, res.Header, v, hdr)
			}
			if res.Verdict == Queued {
				waiting++
			}
		case op < 70:
			what = "arp"
			f := env.randomARP(r, ifi)
			n, d := w.InputARP(in[ifi], f, now, reply, &out)
			wr, wd := ref.inputARP(ifi, env.ifMAC[ifi], env.local, f, now, ro)
			if d != wd || !bytes.Equal(reply[:n], wr) {
				t.Fatalf("step %d arp %x: got %v %x want %v %x", step, f, d, reply[:n], wd, wr)
			}
		case op < 88:
			what = "tick"
			switch r.IntN(4) {
			case 0:
				now += int64(r.IntN(100)) * int64(time.Millisecond)
			case 1, 2:
				now += int64(500+r.IntN(1500)) * int64(time.Millisecond)
			case 3:
				now += int64(5+r.IntN(60)) * int64(time.Second)
			}
			tab.Tick(now, &out)
			ref.tick(now, ro)
		case op < 96:
			what = "admin"
			s := Spec{IfIndex: ifi, IP: ip, IfMAC: env.ifMAC[ifi], HasLLAddr: r.IntN(8) > 0,
				LLAddr: env.macs[r.IntN(len(env.macs))],
				State:  []State{NUDPermanent, NUDReachable, NUDStale, NUDNoARP}[r.IntN(4)]}
			var err, werr error
			switch r.IntN(4) {
			case 0:
				err, werr = tab.Add(s, now, &out), ref.modify(s, true, true, now, ro)
			case 1:
				err, werr = tab.Replace(s, now, &out), ref.modify(s, true, false, now, ro)
			case 2:
				err, werr = tab.Change(s, now, &out), ref.modify(s, false, false, now, ro)
			case 3:
				err, werr = tab.Delete(ifi, ip, now, &out), ref.del(ifi, ip, now, ro)
			}
			if err != werr {
				t.Fatalf("step %d admin %+v: got %v want %v", step, s, err, werr)
			}
		default:
			what = "flush"
			keep := r.IntN(2) == 0
			if got, want := tab.FlushDev(ifi, keep, now, &out), ref.flush(ifi, keep, now, ro); got != want {
				t.Fatalf("step %d flush: got %d want %d", step, got, want)
			}
		}
		sameActions(t, step, what, &out, ro)
		// Every queued packet comes back exactly once.
		waiting -= len(out.Transmit) + len(out.Unreachable) + len(out.Dropped)
		if s := tab.Stats(); s.QueuedNow != waiting {
			t.Fatalf("step %d after %s: %d packets in queues, %d queued and not returned", step, what, s.QueuedNow, waiting)
		}
		got, want := tab.Dump(now), ref.dump(now)
		for i := range got {
			got[i].Used, got[i].Confirmed, got[i].Updated = 0, 0, 0
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("step %d after %s: dump differs\n got  %+v\n want %+v", step, what, got, want)
		}
		if step%50 == 0 || step == steps-1 {
			compareStats(t, step, tab, w, ref)
		}
		checkTableInvariants(t, tab)
	}
	return ref.c
}

func compareStats(t *testing.T, step int, tab *Table, w *Worker, ref *refTable) {
	t.Helper()
	w.Publish()
	s := tab.Stats()
	c := ref.c
	got := []uint64{s.Lookups, s.Hits, s.Misses, s.StaleTouches, s.Allocs, s.Destroys, s.ResolveFailed,
		s.Queued, s.QueueDrops, s.QueuePurged, s.PeriodicGCRuns, s.ForcedGCRuns, s.GCEvictions,
		s.ForcedGCEvictions, s.TableFulls, s.RefusedInvalid, s.ARPTxRequestsBcast, s.ARPTxRequestsUcast,
		s.ARPRxRequests, s.ARPRxReplies, s.ARPTxReplies, s.ARPRequestsNotLocal, s.ARPDAD,
		s.ARPLearned, s.ARPUpdates, s.ARPUnsolicitedIgnored, s.ARPNotLearned, s.QueueBudgetDrops, s.ARPRepliesLimited}
	want := []uint64{c.lookups, c.hits, c.misses, c.staleTouches, c.allocs, c.destroys, c.resolveFailed,
		c.queued, c.queueDrops, c.queuePurged, c.periodicGCRuns, c.forcedGCRuns, c.gcEvictions,
		c.forcedGCEvictions, c.tableFulls, c.refusedInvalid, c.txBcast, c.txUcast,
		c.rxReq, c.rxRep, c.txRep, c.notLocal, c.dad, c.learned, c.updates, c.unsolicited, c.notLearned, c.budgetDrops, c.repliesLimited}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("step %d: counters differ\n got  %v\n want %v", step, got, want)
	}
	for d := ARPDrop(1); d < numARPDrops; d++ {
		if s.ARPDrops[d.String()] != c.drops[d] {
			t.Fatalf("step %d: drops %v: got %d want %d", step, d, s.ARPDrops[d.String()], c.drops[d])
		}
	}
	if s.Entries != len(ref.m) {
		t.Fatalf("step %d: entries %d want %d", step, s.Entries, len(ref.m))
	}
}

// checkTableInvariants checks the fast table's internal bookkeeping: the
// index, the gc list, the timer heap and the per-state counts agree with
// the entries.
func checkTableInvariants(t *testing.T, tab *Table) {
	t.Helper()
	tab.mu.Lock()
	defer tab.mu.Unlock()
	live := 0
	var counts [9]int
	for n := range tab.index.All() {
		live++
		counts[stateSlot(n.state())]++
		if tab.index.Get(n.key) != n {
			t.Fatalf("index: %x not found by lookup", n.key)
		}
		if n.links[gcList].on != (n.state() != NUDPermanent) {
			t.Fatalf("entry %x state %v onGC %v", n.key, n.state(), n.links[gcList].on)
		}
		if (n.heapIdx >= 0) != (n.state()&nudInTimer != 0) {
			t.Fatalf("entry %x state %v timer armed %v", n.key, n.state(), n.heapIdx >= 0)
		}
	}
	if live != tab.entries || live != tab.index.Len() || counts != tab.stateCount {
		t.Fatalf("index live %d/%d entries %d counts %v/%v", live, tab.index.Len(), tab.entries, counts, tab.stateCount)
	}
	gc := 0
	for n := tab.lists[gcList].head; n != nil; n = n.links[gcList].next {
		gc++
	}
	if gc != tab.gcEntries {
		t.Fatalf("gc list %d entries, counted %d", gc, tab.gcEntries)
	}
	if tab.learnPaused.Load() != (tab.gcEntries >= tab.p.GCThresh2) {
		t.Fatalf("learnPaused %v with %d entries", tab.learnPaused.Load(), tab.gcEntries)
	}
	// The global queue accounting: the pending list holds exactly the
	// entries with queued packets, and the sums match.
	bytes, pkts, pend := 0, 0, 0
	for n := range tab.index.All() {
		bytes += n.queue.bytes
		pkts += n.queue.n
		if n.links[pendList].on != (n.queue.n > 0) {
			t.Fatalf("entry %x: %d queued, on the pending list %v", n.key, n.queue.n, n.links[pendList].on)
		}
	}
	for n := tab.lists[pendList].head; n != nil; n = n.links[pendList].next {
		pend++
	}
	if bytes != tab.queuedBytes || pkts != tab.queuedPackets || pend > pkts || (pend == 0) != (pkts == 0) {
		t.Fatalf("queued %d bytes %d packets in %d entries; table says %d bytes %d packets", bytes, pkts, pend, tab.queuedBytes, tab.queuedPackets)
	}
	if l := tab.p.UnresQlenBytesTotal; l > 0 && tab.queuedBytes > l {
		t.Fatalf("%d bytes queued over the global budget of %d", tab.queuedBytes, l)
	}
}
