package neigh

// Table-driven tests of each state transition with the manual clock, checked
// against the timings and packets Linux produces with its default ARP
// parameters.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/netfwd/netfwd/wire"
)

const (
	tIf    = uint32(3)
	tLocal = wire.Addr4(0x0a000001) // 10.0.0.1
	tPeer  = wire.Addr4(0x0a000002) // 10.0.0.2
	tPeer2 = wire.Addr4(0x0a000003)
)

var (
	tIfMAC = wire.MAC{0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0x01}
	tMAC1  = wire.MAC{0x02, 0, 0, 0, 0, 0x11}
	tMAC2  = wire.MAC{0x02, 0, 0, 0, 0, 0x22}
)

type harness struct {
	t     *testing.T
	tab   *Table
	w     *Worker
	now   int64
	start int64
	out   Actions
	in    ARPInput
	reply []byte
}

func newHarness(t *testing.T, p Params) *harness {
	t.Helper()
	h := &harness{t: t, now: 5_000 * int64(time.Second), reply: make([]byte, 64)}
	h.start = h.now
	tab, err := NewTable(Config{Params: p, Seed: 42}, h.now)
	if err != nil {
		t.Fatal(err)
	}
	h.tab, h.w = tab, tab.NewWorker()
	h.in = ARPInput{IfIndex: tIf, IfMAC: tIfMAC, Addrs: refAddrs{tLocal: true}}
	return h
}

// at moves the clock to start+d and ticks.
func (h *harness) at(d time.Duration) {
	h.t.Helper()
	if n := h.start + int64(d); n > h.now {
		h.now = n
	}
	h.tab.Tick(h.now, &h.out)
}

func (h *harness) state(ip wire.Addr4) State {
	h.t.Helper()
	i, ok := h.tab.Get(tIf, ip, h.now)
	if !ok {
		return NUDNone
	}
	return i.State
}

func (h *harness) expect(ip wire.Addr4, s State) {
	h.t.Helper()
	if got := h.state(ip); got != s {
		h.t.Fatalf("at +%v: %s is %v, want %v", time.Duration(h.now-h.start), ip, got, s)
	}
}

func (h *harness) resolve(ip wire.Addr4, pkt []byte) Verdict {
	h.t.Helper()
	return h.w.Resolve(tIf, ip, tIfMAC, pkt, 0, h.now, &h.out).Verdict
}

func (h *harness) arp(op uint16, ethDst, sha wire.MAC, sip wire.Addr4, tha wire.MAC, tip wire.Addr4) (int, ARPDrop) {
	h.t.Helper()
	defer h.w.Publish() // as the router does once per batch
	return h.w.InputARP(&h.in, arpFrame(ethDst, op, sha, sip, tha, tip), h.now, h.reply, &h.out)
}

// replyToUs is a solicited reply: unicast to our MAC.
func (h *harness) replyToUs(sha wire.MAC, sip wire.Addr4) {
	h.t.Helper()
	h.arp(wire.ARPReply, tIfMAC, sha, sip, tIfMAC, tLocal)
}

func (h *harness) takeRequests() []ARPRequest {
	r := append([]ARPRequest(nil), h.out.Requests...)
	h.out.Requests = h.out.Requests[:0]
	return r
}

func (h *harness) takeEvents() []string {
	var s []string
	for _, e := range h.out.Events {
		s = append(s, fmt.Sprintf("%v %s %v", e.Kind, e.LLAddr, e.State))
	}
	h.out.Events = h.out.Events[:0]
	return s
}

func ipPacket(src, dst wire.Addr4, n int) []byte {
	p := make([]byte, n)
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:4], uint16(n))
	p[8] = 64
	binary.BigEndian.PutUint32(p[12:16], uint32(src))
	binary.BigEndian.PutUint32(p[16:20], uint32(dst))
	return p
}

func expectRequests(t *testing.T, got []ARPRequest, n int, unicast bool, dst wire.MAC) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("%d requests, want %d: %+v", len(got), n, got)
	}
	for _, r := range got {
		if r.Unicast != unicast || r.DstMAC != dst || r.Target != tPeer || r.IfIndex != tIf || r.SrcMAC != tIfMAC {
			t.Fatalf("request %+v, want unicast=%v dst %s", r, unicast, dst)
		}
	}
}

