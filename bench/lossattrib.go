package bench

// Where frames were lost in a run on the veth topology: the kernel's drop
// counters of every interface on the path (ip -s link: rx_dropped,
// tx_dropped, rx_missed) and the per-CPU backlog drops of
// /proc/net/softnet_stat, read before and after, and their changes.
//
// A soak that only counts "offered - delivered" cannot say whether the
// forwarder fell behind (its own ring drops, in its metrics) or the
// kernel dropped on the way in (veth's XDP ring) or out (H2's backlog).
//
// Locking: none; one goroutine.

import (
	"os"
	"strconv"
	"strings"
)

// kernelDrops is a snapshot: "IFACE rx_dropped" etc. -> count.
type kernelDrops map[string]uint64

// readKernelDrops reads the drop counters of the topology's interfaces.
func (n *vethNet) readKernelDrops() kernelDrops {
	d := kernelDrops{}
	for _, at := range [][2]string{{n.h1, n.h1if}, {n.r, n.ra}, {n.r, n.rb}, {n.h2, n.h2if}} {
		s, err := linkStats(at[0], at[1])
		if err != nil {
			continue
		}
		d[at[1]+" rx_dropped"] = s.Rx.Dropped
		d[at[1]+" rx_missed"] = s.Rx.Missed
		d[at[1]+" tx_dropped"] = s.Tx.Dropped
	}
	d["softnet backlog_dropped"] = softnetDropped()
	return d
}

// softnetDropped sums /proc/net/softnet_stat's second column (frames the
// per-CPU backlog refused: netdev_max_backlog) over the CPUs.
func softnetDropped() uint64 {
	b, err := os.ReadFile("/proc/net/softnet_stat")
	if err != nil {
		return 0
	}
	var sum uint64
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if v, err := strconv.ParseUint(f[1], 16, 64); err == nil {
			sum += v
		}
	}
	return sum
}

// since returns the counters that moved between before and d.
func (d kernelDrops) since(before kernelDrops) map[string]uint64 {
	moved := map[string]uint64{}
	for k, v := range d {
		if v != before[k] {
			moved[k] = v - before[k]
		}
	}
	return moved
}
