package l2

// The naive flood, kept as the benchmark baseline of seed 000's "before":
// visit every port of the bridge and look each port's VLAN up in a per-port
// hash map. EnableNaiveFlood snapshots the membership when called; it is
// for benchmarks and tests only (later configuration changes are not
// followed).

type naiveState struct {
	ports []*Port
	vlans []map[uint16]*PortVLAN // per port, by VID (0: raw)
}

// EnableNaiveFlood switches the bridge's flooding to the naive baseline.
func (b *Bridge) EnableNaiveFlood(on bool) {
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	if on {
		ns := &naiveState{}
		for _, p := range b.members {
			m := map[uint16]*PortVLAN{0: &p.raw}
			p.vlans.each(func(vid uint16, pv *PortVLAN) {
				if pv.Member() {
					m[vid] = pv
				}
			})
			ns.ports = append(ns.ports, p)
			ns.vlans = append(ns.vlans, m)
		}
		b.naive.Store(ns)
	}
	c := *b.cfg.Load()
	c.naiveFlood = on
	b.cfg.Store(&c)
}

func (ns *naiveState) flood(tx *Tx, in *Port, inCtl uint32, vid uint16, fv *frameView, need PortFlag, suppressed bool) int {
	n := 0
	for i := range ns.vlans {
		pv := ns.vlans[i][vid] // the per-port VLAN lookup the seed removed
		if pv == nil {
			continue
		}
		n += tx.floodOne(pv, in, inCtl, need, suppressed, fv)
	}
	return n
}