// Resolution that fails: broadcast at 0, 1 s and 2 s, FAILED at 3 s, the
// queued packets come back for ICMP host unreachable.
func TestNeighIncompleteToFailed(t *testing.T) {
	h := newHarness(t, DefaultParams())
	pkt := ipPacket(0xc0a80005, tPeer, 60)
	if v := h.resolve(tPeer, pkt); v != Queued {
		t.Fatalf("verdict %v", v)
	}
	reqs := h.takeRequests()
	expectRequests(t, reqs, 1, false, wire.BroadcastMAC)
	if reqs[0].SrcHint != 0xc0a80005 {
		t.Fatalf("source hint %s", wire.Addr4.String(reqs[0].SrcHint))
	}
	h.expect(tPeer, NUDIncomplete)
	for i, d := range []time.Duration{999 * time.Millisecond, time.Second, 1999 * time.Millisecond, 2 * time.Second} {
		h.at(d)
		expectRequests(t, h.takeRequests(), i%2, false, wire.BroadcastMAC)
	}
	h.resolve(tPeer, ipPacket(0xc0a80006, tPeer, 80)) // second packet queued, no new request
	expectRequests(t, h.takeRequests(), 0, false, wire.BroadcastMAC)
	h.at(2999 * time.Millisecond)
	h.expect(tPeer, NUDIncomplete)
	h.at(3 * time.Second)
	h.expect(tPeer, NUDFailed)
	expectRequests(t, h.takeRequests(), 0, false, wire.BroadcastMAC)
	if len(h.out.Unreachable) != 2 || !bytes.Equal(h.out.Unreachable[0].Data, pkt) || len(h.out.Unreachable[1].Data) != 80 {
		t.Fatalf("unreachable %+v", h.out.Unreachable)
	}
	if ev := h.takeEvents(); fmt.Sprint(ev) != "[failed 00:00:00:00:00:00 FAILED]" {
		t.Fatalf("events %v", ev)
	}
	if s := h.tab.Stats(); s.ResolveFailed != 1 || s.ARPTxRequestsBcast != 3 || s.Queued != 2 {
		t.Fatalf("stats %+v", s)
	}
	// New traffic to a FAILED neighbour restarts resolution.
	if v := h.resolve(tPeer, pkt); v != Queued {
		t.Fatalf("verdict %v", v)
	}
	h.expect(tPeer, NUDIncomplete)
	expectRequests(t, h.takeRequests(), 1, false, wire.BroadcastMAC)
}

// How an INCOMPLETE entry resolves, by what arrives.
func TestNeighIncompleteResolves(t *testing.T) {
	cases := []struct {
		name   string
		input  func(h *harness)
		state  State // after the queue was sent
		events string
	}{
		{"unicast reply", func(h *harness) { h.replyToUs(tMAC1, tPeer) }, NUDReachable,
			"[resolved 02:00:00:00:00:11 REACHABLE]"},
		{"broadcast reply", func(h *harness) { h.arp(wire.ARPReply, wire.BroadcastMAC, tMAC1, tPeer, tIfMAC, tLocal) }, NUDDelay,
			"[resolved 02:00:00:00:00:11 STALE]"},
		{"request for us", func(h *harness) { h.arp(wire.ARPRequest, wire.BroadcastMAC, tMAC1, tPeer, wire.MAC{}, tLocal) }, NUDDelay,
			"[resolved 02:00:00:00:00:11 STALE]"},
		{"gratuitous request", func(h *harness) { h.arp(wire.ARPRequest, wire.BroadcastMAC, tMAC1, tPeer, wire.MAC{}, tPeer) }, NUDDelay,
			"[resolved 02:00:00:00:00:11 STALE]"},
		{"admin add", func(h *harness) {
			if err := h.tab.Add(Spec{IfIndex: tIf, IP: tPeer, LLAddr: tMAC1, HasLLAddr: true, State: NUDPermanent, IfMAC: tIfMAC}, h.now, &h.out); !errors.Is(err, ErrExists) {
				h.t.Fatalf("add over INCOMPLETE: %v", err)
			}
			if err := h.tab.Replace(Spec{IfIndex: tIf, IP: tPeer, LLAddr: tMAC1, HasLLAddr: true, State: NUDPermanent, IfMAC: tIfMAC}, h.now, &h.out); err != nil {
				h.t.Fatal(err)
			}
		}, NUDPermanent, "[resolved 02:00:00:00:00:11 PERMANENT]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, DefaultParams())
			pkt := ipPacket(0xc0a80005, tPeer, 60)
			h.resolve(tPeer, pkt)
			h.takeRequests()
			h.at(500 * time.Millisecond)
			c.input(h)
			h.expect(tPeer, c.state)
			if ev := h.takeEvents(); fmt.Sprint(ev) != c.events {
				t.Fatalf("events %v, want %v", ev, c.events)
			}
			if len(h.out.Transmit) != 1 {
				t.Fatalf("transmit %d frames", len(h.out.Transmit))
			}
			f := h.out.Transmit[0].Data
			want := append(append(append([]byte{}, tMAC1[:]...), tIfMAC[:]...), 0x08, 0x00)
			if !bytes.Equal(f[:14], want) || !bytes.Equal(f[14:], pkt) {
				t.Fatalf("frame %x", f)
			}
			hdr := make([]byte, 14)
			if !h.w.Output(tIf, tPeer, hdr) || !bytes.Equal(hdr, want) {
				t.Fatalf("output header %x", hdr)
			}
		})
	}
}

