package l2

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/race"
	"github.com/netfwd/netfwd/wire"
)

// applyRef mirrors a successfully applied op on the reference bridge.
func (r *refBridge) applyOp(op Op) {
	switch o := op.(type) {
	case VLANAdd:
		hi := o.VIDEnd
		if hi == 0 {
			hi = o.VID
		}
		for vid := o.VID; vid <= hi; vid++ {
			if o.Dev == "br0" {
				_, had := r.self[vid]
				if o.PVID {
					for k, s := range r.self {
						s.pvid = false
						r.self[k] = s
					}
				}
				r.self[vid] = refVLAN{pvid: o.PVID, untagged: o.Untagged}
				if !had {
					r.delEntry(fdbKey(r.mac, vid))
					r.fdb[fdbKey(r.mac, vid)] = &refEntry{local: true, static: true}
				}
				continue
			}
			r.vlanAdd(r.port(o.Dev), vid, o.PVID, o.Untagged)
		}
	case VLANDel:
		if o.Dev == "br0" {
			delete(r.self, o.VID)
			if e := r.fdb[fdbKey(r.mac, o.VID)]; e != nil && e.port == nil {
				delete(r.fdb, fdbKey(r.mac, o.VID))
			}
			return
		}
		r.vlanDel(r.port(o.Dev), o.VID)
	case LinkSet:
		p := r.port(o.Dev)
		p.flags = p.flags&^o.Clear | o.Set
		if o.State != nil {
			p.state = *o.State
		}
		if o.MaxLearned != nil {
			p.maxLearned = int(*o.MaxLearned)
		}
	case FDBAdd:
		e := &refEntry{user: true, sticky: o.Sticky, updated: r.now()}
		switch o.Kind {
		case FDBPermanent:
			e.local, e.static = true, true
		case FDBStatic:
			e.static = true
		}
		if o.Dev != "br0" {
			e.port = r.port(o.Dev)
		}
		vid := uint16(0)
		if o.HasVID {
			vid = o.VID
		}
		k := fdbKey(o.MAC, vid)
		r.delEntry(k)
		r.fdb[k] = e
	case FDBDel:
		r.delEntry(fdbKey(o.MAC, o.VID))
	case MDBAdd:
		k := fdbKey(o.Group, o.VID)
		r.mdb[k] = append(r.mdb[k], r.port(o.Port))
	case BridgeSet:
		if o.Attrs.AgeingTime != nil {
			r.ageing = int64(*o.Attrs.AgeingTime)
		}
		if o.Attrs.FDBMaxLearned != nil {
			r.maxLearned = int(*o.Attrs.FDBMaxLearned)
		}
		if o.Attrs.FloodDeferThreshold != nil {
			r.deferThreshold = *o.Attrs.FloodDeferThreshold
		}
		if o.Attrs.McastPrefilter != nil {
			r.prefilter = *o.Attrs.McastPrefilter
		}
		if o.Attrs.VLANFiltering != nil {
			r.filtering = *o.Attrs.VLANFiltering
		}
	default:
		panic(fmt.Sprintf("applyOp: %T", op))
	}
}

type diffWorld struct {
	t      *testing.T
	rng    *rand.Rand
	tb     *testBridge
	ref    *refBridge
	names  []string
	macs   []wire.MAC // station pool
	groups []wire.MAC
	vids   []uint16
	step   int
	trace  []string // the last steps, logged when the test fails
}

func newDiffWorld(t *testing.T, seed uint64) *diffWorld {
	rng := rand.New(rand.NewPCG(seed, seed*7+1))
	filtering := rng.IntN(4) != 0
	n := 2 + rng.IntN(13) // 2..14 ports: both list and array member sets
	brMAC := wire.MustParseMAC("02:bb:00:00:00:01")
	w := &diffWorld{t: t, rng: rng, ref: newRefBridge(brMAC, filtering)}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d, the last steps:\n%s", seed, strings.Join(w.trace, "\n"))
		}
	})
	clk := NewManualClock()
	d := NewDomain(DomainOptions{Clock: clk})
	ops := []Op{BridgeAdd{Name: "br0", Attrs: BridgeAttrs{VLANFiltering: new(filtering), MAC: &brMAC}}}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("p%d", i)
		var m wire.MAC
		if rng.IntN(2) == 0 {
			m = wire.MAC{0x02, 0xaa, 0, 0, 0, byte(i)}
		}
		ops = append(ops, PortAdd{Name: name, MAC: m}, SetMaster{Port: name, Master: "br0"})
		w.names = append(w.names, name)
		w.ref.addPort(name, m)
		if !m.IsZero() {
			w.macs = append(w.macs, m)
		}
	}
	mustApply(t, d, ops...)
	w.tb = &testBridge{t: t, d: d, b: d.Bridge("br0"), clock: clk,
		tx: d.NewTx(TxOptions{DeferLen: 4 + rng.IntN(8)}), ports: map[string]*Port{}}
	w.ref.deferLen = w.tb.tx.opts.DeferLen
	w.ref.now = clk.Now
	for _, name := range w.names {
		w.tb.ports[name] = d.Port(name)
	}
	for i := 0; i < 12; i++ {
		w.macs = append(w.macs, mac(i+1))
	}
	w.macs = append(w.macs, brMAC)
	w.groups = []wire.MAC{wire.MustParseMAC("01:00:5e:00:00:01"), wire.MustParseMAC("01:00:5e:00:00:fb"),
		wire.MustParseMAC("33:33:00:00:00:01"), wire.MustParseMAC("01:00:5e:7f:00:02")}
	w.vids = []uint16{1, 2, 3, 4, 5}
	return w
}

