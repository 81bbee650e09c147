package metrics

// The readers of Collect, one per subsystem: each turns one subsystem's
// counters into the metrics named in collector.go's overview, through an
// emitter that looks up the descriptions by key. Same locking as Collect.

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/netfwd/netfwd/internal/fpm"
	"github.com/netfwd/netfwd/internal/hostpath"
	"github.com/netfwd/netfwd/internal/kmirror"
	"github.com/netfwd/netfwd/internal/pktio/afxdp"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
)

// emitter sends constant metrics of one scrape.
type emitter struct {
	c  *Collector
	ch chan<- prometheus.Metric
}

func (m emitter) counter(name string, v uint64, labels ...string) {
	m.ch <- prometheus.MustNewConstMetric(m.c.descs[name], prometheus.CounterValue, float64(v), labels...)
}

func (m emitter) gauge(name string, v float64, labels ...string) {
	m.ch <- prometheus.MustNewConstMetric(m.c.descs[name], prometheus.GaugeValue, v, labels...)
}

// bridges: per-port engine counters, l2 drops, floods, FDB totals, and each
// bridge's FDB.
func (m emitter) bridges(d *l2.Domain) {
	ds := d.Stats()
	for name, p := range ds.Ports {
		m.counter("port_rx_packets", p.RxPackets, name)
		m.counter("port_rx_bytes", p.RxBytes, name)
		m.counter("port_tx_packets", p.TxPackets, name)
		m.counter("port_tx_bytes", p.TxBytes, name)
		m.counter("port_rx_drops", p.RxDrops, name)
		m.counter("port_tx_drops", p.TxDrops, name)
	}
	for _, r := range l2.DropReasons() {
		m.counter("l2_drops", ds.Drop(r), r.String())
	}
	m.counter("flood", ds.FloodInline, "inline")
	m.counter("flood", ds.FloodDeferred, "deferred")
	m.counter("flood_queue_drops", ds.Drop(l2.DropFloodQueueFull))
	m.counter("fdb_learned", ds.FDBLearned)
	m.counter("fdb_moved", ds.FDBMoved)
	m.counter("fdb_aged", ds.FDBAged)
	m.counter("fdb_limit_hits", ds.FDBLimitHit)
	for _, b := range d.Bridges() {
		m.fdb(b)
	}
}

// fdb: a bridge's entries by type (learned and configured totals only for
// FDBs larger than fdbBreakdownMax) and its learning limit.
func (m emitter) fdb(b *l2.Bridge) {
	f := b.FDB()
	if f.Len() <= fdbBreakdownMax {
		n := map[string]int{"learned": 0, "local": 0, "static": 0, "dynamic": 0}
		for _, en := range f.Entries() {
			switch {
			case en.Learned:
				n["learned"]++
			case en.Local:
				n["local"]++
			case en.Static:
				n["static"]++
			default:
				n["dynamic"]++
			}
		}
		for t, v := range n {
			m.gauge("fdb_entries", float64(v), b.Name, t)
		}
	} else {
		m.gauge("fdb_entries", float64(f.Learned()), b.Name, "learned")
		m.gauge("fdb_entries", float64(f.Len()-f.Learned()), b.Name, "configured")
	}
	m.gauge("fdb_max_learned", float64(f.MaxLearned()), b.Name) // in force: the default when not configured
}

// router: l3 drops and counters, and the FIB's routes.
func (m emitter) router(e *l3.Engine) {
	s := e.Stats()
	for r, v := range s.Drops {
		m.counter("l3_drops", v, r)
	}
	m.counter("forwarded", s.Forwarded)
	for vrf, vs := range e.VRFStats() {
		m.counter("vrf_forwarded", vs.Forwarded, vrf)
		for r, v := range vs.Drops {
			m.counter("vrf_l3_drops", v, vrf, r)
		}
	}
	m.counter("arp_queued", s.Queued)
	m.counter("arp_released", s.Released)
	m.counter("arp_expired", s.Expired)
	m.counter("fragmented", s.Fragmented)
	m.counter("local", s.Local)
	m.counter("arp_in", s.ARPIn)
	m.counter("fib_lookups", s.FIBLookups)
	for t, v := range s.ICMPSent {
		m.counter("icmp_sent", v, t)
	}
	m.counter("icmp_limited", s.ICMPRateLimited)
	m.counter("punted", s.Punted)
	for table, types := range e.FIB().RouteCounts() {
		for typ, n := range types {
			m.gauge("fib_routes", float64(n), tableName(table), typ.String())
		}
	}
}

// neighbours: the neighbour table's entries, lookups, queues and limits.
func (m emitter) neighbours(e *l3.Engine) {
	ns := e.Router().Neighbours().Stats()
	for st, n := range ns.ByState {
		m.gauge("neigh_entries", float64(n), st)
	}
	m.counter("neigh_lookups", ns.Hits, "hit")
	m.counter("neigh_lookups", ns.Misses, "miss")
	m.counter("neigh_queue_drops", ns.QueueDrops)
	m.counter("neigh_budget", ns.QueueBudgetDrops)
	m.gauge("neigh_queued", float64(ns.QueuedBytes))
	m.counter("neigh_table_fulls", ns.TableFulls)
	m.counter("neigh_forced_gc", ns.ForcedGCEvictions)
	m.counter("arp_not_learned", ns.ARPNotLearned)
	m.counter("arp_limited", ns.ARPRepliesLimited)
	for r, v := range ns.ARPDrops {
		m.counter("arp_drops", v, r)
	}
}