// REACHABLE expires into STALE after the randomised reachable time; a use
// moves STALE to DELAY; DELAY becomes PROBE after 5 s with three unicast
// probes one second apart, then FAILED.
func TestNeighReachableStaleDelayProbeFailed(t *testing.T) {
	h := newHarness(t, DefaultParams())
	rt := h.tab.ReachableTime()
	if rt < 15*time.Second || rt >= 45*time.Second {
		t.Fatalf("reachable time %v outside [15s, 45s)", rt)
	}
	h.resolve(tPeer, ipPacket(1, tPeer, 40))
	h.takeRequests()
	h.replyToUs(tMAC1, tPeer)
	h.expect(tPeer, NUDReachable)
	h.at(rt)
	h.expect(tPeer, NUDReachable) // now == confirmed + reachable: still alive
	h.at(rt + time.Nanosecond)
	h.expect(tPeer, NUDReachable) // timer re-armed 10 ms later at the soonest
	h.at(rt + 10*time.Millisecond)
	h.expect(tPeer, NUDStale)
	h.takeEvents()

	// STALE is still usable; the first use starts DELAY at the next writer call.
	hdr := make([]byte, 14)
	if !h.w.Output(tIf, tPeer, hdr) {
		t.Fatal("STALE entry not usable")
	}
	h.w.Output(tIf, tPeer, hdr)
	touched := rt + 20*time.Second
	h.at(touched)
	h.expect(tPeer, NUDDelay)
	h.w.Publish()
	if s := h.tab.Stats(); s.StaleTouches != 1 {
		t.Fatalf("stale touches %d", s.StaleTouches)
	}
	h.at(touched + 5*time.Second - time.Nanosecond)
	h.expect(tPeer, NUDDelay)
	h.at(touched + 5*time.Second)
	h.expect(tPeer, NUDProbe)
	expectRequests(t, h.takeRequests(), 1, true, tMAC1)
	h.at(touched + 6*time.Second)
	h.at(touched + 7*time.Second)
	expectRequests(t, h.takeRequests(), 2, true, tMAC1)
	h.expect(tPeer, NUDProbe)
	if !h.w.Output(tIf, tPeer, hdr) {
		t.Fatal("PROBE entry not usable")
	}
	h.at(touched + 8*time.Second)
	h.expect(tPeer, NUDFailed)
	expectRequests(t, h.takeRequests(), 0, true, tMAC1)
	if ev := h.takeEvents(); fmt.Sprint(ev) != "[failed 02:00:00:00:00:11 FAILED]" {
		t.Fatalf("events %v", ev)
	}
	if h.w.Output(tIf, tPeer, hdr) {
		t.Fatal("FAILED entry usable")
	}
}

// Replies confirm DELAY and PROBE entries.
func TestNeighConfirmations(t *testing.T) {
	for _, st := range []State{NUDDelay, NUDProbe} {
		t.Run(st.String(), func(t *testing.T) {
			h := newHarness(t, DefaultParams())
			h.arp(wire.ARPRequest, wire.BroadcastMAC, tMAC1, tPeer, wire.MAC{}, tLocal) // STALE
			h.expect(tPeer, NUDStale)
			hdr := make([]byte, 14)
			h.w.Output(tIf, tPeer, hdr)
			h.at(time.Second)
			if st == NUDProbe {
				h.at(6 * time.Second)
			}
			h.expect(tPeer, st)
			h.replyToUs(tMAC1, tPeer)
			h.expect(tPeer, NUDReachable)
			// A broadcast reply does not confirm: STALE with the same address
			// leaves a REACHABLE entry alone.
			h.at(6*time.Second + 2*time.Second)
			h.arp(wire.ARPReply, wire.BroadcastMAC, tMAC1, tPeer, tIfMAC, tLocal)
			h.expect(tPeer, NUDReachable)
		})
	}
}