func (w *diffWorld) pick(xs []string) string { return xs[w.rng.IntN(len(xs))] }

// randomOp returns a random configuration op (possibly invalid).
func (w *diffWorld) randomOp() Op {
	r := w.rng
	port := w.pick(w.names)
	vid := w.vids[r.IntN(len(w.vids))]
	switch r.IntN(12) {
	case 0, 1:
		return VLANAdd{Dev: port, VID: vid, PVID: r.IntN(3) == 0, Untagged: r.IntN(2) == 0}
	case 2:
		return VLANDel{Dev: port, VID: vid}
	case 3:
		return VLANAdd{Dev: "br0", VID: vid, Untagged: r.IntN(2) == 0}
	case 4:
		return VLANDel{Dev: "br0", VID: vid}
	case 5, 6:
		f := flagNames[r.IntN(len(flagNames))].f
		if r.IntN(2) == 0 {
			return LinkSet{Dev: port, Set: f}
		}
		return LinkSet{Dev: port, Clear: f}
	case 7:
		st := []PortState{StateForwarding, StateForwarding, StateLearning, StateBlocking, StateDisabled}[r.IntN(5)]
		return LinkSet{Dev: port, State: &st}
	case 8:
		o := FDBAdd{MAC: w.macs[r.IntN(len(w.macs))], Dev: port, Kind: FDBKind(r.IntN(3)), Sticky: r.IntN(3) == 0, Replace: true}
		if o.Kind == FDBPermanent {
			o.Sticky = false
		}
		if w.ref.filtering {
			o.VID, o.HasVID = vid, true
		}
		return o
	case 9:
		return MDBAdd{Bridge: "br0", Port: port, Group: w.groups[r.IntN(len(w.groups))], VID: map[bool]uint16{true: vid, false: 0}[w.ref.filtering]}
	case 10:
		switch r.IntN(5) {
		case 4:
			return BridgeSet{Name: "br0", Attrs: BridgeAttrs{VLANFiltering: new(r.IntN(2) == 0)}}
		case 0:
			return BridgeSet{Name: "br0", Attrs: BridgeAttrs{FDBMaxLearned: new(uint32(r.IntN(8)))}}
		case 1:
			return BridgeSet{Name: "br0", Attrs: BridgeAttrs{FloodDeferThreshold: new(r.IntN(16) - 1)}}
		case 2:
			return BridgeSet{Name: "br0", Attrs: BridgeAttrs{McastPrefilter: new(r.IntN(2) == 0)}}
		default:
			return BridgeSet{Name: "br0", Attrs: BridgeAttrs{AgeingTime: new(time.Duration(r.IntN(3)) * 20 * time.Second)}}
		}
	default:
		return LinkSet{Dev: port, MaxLearned: new(uint32(r.IntN(4)))}
	}
}

func (w *diffWorld) randomFrame() (string, []byte) {
	r := w.rng
	in := w.pick(w.names)
	src := w.macs[r.IntN(len(w.macs))]
	if r.IntN(40) == 0 {
		src = w.groups[0] // invalid source
	}
	var dst wire.MAC
	switch r.IntN(10) {
	case 0, 1:
		dst = wire.BroadcastMAC
	case 2:
		dst = w.groups[r.IntN(len(w.groups))]
	case 3:
		dst = wire.MAC{0x01, 0x00, 0x5e, 0x10, byte(r.IntN(256)), byte(r.IntN(256))} // unwanted group
	case 4:
		dst = wire.MustParseMAC("01:80:c2:00:00:00")
		if r.IntN(2) == 0 {
			dst[5] = byte(1 + r.IntN(15))
		}
	default:
		dst = w.macs[r.IntN(len(w.macs))]
	}
	tag := -1
	switch r.IntN(5) {
	case 0, 1:
		tag = int(w.vids[r.IntN(len(w.vids))])
	case 2:
		tag = 0 // priority tag
	case 3:
		if r.IntN(4) == 0 {
			tag = 7 // never configured
		}
	}
	if dst.IsBroadcast() && r.IntN(2) == 0 {
		// ARP request for a neighbour, an own address, a probe.
		sip := [4]byte{10, 0, 0, byte(r.IntN(4))}
		tip := [4]byte{10, 0, 0, byte(1 + r.IntN(6))}
		return in, arpRequest(src, sip, tip, tag)
	}
	f := buildFrame(frameSpec{dst: dst, src: src, tag: tag, pcp: uint8(r.IntN(8)), payload: []byte{byte(w.step), byte(w.step >> 8)}})
	switch r.IntN(60) {
	case 0:
		f = f[:r.IntN(14)]
	case 1:
		if tag >= 0 {
			f = f[:14+r.IntN(4)]
		}
	}
	return in, f
}

