package l2

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netfwd/netfwd/wire"
)

// The randomized test of validation against commit: any batch of ops that
// validation accepts commits without error and leaves the live state equal
// to the view validation computed (bridges and their attributes and own
// VLANs, ports with their bridge, VLANs and pvid, FDB entries, mdb
// entries), over a small universe of names so that ops collide, depend on
// each other and undo each other, with learned entries from traffic in
// between.

var (
	viewBridges = []string{"br0", "br1"}
	viewPorts   = []string{"p0", "p1", "p2", "p3"}
	viewVIDs    = []uint16{1, 2, 3, 10}
	viewGroups  = []wire.MAC{{0x01, 0, 0x5e, 0, 0, 1}, {0x01, 0, 0x5e, 0, 0, 2}}
)

func viewMAC(i int) wire.MAC { return wire.MAC{2, 0, 0, 0, 0xaa, byte(i)} }

func randomViewOp(r *rand.Rand) Op {
	pick := func(xs []string) string { return xs[r.IntN(len(xs))] }
	vid := func() uint16 { return viewVIDs[r.IntN(len(viewVIDs))] }
	dev := func() string {
		if r.IntN(4) == 0 {
			return pick(viewBridges)
		}
		return pick(viewPorts)
	}
	attrs := func() BridgeAttrs {
		var a BridgeAttrs
		if r.IntN(2) == 0 {
			a.VLANFiltering = new(r.IntN(2) == 0)
		}
		if r.IntN(3) == 0 {
			a.DefaultPVID = new([]uint16{0, 1, 2, 10}[r.IntN(4)])
		}
		if r.IntN(4) == 0 {
			a.AgeingTime = new(time.Duration(r.IntN(3)) * 100 * time.Second)
		}
		return a
	}
	switch r.IntN(16) {
	case 0:
		a := attrs()
		if r.IntN(2) == 0 {
			a.MAC = new(wire.MAC{2, 0xbb, 0, 0, 0, byte(r.IntN(2))})
		}
		return BridgeAdd{Name: pick(viewBridges), Attrs: a}
	case 1:
		return BridgeSet{Name: pick(viewBridges), Attrs: attrs()}
	case 2:
		return BridgeDel{Name: pick(viewBridges)}
	case 3:
		return PortAdd{Name: pick(viewPorts)}
	case 4, 5:
		m := pick(viewBridges)
		if r.IntN(4) == 0 {
			m = ""
		}
		return SetMaster{Port: pick(viewPorts), Master: m}
	case 6, 7:
		o := VLANAdd{Dev: dev(), VID: vid(), PVID: r.IntN(3) == 0, Untagged: r.IntN(2) == 0, Self: r.IntN(8) == 0}
		if r.IntN(5) == 0 {
			o.VID, o.VIDEnd, o.PVID = 1, 3, false
		}
		return o
	case 8:
		o := VLANDel{Dev: dev(), VID: vid(), Self: r.IntN(8) == 0}
		if r.IntN(5) == 0 {
			o.VID, o.VIDEnd = 2, 3
		}
		return o
	case 9, 10:
		o := FDBAdd{MAC: viewMAC(r.IntN(4)), Dev: dev(), Kind: FDBKind(r.IntN(3)), Sticky: r.IntN(4) == 0, Replace: r.IntN(3) == 0}
		if r.IntN(2) == 0 {
			o.VID, o.HasVID = vid(), true
		}
		return o
	case 11:
		o := FDBDel{MAC: viewMAC(r.IntN(4)), Dev: dev()}
		if r.IntN(2) == 0 {
			o.VID, o.HasVID = vid(), true
		}
		return o
	case 12:
		o := LinkSet{Dev: pick(viewPorts)}
		f := []PortFlag{FlagLearning, FlagFlood, FlagIsolated, FlagNeighSuppress}[r.IntN(4)]
		if r.IntN(2) == 0 {
			o.Set = f
		} else {
			o.Clear = f
		}
		if r.IntN(3) == 0 {
			o.State = new(PortState(r.IntN(5)))
		}
		return o
	case 13, 14:
		o := MDBAdd{Bridge: pick(viewBridges), Port: pick(viewPorts), Group: viewGroups[r.IntN(2)]}
		if r.IntN(2) == 0 {
			o.VID = vid()
		}
		if r.IntN(3) == 0 {
			return MDBDel(o)
		}
		return o
	}
	return PortAdd{Name: pick(viewPorts)}
}