// Locktime: a different address from a reply or a request for someone else
// is ignored within 1 s of the last update and taken after; gratuitous ARP
// and requests to us override at once.
func TestNeighLocktime(t *testing.T) {
	type step struct {
		after time.Duration
		op    func(h *harness)
		mac   wire.MAC
		state State
	}
	unicastReply := func(m wire.MAC) func(*harness) { return func(h *harness) { h.replyToUs(m, tPeer) } }
	otherReq := func(m wire.MAC) func(*harness) {
		return func(h *harness) { h.arp(wire.ARPRequest, wire.BroadcastMAC, m, tPeer, wire.MAC{}, tPeer2) }
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"reply within locktime ignored", []step{{time.Second, unicastReply(tMAC2), tMAC1, NUDReachable}}},
		{"reply after locktime taken", []step{{time.Second + 1, unicastReply(tMAC2), tMAC2, NUDReachable}}},
		{"request for other within locktime ignored", []step{{500 * time.Millisecond, otherReq(tMAC2), tMAC1, NUDReachable}}},
		{"request for other after locktime", []step{{2 * time.Second, otherReq(tMAC2), tMAC2, NUDStale}}},
		{"request for other same address", []step{{2 * time.Second, otherReq(tMAC1), tMAC1, NUDReachable}}},
		{"gratuitous request overrides", []step{{100 * time.Millisecond, func(h *harness) {
			h.arp(wire.ARPRequest, wire.BroadcastMAC, tMAC2, tPeer, wire.MAC{}, tPeer)
		}, tMAC2, NUDStale}}},
		{"gratuitous reply overrides", []step{{100 * time.Millisecond, func(h *harness) {
			h.arp(wire.ARPReply, wire.BroadcastMAC, tMAC2, tPeer, tMAC2, tPeer)
		}, tMAC2, NUDStale}}},
		{"reply with sip==tip but other tha is not gratuitous", []step{{100 * time.Millisecond, func(h *harness) {
			h.arp(wire.ARPReply, wire.BroadcastMAC, tMAC2, tPeer, tIfMAC, tPeer)
		}, tMAC1, NUDReachable}}},
		{"request to us overrides", []step{{100 * time.Millisecond, func(h *harness) {
			h.arp(wire.ARPRequest, wire.BroadcastMAC, tMAC2, tPeer, wire.MAC{}, tLocal)
		}, tMAC2, NUDStale}}},
		{"locktime restarts on change", []step{
			{2 * time.Second, unicastReply(tMAC2), tMAC2, NUDReachable},
			{2*time.Second + 900*time.Millisecond, unicastReply(tMAC1), tMAC2, NUDReachable},
			{3*time.Second + 1, unicastReply(tMAC1), tMAC1, NUDReachable},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, DefaultParams())
			h.resolve(tPeer, ipPacket(1, tPeer, 40))
			h.replyToUs(tMAC1, tPeer)
			h.takeEvents()
			for _, s := range c.steps {
				h.at(s.after)
				s.op(h)
				i, _ := h.tab.Get(tIf, tPeer, h.now)
				if i.LLAddr != s.mac || i.State != s.state {
					t.Fatalf("at +%v: %s %v, want %s %v", s.after, i.LLAddr, i.State, s.mac, s.state)
				}
			}
			if c.steps[len(c.steps)-1].mac == tMAC2 {
				if ev := h.takeEvents(); len(ev) == 0 || ev[len(ev)-1][:14] != "lladdr-changed" {
					t.Fatalf("events %v", ev)
				}
			}
		})
	}
}

// ARP input edge cases: what is learned and what is answered.
func TestNeighARPLearning(t *testing.T) {
	h := newHarness(t, DefaultParams())
	// Unsolicited reply from an unknown sender: nothing learned (arp_accept 0).
	if n, d := h.arp(wire.ARPReply, tIfMAC, tMAC1, tPeer, tIfMAC, tLocal); n != 0 || d != ARPOK {
		t.Fatal(n, d)
	}
	h.expect(tPeer, NUDNone)
	// Gratuitous ARP from an unknown sender: nothing.
	h.arp(wire.ARPRequest, wire.BroadcastMAC, tMAC1, tPeer, wire.MAC{}, tPeer)
	h.expect(tPeer, NUDNone)
	// A request for another host from an unknown sender: nothing, no reply.
	if n, _ := h.arp(wire.ARPRequest, wire.BroadcastMAC, tMAC1, tPeer, wire.MAC{}, tPeer2); n != 0 {
		t.Fatal("answered a request for another host")
	}
	h.expect(tPeer, NUDNone)
	// DAD probe for our address: answered, nothing learned.
	n, d := h.arp(wire.ARPRequest, wire.BroadcastMAC, tMAC1, 0, wire.MAC{}, tLocal)
	if d != ARPOK || n != wire.ARPFrameLen {
		t.Fatal(n, d)
	}
	want := []byte{
		0x02, 0, 0, 0, 0, 0x11, 0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0x01, 0x08, 0x06,
		0, 1, 8, 0, 6, 4, 0, 2,
		0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0x01, 10, 0, 0, 1,
		0x02, 0, 0, 0, 0, 0x11, 0, 0, 0, 0,
	}
	if !bytes.Equal(h.reply[:n], want) {
		t.Fatalf("DAD reply %x\nwant      %x", h.reply[:n], want)
	}
	if h.tab.Len() != 0 {
		t.Fatal("DAD probe learned an entry")
	}
	// A request for us: STALE entry and a reply.
	n, _ = h.arp(wire.ARPRequest, wire.BroadcastMAC, tMAC1, tPeer, wire.MAC{}, tLocal)
	copy(want[38:42], []byte{10, 0, 0, 2})
	if !bytes.Equal(h.reply[:n], want) {
		t.Fatalf("reply %x\nwant  %x", h.reply[:n], want)
	}
	h.expect(tPeer, NUDStale)
	if ev := h.takeEvents(); fmt.Sprint(ev) != "[resolved 02:00:00:00:00:11 STALE]" {
		t.Fatalf("events %v", ev)
	}
	// Permanent entries ignore ARP.
	if err := h.tab.Replace(Spec{IfIndex: tIf, IP: tPeer, LLAddr: tMAC2, HasLLAddr: true, State: NUDPermanent, IfMAC: tIfMAC}, h.now, &h.out); err != nil {
		t.Fatal(err)
	}
	h.at(10 * time.Second)
	h.arp(wire.ARPRequest, wire.BroadcastMAC, tMAC1, tPeer, wire.MAC{}, tLocal)
	h.replyToUs(tMAC1, tPeer)
	if i, _ := h.tab.Get(tIf, tPeer, h.now); i.State != NUDPermanent || i.LLAddr != tMAC2 {
		t.Fatalf("permanent entry changed: %+v", i)
	}
}