func (w *diffWorld) compareFDB() {
	w.t.Helper()
	var got []refFDBLine
	for _, e := range w.tb.b.FDB().Entries() {
		l := refFDBLine{MAC: e.MAC, VID: e.VID, Local: e.Local, Static: e.Static, Sticky: e.Sticky, User: e.User, Learned: e.Learned}
		if e.Port != nil {
			l.Port = e.Port.Name
		}
		got = append(got, l)
	}
	sortFDBLines(got)
	want := w.ref.entries()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		w.t.Fatalf("step %d: FDB differs (learned %d, ref %d)\n got %v\nwant %v", w.step, w.tb.b.FDB().Learned(), w.ref.nLearned, got, want)
	}
}

func (w *diffWorld) run(steps int) {
	t := w.t
	for w.step = 0; w.step < steps; w.step++ {
		r := w.rng
		switch x := r.IntN(100); {
		case x < 8:
			op := w.randomOp()
			if err := w.tb.d.Apply(op); err == nil {
				w.ref.applyOp(op)
				w.log(op.String())
			}
			continue
		case x < 10:
			ip := netip.AddrFrom4([4]byte{10, 0, 0, byte(1 + r.IntN(6))})
			vid := w.vids[r.IntN(len(w.vids))]
			if !w.ref.filtering {
				vid = 0
			}
			m := w.macs[r.IntN(len(w.macs)-1)]
			own := r.IntN(4) == 0
			if own {
				w.tb.b.SetOwnAddress(vid, ip, m)
			} else {
				w.tb.b.SetNeighbor(vid, ip, m)
			}
			a := ip.As4()
			w.ref.neigh[uint64(vid)<<32|uint64(uint32(a[0])<<24|uint32(a[1])<<16|uint32(a[2])<<8|uint32(a[3]))] = struct {
				mac wire.MAC
				own bool
			}{m, own}
			continue
		case x < 11:
			vid := w.vids[r.IntN(len(w.vids))]
			if !w.ref.filtering {
				vid = 0
			}
			g := w.groups[r.IntN(len(w.groups))]
			w.tb.b.JoinGroup(vid, g)
			w.ref.hostGroups[fdbKey(g, vid)] = true
			continue
		case x < 13:
			w.tb.clock.Advance(time.Duration(r.IntN(40)) * time.Second)
			w.tb.b.Age()
			w.ref.age(w.tb.clock.Now())
			w.log("age")
			w.compareFDB()
			continue
		}
		// A batch of frames.
		now := w.tb.clock.Now() &^ (1<<20 - 1)
		nb := 1 + r.IntN(12)
		for i := 0; i < nb; i++ {
			in, f := w.randomFrame()
			w.log(fmt.Sprintf("rx %s %x", in, f[:min(len(f), 18)]))
			got := w.tb.b.Receive(w.tb.tx, w.tb.ports[in], f)
			want := w.ref.receive(w.ref.port(in), f, now)
			if got != want {
				t.Fatalf("step %d frame %d on %s %x:\n got %+v\nwant %+v", w.step, i, in, f, got, want)
			}
		}
		gotOut := w.tb.flush()
		wantOut := w.ref.flush(now)
		for _, name := range w.names {
			g, wt := gotOut[name], wantOut[name]
			if len(g) != len(wt) {
				t.Fatalf("step %d port %s: %d frames, reference %d", w.step, name, len(g), len(wt))
			}
			for i := range g {
				if !bytes.Equal(g[i], wt[i]) {
					t.Fatalf("step %d port %s frame %d:\n got %x\nwant %x", w.step, name, i, g[i], wt[i])
				}
			}
		}
		w.tb.clock.Advance(time.Duration(r.IntN(3000)) * time.Millisecond)
		if r.IntN(10) == 0 {
			w.compareFDB()
		}
	}
	w.compareFDB()
	st := w.tb.d.Stats()
	for reason, n := range w.ref.drops {
		if st.Drops[reason] != uint64(n) {
			t.Fatalf("drop %v: %d, reference %d", reason, st.Drops[reason], n)
		}
	}
}

func TestDifferentialAgainstReference(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 40
	} else if race.Enabled {
		seeds = 100
	}
	for s := 0; s < seeds; s++ {
		t.Run(fmt.Sprint(s), func(t *testing.T) {
			newDiffWorld(t, uint64(s)).run(400)
		})
	}
}

// log records a step for the failure report (the last 40).
func (w *diffWorld) log(s string) {
	if len(w.trace) == 40 {
		w.trace = w.trace[1:]
	}
	w.trace = append(w.trace, fmt.Sprintf("step %d: %s", w.step, s))
}
