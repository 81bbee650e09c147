package bench

// Suite `mcast` (the macvlan case): frames to a multicast group
// that no member of the VLAN joined, on a bridge whose ports do not flood
// unknown multicast (mcast_flood off) but want a few groups (static mdb
// entries). Impls: `nofilter` (the early filter disabled: the frame goes
// through the group lookup and the flood path, which for 64 members means
// the bounded deferral queue and a visit of every member, to find nobody)
// and `filter` (the per-VLAN 256-bit filter drops it at ingress). The full
// run sends 16Mi frames per impl.

import (
	"fmt"
	"runtime"
	"time"

	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/wire"
)

func init() {
	Register(Suite{Name: "mcast", Doc: "unwanted multicast: early filter vs flood path", Run: runMcast})
}

// McastSetup is a bridge with 64 ports in VLAN 10 and an unwanted-group frame.
type McastSetup struct {
	D      *l2.Domain
	Bridge *l2.Bridge
	Tx     *l2.Tx
	In     *l2.Port
	Frame  []byte
}

// McastPorts is the number of members of the VLAN.
const McastPorts = 64

// NewMcastSetup builds the topology; filter selects the impl.
func NewMcastSetup(filter bool) (*McastSetup, error) {
	d := l2.NewDomain(l2.DomainOptions{})
	ops := []l2.Op{l2.BridgeAdd{Name: "br0", Attrs: l2.BridgeAttrs{VLANFiltering: new(true), McastPrefilter: new(filter)}}}
	for i := 0; i < McastPorts; i++ {
		name := fmt.Sprintf("p%d", i)
		ops = append(ops, l2.SetMaster{Port: name, Master: "br0"},
			l2.VLANAdd{Dev: name, VID: 10},
			l2.LinkSet{Dev: name, Clear: l2.FlagMcastFlood})
		if i%8 == 1 {
			// Some groups are wanted (so the filter is not trivially empty).
			ops = append(ops, l2.MDBAdd{Bridge: "br0", Port: name, Group: wire.MAC{0x01, 0x00, 0x5e, 0, 0, byte(i)}, VID: 10})
		}
	}
	if err := d.Apply(ops...); err != nil {
		return nil, err
	}
	s := &McastSetup{D: d, Bridge: d.Bridge("br0"), Tx: d.NewTx(l2.TxOptions{}), In: d.Port("p0")}
	s.Frame = make([]byte, 64)
	copy(s.Frame, []byte{0x01, 0x00, 0x5e, 0x7f, 0x00, 0x01, 0x02, 0, 0, 0, 0, 1, 0x81, 0, 0, 10, 0x08, 0x00})
	return s, nil
}

// Run sends n frames in batches of 64.
func (s *McastSetup) Run(n int) {
	for i := 0; i < n; i++ {
		s.Bridge.Receive(s.Tx, s.In, s.Frame)
		if i&63 == 63 {
			s.Tx.Flush(nil)
		}
	}
	s.Tx.Flush(nil)
}

func runMcast(opts Options) ([]Record, error) {
	opts.Normalize()
	frames := 16 << 20
	if opts.Quick {
		frames = 1 << 20
	}
	if opts.Frames > 0 {
		frames = int(min(opts.Frames, 1<<30))
	}
	var recs []Record
	var base float64
	for _, impl := range []string{"nofilter", "filter"} {
		s, err := NewMcastSetup(impl == "filter")
		if err != nil {
			return nil, err
		}
		s.Run(1024) // warm up queues and arena
		before := s.D.Stats()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		start := time.Now()
		s.Run(frames)
		el := time.Since(start)
		runtime.ReadMemStats(&m1)
		after := s.D.Stats()
		// Nothing may leave: the group is unwanted either way.
		var tx uint64
		for _, p := range after.Ports {
			tx += p.TxPackets
		}
		for _, p := range before.Ports {
			tx -= p.TxPackets
		}
		if tx != 0 {
			return nil, fmt.Errorf("mcast %s: %d frames sent for an unwanted group", impl, tx)
		}
		ns := float64(el.Nanoseconds()) / float64(frames)
		rec := Record{Suite: "mcast", Impl: impl, Params: map[string]any{"frames": frames, "ports": McastPorts},
			NsOp: ns, Mops: 1e3 / ns, AllocsOp: float64(m1.Mallocs-m0.Mallocs) / float64(frames),
			Extra: map[string]any{"seconds": round2(el.Seconds()),
				"dropped_filtered":  after.Drops[l2.DropMcastFiltered] - before.Drops[l2.DropMcastFiltered],
				"dropped_no_target": after.Drops[l2.DropNoFloodTarget] - before.Drops[l2.DropNoFloodTarget],
				"flood_deferred":    after.FloodDeferred - before.FloodDeferred}}
		if impl == "nofilter" {
			base = ns
		} else {
			rec.Extra["speedup_vs_nofilter"] = round2(base / ns)
		}
		recs = append(recs, rec)
		opts.Log("mcast %s: %d frames in %v (%.1f ns/frame)", impl, frames, el, ns)
	}
	return recs, nil
}