// Drops are counted by reason.
func TestARPDropReasons(t *testing.T) {
	h := newHarness(t, DefaultParams())
	good := arpFrame(wire.BroadcastMAC, wire.ARPRequest, tMAC1, tPeer, wire.MAC{}, tLocal)
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := []struct {
		frame []byte
		want  ARPDrop
	}{
		{good[:41], ARPTruncated},
		{mod(func(b []byte) []byte { b[13] = 0x00; return b }), ARPNotARP},
		{mod(func(b []byte) []byte { b[15] = 7; return b }), ARPBadHardware},
		{mod(func(b []byte) []byte { b[16] = 0x86; return b }), ARPBadProtocol},
		{mod(func(b []byte) []byte { b[18] = 8; return b }), ARPBadAddrLen},
		{mod(func(b []byte) []byte { b[19] = 16; return b }), ARPBadAddrLen},
		{mod(func(b []byte) []byte { b[21] = 3; return b }), ARPBadOpcode},
		{mod(func(b []byte) []byte { b[0] = 0x02; return b }), ARPOtherHost},
		{mod(func(b []byte) []byte { b[22] = 0x01; return b }), ARPBadSenderMAC},
		{mod(func(b []byte) []byte { copy(b[22:28], make([]byte, 6)); return b }), ARPBadSenderMAC},
		{mod(func(b []byte) []byte { copy(b[28:32], []byte{224, 0, 0, 1}); return b }), ARPMartianSender},
		{mod(func(b []byte) []byte { copy(b[28:32], []byte{127, 0, 0, 1}); return b }), ARPMartianSender},
		{mod(func(b []byte) []byte { copy(b[28:32], []byte{255, 255, 255, 255}); return b }), ARPMartianSender},
		{mod(func(b []byte) []byte { copy(b[28:32], []byte{10, 0, 0, 1}); return b }), ARPSenderIsLocal},
		{mod(func(b []byte) []byte { copy(b[38:42], []byte{239, 1, 1, 1}); return b }), ARPBadTarget},
		{mod(func(b []byte) []byte { copy(b[38:42], []byte{127, 0, 0, 1}); return b }), ARPBadTarget},
		{append(append([]byte(nil), good...), make([]byte, 18)...), ARPOK}, // padded to 60 bytes
	}
	for i, c := range cases {
		if _, d := h.w.InputARP(&h.in, c.frame, h.now, h.reply, &h.out); d != c.want {
			t.Fatalf("case %d: drop %v, want %v", i, d, c.want)
		}
	}
	if _, d := h.w.InputARP(&h.in, good, h.now, make([]byte, 10), &h.out); d != ARPNoReplyBuffer {
		t.Fatalf("short reply buffer: %v", d)
	}
	h.w.Publish()
	s := h.tab.Stats()
	if s.ARPDrops["bad_address_length"] != 2 || s.ARPDrops["martian_sender"] != 3 || s.ARPDropsTotal() != 17 {
		t.Fatalf("drops %v", s.ARPDrops)
	}
}