// port: one opened port's socket counters (AF_XDP's and the control
// ring's when it has them).
func (m emitter) port(p PortIO) {
	st := p.Stats
	m.counter("pktio_rx", st.Rx.Packets, p.Name)
	m.counter("pktio_tx", st.Tx.Packets, p.Name)
	m.counter("pktio_ring_drops", st.Rx.RingDrops, p.Name)
	m.counter("pktio_freezes", st.Rx.RingFreezes, p.Name)
	m.counter("pktio_rollover", st.Rx.Rollover, p.Name)
	m.counter("pktio_overflows", p.RingOverflows, p.Name)
	m.counter("pktio_errors", st.Rx.Truncated, p.Name, "truncated")
	m.counter("pktio_errors", st.Rx.Errors, p.Name, "rx_error")
	m.counter("pktio_errors", st.Tx.Refused, p.Name, "tx_refused")
	m.counter("pktio_errors", st.Tx.BadOffload, p.Name, "tx_bad_offload")
	m.counter("pktio_errors", st.Tx.Errors, p.Name, "tx_error")
	m.counter("pktio_offload", st.Rx.GSO, p.Name, "gso")
	m.counter("pktio_offload", st.Rx.ChecksumCompleted, p.Name, "checksum_completed")
	m.counter("pktio_offload", st.Rx.ChecksumUnfixed, p.Name, "checksum_unfixed")
	m.counter("pktio_offload", st.Rx.VLANRestored, p.Name, "vlan_restored")
	if p.IO != "" {
		m.gauge("port_io", 1, p.Name, p.IO)
	}
	if c := p.Control; c != nil {
		m.counter("ctl_rx", c.Rx.Packets, p.Name)
		m.counter("ctl_ring_drops", c.Rx.RingDrops, p.Name)
	}
	if x := p.XDP; x != nil {
		m.counter("xdp_tx", x.TxByDescriptor, p.Name, "descriptor")
		m.counter("xdp_tx", x.TxCopied, p.Name, "copy")
		m.counter("xdp_tx", x.TxNoBuffer, p.Name, "no_buffer")
		m.counter("xdp_fill_empty", x.FillRingEmpty, p.Name)
		m.counter("xdp_kicks", x.TxKicks-x.TxKickAgain, p.Name, "sent")
		m.counter("xdp_kicks", x.TxKickAgain, p.Name, "again")
		m.counter("xdp_kick_gave_up", x.TxKickGaveUp, p.Name)
	}
}

// twin: one host-path twin's punts and injections.
func (m emitter) twin(t *hostpath.Twin) {
	st, port := t.Stats(), t.Port()
	m.counter("hp_punted", st.Punted, port)
	m.counter("hp_punt_drops", st.PuntDrops, port)
	m.counter("hp_punt_errors", st.PuntErrors, port)
	for cl, v := range st.RateLimited {
		m.counter("hp_rate_limited", v, port, hostpath.Class(cl).String())
	}
	m.counter("hp_injected", st.Injected, port)
	m.counter("hp_inject_errors", st.InjectErrors, port)
	m.counter("hp_inject_filter", st.InjectFiltered, port)
}

// fpm: the FPM server's route-source counters and its refusals.
func (m emitter) fpm(f *fpm.Stats) {
	m.routeSource("fpm", f.Connected.Load(), f.Messages.Load(), f.Batches.Load(), f.Sweeps.Load(), f.SweptRoutes.Load(), &f.C)
	for r, v := range f.Malformed() {
		m.counter("rs_malformed", v, r)
	}
	m.counter("rs_refused", f.RefusedPeers.Load(), "peer")
	m.counter("rs_refused", f.RefusedBusy.Load(), "busy")
}

// mirror: the kernel mirror's route-source counters and its overruns.
func (m emitter) mirror(k *kmirror.Stats) {
	m.routeSource("kernel", k.Synced.Load(), k.Messages.Load(), k.Batches.Load(), k.Sweeps.Load(), k.SweptRoutes.Load(), &k.C)
	m.counter("rs_overruns", k.Overruns.Load())
}

// routeSource: the counters both routing sources have.
func (m emitter) routeSource(src string, connected bool, messages, batches, sweeps, swept uint64, rc *fpm.Counters) {
	b := 0.0
	if connected {
		b = 1
	}
	m.gauge("rs_connected", b, src)
	m.counter("rs_messages", messages, src)
	m.counter("rs_batches", batches, src)
	m.counter("rs_sweeps", sweeps, src)
	m.counter("rs_swept", swept, src)
	m.counter("rs_routes", rc.RoutesAdded.Load(), src, "added")
	m.counter("rs_routes", rc.RoutesReplaced.Load(), src, "replaced")
	m.counter("rs_routes", rc.RoutesUnchanged.Load(), src, "unchanged")
	m.counter("rs_routes", rc.RoutesDeleted.Load(), src, "deleted")
	m.counter("rs_routes", rc.RoutesSeeded.Load(), src, "seeded")
	for r, v := range rc.Skipped() {
		m.counter("rs_skipped", v, src, r)
	}
	n, sum, buckets := rc.Lag.Snapshot()
	m.ch <- prometheus.MustNewConstHistogram(m.c.descs["rs_lag"], n, sum, buckets, src)
}

// xdpWaits: the AF_XDP workers' waits, once any happened.
func (m emitter) xdpWaits(w afxdp.WaitStats) {
	if w.Waits != 0 {
		m.counter("xdp_waits", w.Waits-w.Blocked, "spin")
		m.counter("xdp_waits", w.Blocked, "poll")
	}
}