// fdbKeys are the FDB keys the universe can produce.
func viewFDBKeys() []uint64 {
	var keys []uint64
	for i := range 4 {
		keys = append(keys, fdbKey(viewMAC(i), 0))
		for _, v := range viewVIDs {
			keys = append(keys, fdbKey(viewMAC(i), v))
		}
	}
	for i := range 2 { // the bridges' own addresses
		keys = append(keys, fdbKey(wire.MAC{2, 0xbb, 0, 0, 0, byte(i)}, 0))
		for _, v := range viewVIDs {
			keys = append(keys, fdbKey(wire.MAC{2, 0xbb, 0, 0, 0, byte(i)}, v))
		}
	}
	return keys
}

// vlanList renders a device's VLANs: [1u 10p] is 1 untagged and 10 the
// pvid, tagged.
func vlanList(s *vlanSet) string {
	var out []string
	for v := range uint16(wire.MaxVID + 1) {
		if s.has(v) {
			w := strconv.Itoa(int(v))
			if s.untagged.has(v) {
				w += "u"
			}
			if s.pvid == v {
				w += "p"
			}
			out = append(out, w)
		}
	}
	return "[" + strings.Join(out, " ") + "]"
}

// describeView renders what the view says the state is.
func describeView(v *view) string {
	var out []string
	for _, name := range viewBridges {
		m := v.bridge(name)
		if !m.exists {
			continue
		}
		out = append(out, fmt.Sprintf("bridge %s filtering %v default_pvid %d self %s", name, m.filtering, m.defaultPVID, vlanList(&m.self)))
		for _, k := range viewFDBKeys() {
			if e := v.fdbEntry(name, k); e.present {
				out = append(out, fmt.Sprintf("fdb %s %s vlan %d dev %s", name, keyMAC(k), keyVID(k), e.dev))
			}
		}
		for _, p := range viewPorts {
			for _, g := range viewGroups {
				for _, vid := range append([]uint16{0}, viewVIDs...) {
					if v.mdbEntry(name, p, fdbKey(g, vid)) {
						out = append(out, fmt.Sprintf("mdb %s %s %s vid %d", name, p, g, vid))
					}
				}
			}
		}
	}
	for _, name := range viewPorts {
		if m := v.port(name); m.exists {
			out = append(out, fmt.Sprintf("port %s master %q vlans %s", name, m.master, vlanList(&m.vlans)))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// describeLive renders the live state in the same form.
func describeLive(d *Domain) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, name := range viewBridges {
		b := d.bridges[name]
		if b == nil {
			continue
		}
		cfg := b.cfg.Load()
		var self vlanSet
		b.vlans.each(func(vid uint16, vl *vlan) {
			if f := vl.self.Load(); f&pvMember != 0 {
				self.add(vid, f&pvPVID != 0, f&pvUntagged != 0)
			}
		})
		out = append(out, fmt.Sprintf("bridge %s filtering %v default_pvid %d self %s", name, cfg.vlanFiltering, cfg.defaultPVID, vlanList(&self)))
		for _, k := range viewFDBKeys() {
			if pv, _, ok := b.fdb.lookup(k); ok {
				dev := name
				if pv != nil {
					dev = pv.port.Name
				}
				out = append(out, fmt.Sprintf("fdb %s %s vlan %d dev %s", name, keyMAC(k), keyVID(k), dev))
			}
		}
		for _, g := range b.mdb {
			for _, p := range g.ports {
				out = append(out, fmt.Sprintf("mdb %s %s %s vid %d", name, p.Name, g.group, g.vid))
			}
		}
	}
	for _, name := range viewPorts {
		p := d.byName[name]
		if p == nil {
			continue
		}
		master := ""
		if b := p.bridge.Load(); b != nil {
			master = b.Name
		}
		var vlans vlanSet
		p.vlans.each(func(vid uint16, pv *PortVLAN) {
			if f := pv.flags.Load(); f&pvMember != 0 {
				vlans.add(vid, false, f&pvUntagged != 0)
			}
		})
		vlans.pvid = p.PVID()
		out = append(out, fmt.Sprintf("port %s master %q vlans %s", name, master, vlanList(&vlans)))
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// learnSome sends a few frames from random sources into random bridge
// ports, so that learned entries (which configuration replaces silently)
// meet the ops.
func learnSome(r *rand.Rand, d *Domain, tx *Tx) {
	for range r.IntN(4) {
		p := d.Port(viewPorts[r.IntN(len(viewPorts))])
		if p == nil || p.Bridge() == nil {
			continue
		}
		var frame []byte
		if vid := viewVIDs[r.IntN(len(viewVIDs))]; r.IntN(2) == 0 {
			frame = tagged(wire.BroadcastMAC, viewMAC(r.IntN(4)), int(vid))
		} else {
			frame = untagged(wire.BroadcastMAC, viewMAC(r.IntN(4)))
		}
		p.Bridge().Receive(tx, p, frame)
		tx.Flush(nil)
	}
}

func TestViewMatchesCommit(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 50
	}
	if v, err := strconv.Atoi(os.Getenv("NETFWD_VIEW_SEEDS")); err == nil {
		seeds = v
	}
	accepted, total := 0, 0
	for seed := range seeds {
		r := rand.New(rand.NewPCG(uint64(seed), 11))
		d := NewDomain(DomainOptions{Clock: NewManualClock()})
		tx := d.NewTx(TxOptions{})
		var history []string
		for range 30 {
			ops := make([]Op, 1+r.IntN(6))
			for i := range ops {
				ops[i] = randomViewOp(r)
			}
			total++
			// Drop the ops validation refuses, twice at most: what is left
			// is still a random batch, and one that validation accepts.
			var want string
			var errs []OpError
			for range 3 {
				d.mu.Lock()
				var v *view
				v, errs = d.checkLocked(ops)
				if len(errs) == 0 {
					want = describeView(v)
				}
				d.mu.Unlock()
				if len(errs) == 0 {
					break
				}
				bad := map[int]bool{}
				for _, e := range errs {
					bad[e.Index] = true
				}
				var keep []Op
				for i, op := range ops {
					if !bad[i] {
						keep = append(keep, op)
					}
				}
				ops = keep
			}
			if len(errs) > 0 || len(ops) == 0 {
				continue
			}
			var batch []string
			for _, op := range ops {
				batch = append(batch, op.String())
			}
			history = append(history, strings.Join(batch, "; "))
			c, errs := d.Prepare(ops)
			if len(errs) > 0 {
				t.Fatalf("seed %d: accepted by the view, refused by Prepare: %v", seed, errs)
			}
			if err := c.Commit(); err != nil {
				t.Fatalf("seed %d: validated batch failed to commit: %v\nbatches:\n%s", seed, err, strings.Join(history, "\n"))
			}
			if got := describeLive(d); got != want {
				t.Fatalf("seed %d: the live state differs from the validated view\nbatches:\n%s\nlive:\n%s\nview:\n%s",
					seed, strings.Join(history, "\n"), got, want)
			}
			accepted++
			learnSome(r, d, tx)
		}
	}
	// Random ops are often refused; enough batches must commit for the test
	// to test something.
	if accepted < total/2 {
		t.Fatalf("only %d of %d batches were accepted", accepted, total)
	}
	t.Logf("%d of %d batches accepted and compared", accepted, total)
}