// The queue keeps unres_qlen_bytes, dropping the oldest packets.
func TestNeighQueueLimit(t *testing.T) {
	p := DefaultParams()
	h := newHarness(t, p)
	per := 14 + 1000 + queuedPacketHeader
	fits := p.UnresQlenBytes / per
	for i := 0; i < fits+5; i++ {
		pkt := ipPacket(wire.Addr4(i+1), tPeer, 1000)
		if v := h.resolve(tPeer, pkt); v != Queued {
			t.Fatalf("packet %d: %v", i, v)
		}
	}
	if s := h.tab.Stats(); s.QueueDrops != 5 || s.QueuedNow != fits || s.QueuedBytes != fits*per {
		t.Fatalf("drops %d queued %d bytes %d (fits %d)", s.QueueDrops, s.QueuedNow, s.QueuedBytes, fits)
	}
	h.replyToUs(tMAC1, tPeer)
	if len(h.out.Transmit) != fits || packetSource(h.out.Transmit[0].Data[14:]) != 6 {
		t.Fatalf("transmitted %d, first from %d", len(h.out.Transmit), packetSource(h.out.Transmit[0].Data[14:]))
	}
}

// Periodic gc removes unused STALE and FAILED entries once the table has
// gc_thresh1 entries, every base_reachable_time/2.
func TestNeighPeriodicGC(t *testing.T) {
	p := DefaultParams()
	p.GCThresh1 = 3
	h := newHarness(t, p)
	h.arp(wire.ARPRequest, wire.BroadcastMAC, tMAC1, tPeer, wire.MAC{}, tLocal) // STALE, used now
	h.at(2 * time.Minute)
	h.expect(tPeer, NUDStale) // below gc_thresh1: kept
	for _, ip := range []wire.Addr4{tPeer2, tPeer2 + 1} {
		h.arp(wire.ARPRequest, wire.BroadcastMAC, tMAC2, ip, wire.MAC{}, tLocal)
	}
	h.at(2*time.Minute + 15*time.Second) // next periodic run
	h.expect(tPeer, NUDNone)
	h.expect(tPeer2, NUDStale)
	if s := h.tab.Stats(); s.GCEvictions != 1 {
		t.Fatalf("gc evictions %d", s.GCEvictions)
	}
	ev := h.takeEvents()
	if ev[len(ev)-1] != "removed 02:00:00:00:00:11 NONE" {
		t.Fatalf("events %v", ev)
	}
	// PERMANENT entries are never collected.
	h.tab.Add(Spec{IfIndex: tIf, IP: tPeer, LLAddr: tMAC1, HasLLAddr: true, State: NUDPermanent, IfMAC: tIfMAC}, h.now, &h.out)
	h.at(10 * time.Minute)
	h.expect(tPeer, NUDPermanent)
	h.expect(tPeer2, NUDNone)
}

// Forced gc at gc_thresh3: fresh entries are not evicted, creation is
// refused; 5 s later the oldest entries go down to gc_thresh2.
func TestNeighForcedGC(t *testing.T) {
	p := DefaultParams()
	p.GCThresh1, p.GCThresh2, p.GCThresh3 = 2, 4, 8
	h := newHarness(t, p)
	for i := uint32(0); i < 4; i++ {
		h.arp(wire.ARPRequest, wire.BroadcastMAC, tMAC1, 0x0a000100+wire.Addr4(i), wire.MAC{}, tLocal)
	}
	// At gc_thresh2, requests from unknown senders are answered, not learned.
	if n, _ := h.arp(wire.ARPRequest, wire.BroadcastMAC, tMAC1, 0x0a000200, wire.MAC{}, tLocal); n == 0 {
		t.Fatal("no reply with the table under pressure")
	}
	h.expect(0x0a000200, NUDNone)
	// Known senders are still updated.
	h.arp(wire.ARPRequest, wire.BroadcastMAC, tMAC2, 0x0a000100, wire.MAC{}, tLocal)
	if i, _ := h.tab.Get(tIf, 0x0a000100, h.now); i.LLAddr != tMAC2 {
		t.Fatalf("known sender not updated: %+v", i)
	}
	for i := uint32(4); i < 8; i++ {
		if err := h.tab.Add(Spec{IfIndex: tIf, IP: 0x0a000100 + wire.Addr4(i), LLAddr: tMAC2, HasLLAddr: true, State: NUDReachable, IfMAC: tIfMAC}, h.now, &h.out); err != nil {
			t.Fatal(err)
		}
	}
	if v := h.resolve(0x0a000201, ipPacket(1, 2, 40)); v != Refused {
		t.Fatalf("verdict %v with a full table", v)
	}
	if s := h.tab.Stats(); s.TableFulls != 1 || s.Entries != 8 || s.ARPNotLearned != 1 || s.ARPLearned != 4 {
		t.Fatalf("table fulls %d entries %d not learned %d learned %d", s.TableFulls, s.Entries, s.ARPNotLearned, s.ARPLearned)
	}
	// Permanent entries are exempt from the limit.
	if err := h.tab.Add(Spec{IfIndex: tIf, IP: 0x0a000300, LLAddr: tMAC2, HasLLAddr: true, State: NUDPermanent, IfMAC: tIfMAC}, h.now, &h.out); err != nil {
		t.Fatal(err)
	}
	if err := h.tab.Add(Spec{IfIndex: tIf, IP: 0x0a000301, LLAddr: tMAC2, HasLLAddr: true, State: NUDReachable, IfMAC: tIfMAC}, h.now, &h.out); err != ErrTableFull {
		t.Fatalf("reachable static entry in a full table: %v", err)
	}
	h.at(5 * time.Second) // updated exactly 5 s ago: still spared
	if v := h.resolve(0x0a000201, ipPacket(1, 2, 40)); v != Refused {
		t.Fatalf("verdict %v", v)
	}
	h.at(5*time.Second + 1)
	h.takeEvents()
	if v := h.resolve(0x0a000201, ipPacket(1, 2, 40)); v != Queued {
		t.Fatalf("verdict %v after 5 s", v)
	}
	ev := h.takeEvents()
	if len(ev) != 5 { // 8 + 1 - 4 removed
		t.Fatalf("events %v", ev)
	}
	for i := uint32(0); i < 8; i++ {
		want := NUDReachable // the admin entries not removed
		if i < 5 {
			want = NUDNone // the learned ones (never used), then the oldest admin one
		}
		h.expect(0x0a000100+wire.Addr4(i), want)
	}
}

