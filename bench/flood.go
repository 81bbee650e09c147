package bench

// Suite `flood`: a 64-byte tagged broadcast flooded in one VLAN of a bridge
// with P ports, where the VLAN has M members and every port is also a member
// of V-1 other VLANs. Impls: `bridge` (Bridge.Receive: ingress, learning, the
// VLAN's member list, an immutable array above 8 members, no per-port VLAN
// lookup) and `naive`, the baseline this file keeps (naiveFlood: the VLAN
// checked and every port of the bridge visited with a per-port hash map
// lookup of its VLAN, each copy sent through the bridge's egress,
// Tx.SendTagged). The naive baseline does no learning but parses the tag
// again per copy; both run the same egress. ns/op is per flooded input frame,
// fan-out and transmit batching included (frames are processed in batches
// of 64, then flushed).

import (
	"encoding/binary"
	"fmt"

	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/wire"
)

func init() {
	Register(Suite{Name: "flood", Doc: "bridge flooding: VIDs x ports x members, naive vs member lists", Run: runFlood})
}

// FloodCase is one cell of the table.
type FloodCase struct {
	VIDs, Ports, Members int
	Naive                bool
}

// FloodCases lists the table: VIDs {1, 64, 1024} x ports {8, 32, 64}
// x members {2, half, all}.
func FloodCases() []FloodCase {
	var cs []FloodCase
	for _, v := range []int{1, 64, 1024} {
		for _, p := range []int{8, 32, 64} {
			for _, m := range []int{2, p / 2, p} {
				for _, naive := range []bool{true, false} {
					cs = append(cs, FloodCase{VIDs: v, Ports: p, Members: m, Naive: naive})
				}
			}
		}
	}
	return cs
}

// FloodSetup is a bridge ready to flood, and the frame to send.
type FloodSetup struct {
	Bridge *l2.Bridge
	Tx     *l2.Tx
	In     *l2.Port
	Frame  []byte
	naive  *naiveFlood // nil: the bridge floods
	sink   func(*l2.Port, [][]byte)
	count  int
}

// naiveFlood is the flood before VLAN member lists: per frame, look the
// ingress port's VLAN up, then visit every port of the bridge and look each
// port's VLAN up in a per-port hash map. It snapshots the membership when
// built.
type naiveFlood struct {
	in    *l2.Port
	ports []*l2.Port
	vlans []map[uint16]*l2.PortVLAN // per port, by VID
}

func newNaiveFlood(b *l2.Bridge, in *l2.Port) *naiveFlood {
	n := &naiveFlood{in: in}
	for _, p := range b.Members() {
		m := map[uint16]*l2.PortVLAN{}
		for vid := uint16(1); vid <= wire.MaxVID; vid++ {
			if pv := p.VLAN(vid); pv != nil && pv.Member() {
				m[vid] = pv
			}
		}
		n.ports = append(n.ports, p)
		n.vlans = append(n.vlans, m)
	}
	return n
}

// receive floods one tagged broadcast frame.
func (n *naiveFlood) receive(tx *l2.Tx, frame []byte) {
	vid := binary.BigEndian.Uint16(frame[14:16]) & wire.VIDMask
	if n.in.VLAN(vid) == nil {
		return
	}
	for i, p := range n.ports {
		pv := n.vlans[i][vid]
		if pv == nil || p == n.in || p.State() != l2.StateForwarding || p.Flags()&l2.FlagBcastFlood == 0 {
			continue
		}
		tx.SendTagged(pv.Dst(), frame, -1)
	}
}

const testVID = 4000 // the flooded VLAN; the others are 1..V-1

// NewFloodSetup builds the topology of c.
func NewFloodSetup(c FloodCase) (*FloodSetup, error) {
	d := l2.NewDomain(l2.DomainOptions{})
	ops := []l2.Op{l2.BridgeAdd{Name: "br0", Attrs: l2.BridgeAttrs{VLANFiltering: new(true), DefaultPVID: new(uint16(0))}}}
	for i := 0; i < c.Ports; i++ {
		name := fmt.Sprintf("p%d", i)
		ops = append(ops, l2.SetMaster{Port: name, Master: "br0"})
		if c.VIDs > 1 {
			ops = append(ops, l2.VLANAdd{Dev: name, VID: 1, VIDEnd: uint16(c.VIDs - 1)})
		}
		if i < c.Members {
			ops = append(ops, l2.VLANAdd{Dev: name, VID: testVID})
		}
	}
	if err := d.Apply(ops...); err != nil {
		return nil, err
	}
	b := d.Bridge("br0")
	s := &FloodSetup{Bridge: b, Tx: d.NewTx(l2.TxOptions{}), In: d.Port("p0")}
	if c.Naive {
		s.naive = newNaiveFlood(b, s.In)
	}
	s.Frame = make([]byte, 64)
	copy(s.Frame, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 1, 0x81, 0, testVID >> 8, testVID & 0xff, 0x88, 0xb5})
	s.sink = func(_ *l2.Port, f [][]byte) { s.count += len(f) }
	return s, nil
}

// Run floods n frames in batches of 64.
func (s *FloodSetup) Run(n int) {
	for i := 0; i < n; i++ {
		if s.naive != nil {
			s.naive.receive(s.Tx, s.Frame)
		} else {
			s.Bridge.Receive(s.Tx, s.In, s.Frame)
		}
		if i&63 == 63 {
			s.Tx.Flush(s.sink)
		}
	}
	s.Tx.Flush(s.sink)
}

// floodReplicas: every case is built this many times and the median of
// the replicas' fastest runs is reported. Identical setups differ by a few
// ns depending on where their memory landed (cache sets, 4K aliasing); the
// median over independent builds keeps one unlucky placement from deciding
// a ratio.
const floodReplicas = 3

func runFlood(opts Options) ([]Record, error) {
	opts.Normalize()
	cases := FloodCases()
	replicas := floodReplicas
	if opts.Quick {
		replicas = 1
	}
	var bodies []func(int)
	for _, c := range cases {
		for r := 0; r < replicas; r++ {
			s, err := NewFloodSetup(c)
			if err != nil {
				return nil, err
			}
			// Check the case floods what it should before timing it.
			s.Run(64)
			if s.count != 64*(c.Members-1) {
				return nil, fmt.Errorf("flood %+v: %d copies for 64 frames, want %d", c, s.count, 64*(c.Members-1))
			}
			bodies = append(bodies, s.Run)
		}
	}
	res := interleaved(opts, bodies)
	var recs []Record
	naiveNs := map[[3]int]float64{}
	for i, c := range cases {
		r := medianResult(res[i*replicas : (i+1)*replicas])
		impl := "bridge"
		if c.Naive {
			impl = "naive"
		}
		key := [3]int{c.VIDs, c.Ports, c.Members}
		rec := Record{Suite: "flood", Impl: impl,
			Params: map[string]any{"vids": c.VIDs, "ports": c.Ports, "members": c.Members},
			NsOp:   r.NsOp, Mops: r.Mops(), AllocsOp: r.AllocsOp}
		if c.Naive {
			naiveNs[key] = r.NsOp
		} else if n := naiveNs[key]; n > 0 {
			rec.Extra = map[string]any{"speedup_vs_naive": round2(n / r.NsOp)}
		}
		recs = append(recs, rec)
	}
	return recs, nil
}