// The forced gc spares entries that carry traffic and removes unresolved
// ones after retrans_time (not 5 s): a flood of packets to unresolved hosts
// cannot push out an established neighbour, and does not fill the table for
// good.
func TestNeighForcedGCSparesUsed(t *testing.T) {
	p := DefaultParams()
	p.GCThresh1, p.GCThresh2, p.GCThresh3 = 2, 4, 8
	h := newHarness(t, p)
	for i := uint32(0); i < 4; i++ {
		if err := h.tab.Add(Spec{IfIndex: tIf, IP: 0x0a000100 + wire.Addr4(i), LLAddr: tMAC2, HasLLAddr: true, State: NUDReachable, IfMAC: tIfMAC}, h.now, &h.out); err != nil {
			t.Fatal(err)
		}
	}
	hdr := make([]byte, 14)
	if !h.w.Output(tIf, 0x0a000100, hdr) { // 10.0.1.0 carries traffic
		t.Fatal("no header")
	}
	for i := uint32(4); i < 8; i++ { // unresolved: INCOMPLETE
		if v := h.resolve(0x0a000100+wire.Addr4(i), ipPacket(1, 2, 40)); v != Queued {
			t.Fatalf("verdict %v", v)
		}
	}
	// Full of fresh entries: refused, until the INCOMPLETE entries have
	// been unanswered for retrans_time; then they go, the others stay.
	if v := h.resolve(0x0a000201, ipPacket(1, 2, 40)); v != Refused {
		t.Fatalf("verdict %v with a full table", v)
	}
	h.at(p.RetransTime)
	if v := h.resolve(0x0a000201, ipPacket(1, 2, 40)); v != Refused {
		t.Fatalf("verdict %v with INCOMPLETE entries exactly retrans_time old", v)
	}
	h.at(p.RetransTime + 1)
	if v := h.resolve(0x0a000201, ipPacket(1, 2, 40)); v != Queued {
		t.Fatalf("verdict %v with INCOMPLETE entries to remove", v)
	}
	for i := uint32(0); i < 8; i++ {
		want := NUDReachable
		if i >= 4 {
			want = NUDNone
		}
		h.expect(0x0a000100+wire.Addr4(i), want)
	}
	if s := h.tab.Stats(); s.TableFulls != 2 || s.ForcedGCEvictions != 4 || s.QueuePurged != 4 {
		t.Fatalf("table fulls %d evictions %d purged %d", s.TableFulls, s.ForcedGCEvictions, s.QueuePurged)
	}
	// 5 s after the last forced gc, above gc_thresh2: the unused entries go
	// first (in list order), the one in use is spared.
	h.at(p.RetransTime + 5*time.Second + 2)
	h.w.Output(tIf, 0x0a000100, hdr)
	if v := h.resolve(0x0a000202, ipPacket(1, 2, 40)); v != Queued {
		t.Fatalf("verdict %v", v)
	}
	h.expect(0x0a000100, NUDReachable)
	h.expect(0x0a000101, NUDNone)
	h.expect(0x0a000102, NUDNone)
	h.expect(0x0a000103, NUDReachable)
	h.expect(0x0a000201, NUDIncomplete) // removable too, but newer on the list
}

// Link down flushes an interface's entries (permanent ones too unless kept),
// dropping queued packets; other interfaces are untouched.
func TestNeighFlushDev(t *testing.T) {
	h := newHarness(t, DefaultParams())
	h.tab.Add(Spec{IfIndex: tIf, IP: tPeer2, LLAddr: tMAC2, HasLLAddr: true, State: NUDPermanent, IfMAC: tIfMAC}, h.now, &h.out)
	h.resolve(tPeer, ipPacket(1, tPeer, 100))
	h.w.Resolve(tIf+1, tPeer, tIfMAC, ipPacket(1, tPeer, 100), 0, h.now, &h.out)
	if n := h.tab.FlushDev(tIf, true, h.now, &h.out); n != 1 {
		t.Fatalf("flushed %d", n)
	}
	h.expect(tPeer2, NUDPermanent)
	h.expect(tPeer, NUDNone)
	if n := h.tab.ChangeAddr(tIf, h.now, &h.out); n != 1 {
		t.Fatalf("flushed %d", n)
	}
	h.expect(tPeer2, NUDNone)
	if s := h.tab.Stats(); s.QueuePurged != 1 || s.Entries != 1 || len(h.out.Unreachable) != 0 {
		t.Fatalf("purged %d entries %d", s.QueuePurged, s.Entries)
	}
}

// Admin commands: errors and the delete of an INCOMPLETE entry, whose queued
// packets are reported unreachable.
func TestNeighAdmin(t *testing.T) {
	h := newHarness(t, DefaultParams())
	spec := Spec{IfIndex: tIf, IP: tPeer, LLAddr: tMAC1, HasLLAddr: true, State: NUDReachable, IfMAC: tIfMAC}
	if err := h.tab.Change(spec, h.now, &h.out); err != ErrNotFound {
		t.Fatal(err)
	}
	if err := h.tab.Add(Spec{IfIndex: tIf, IP: tPeer, State: NUDPermanent}, h.now, &h.out); err != ErrNoLLAddr {
		t.Fatal(err)
	}
	if err := h.tab.Add(Spec{IfIndex: tIf, IP: 0xe0000001, HasLLAddr: true, State: NUDPermanent}, h.now, &h.out); err == nil {
		t.Fatal("multicast neighbour accepted")
	}
	if err := h.tab.Add(Spec{IfIndex: tIf, IP: tPeer, HasLLAddr: true, State: NUDDelay}, h.now, &h.out); err == nil {
		t.Fatal("nud delay accepted")
	}
	if err := h.tab.Add(spec, h.now, &h.out); err != nil {
		t.Fatal(err)
	}
	h.expect(tPeer, NUDReachable)
	spec.State, spec.HasLLAddr = NUDNoARP, false // change keeps the address
	if err := h.tab.Change(spec, h.now, &h.out); err != nil {
		t.Fatal(err)
	}
	if i, _ := h.tab.Get(tIf, tPeer, h.now); i.State != NUDNoARP || i.LLAddr != tMAC1 {
		t.Fatalf("%+v", i)
	}
	h.at(time.Hour) // NOARP has no timer; one entry is below gc_thresh1
	h.expect(tPeer, NUDNoARP)
	if err := h.tab.Delete(tIf, tPeer, h.now, &h.out); err != nil {
		t.Fatal(err)
	}
	h.expect(tPeer, NUDNone)

	h.resolve(tPeer2, ipPacket(1, tPeer2, 100))
	h.out.Reset()
	if err := h.tab.Delete(tIf, tPeer2, h.now, &h.out); err != nil {
		t.Fatal(err)
	}
	if len(h.out.Unreachable) != 1 || fmt.Sprint(h.takeEvents()) != "[failed 00:00:00:00:00:00 FAILED removed 00:00:00:00:00:00 NONE]" {
		t.Fatalf("%+v", h.out)
	}
}

func TestParseHelpers(t *testing.T) {
	for _, s := range []string{"permanent", "reachable", "stale", "noarp", "delay", "probe", "incomplete", "failed", "none"} {
		st, err := ParseState(s)
		if err != nil || (st != NUDNone && st.String() != map[string]string{"permanent": "PERMANENT", "reachable": "REACHABLE",
			"stale": "STALE", "noarp": "NOARP", "delay": "DELAY", "probe": "PROBE", "incomplete": "INCOMPLETE", "failed": "FAILED"}[s]) {
			t.Fatal(s, st, err)
		}
	}
	if _, err := ParseState("bogus"); err == nil {
		t.Fatal("bogus state parsed")
	}
}
