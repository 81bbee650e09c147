// Package metrics exports the engine's counters to Prometheus. A custom
// Collector reads them at scrape time: the datapath keeps plain per-worker
// counters and publishes them per batch (l2, l3 and pktio do that), and
// nothing Prometheus-related runs per packet.
//
// Metrics (all prefixed netfwd_):
//
//	port_{rx,tx}_{packets,bytes}_total{port}     frames handed to / queued by the engine per port (bridged and routed)
//	port_{rx,tx}_drops_total{port}               frames dropped on the port (any reason) / copies not sent
//	pktio_rx_packets_total{port}, pktio_tx_packets_total{port}   what the sockets moved
//	pktio_ring_drops_total{port}                 frames the kernel could not put in a full RX ring
//	pktio_ring_freezes_total{port}               times the ring filled up
//	pktio_control_{rx_packets,ring_drops}_total{port}  the control ring (host path)
//	pktio_errors_total{port,kind}                truncated, rx_error, tx_refused, tx_bad_offload, tx_error
//	pktio_offload_total{port,kind}               gso, checksum_completed, checksum_unfixed, vlan_restored
//	l2_drops_total{reason}, l3_drops_total{reason}   drops by reason (stable names of l2.DropReason, l3.DropReason)
//	forwarded_total, fragmented_total, local_delivered_total, arp_received_total
//	arp_queued_total, arp_released_total, arp_expired_total   transit packets held for ARP, and how they ended
//	fib_lookups_total                            FIB lookups (forwarding and router output)
//	fib_routes{table,type}                       routes as configured
//	fdb_entries{bridge,type}                     learned, local, static, dynamic (configured)
//	fdb_{learned,moved,aged}_total, fdb_limit_hits_total, fdb_max_learned{bridge}
//	flood_total{mode}                            inline, deferred; flood_queue_drops_total
//	neigh_entries{state}, neigh_lookups_total{result}, neigh_queue_drops_total, arp_drops_total{reason}
//	neigh_queue_budget_drops_total, neigh_queued_bytes, neigh_table_fulls_total, neigh_forced_gc_evictions_total
//	arp_not_learned_total, arp_replies_limited_total   the limits under attack (docs/reliability.md)
//	icmp_sent_total{type}, icmp_rate_limited_total
//	punted_total                                 frames the router handed to the host path (l3)
//	hostpath_{punted,punt_drops,punt_errors,injected,inject_errors,inject_filtered}_total{port}
//	hostpath_rate_limited_total{port,class}      punts refused by a twin's rate limit
//	route_source_connected{source}               fpm: zebra connected; kernel: first sync done
//	route_source_{messages,batches,sweeps,swept_routes}_total{source}
//	route_source_routes_total{source,op}         added, replaced, unchanged, deleted, seeded (read from the kernel at start)
//	route_source_skipped_total{source,reason}    routes not installed, by reason
//	route_source_malformed_total{reason}         FPM frames that closed the connection
//	route_source_refused_total{reason}           FPM connections refused: peer (not allowed), busy (a session was live)
//	route_source_lag_seconds{source}             histogram: a route batch's first message read to its commit (fpm.Lag)
//	route_source_overruns_total                  kernel mirror: ENOBUFS, resynced
//
// Locking: Collect reads atomics and takes the short dump locks of the
// tables it counts (FDB, neighbour table).
package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/apply"
	"github.com/netfwd/netfwd/internal/fpm"
	"github.com/netfwd/netfwd/internal/hostpath"
	"github.com/netfwd/netfwd/internal/kmirror"
	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/pktio/afxdp"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
)

// PortIO is one opened port's socket counters.
type PortIO struct {
	Name  string
	Stats pktio.Stats
	// IO says how the port is opened ("afpacket", "afxdp native", ...);
	// XDP holds the AF_XDP-only counters (nil for AF_PACKET).
	IO  string
	XDP *afxdp.XDPStats
	// Control holds the control ring's counters (nil without one).
	Control *pktio.Stats
}

// Source is what the collector reads.
type Source struct {
	Engine     *l3.Engine
	Controller *apply.Controller // for the configured FDB limits (may be nil)
	// Ports returns the socket counters of the opened ports (may be nil).
	Ports func() []PortIO
	// Twins returns the host path's twins (may be nil).
	Twins func() []*hostpath.Twin
	// FPM and Mirror are the routing sources' counters (nil when off).
	FPM    *fpm.Stats
	Mirror *kmirror.Stats
	// XDPWaits returns the AF_XDP workers' wait counters, summed (may be nil).
	XDPWaits func() afxdp.WaitStats
}

// fdbBreakdownMax bounds the FDBs whose entries are counted by type at
// scrape time (the walk takes the FDB writer lock); larger ones report
// learned and configured totals only.
const fdbBreakdownMax = 1 << 16

// Collector is a prometheus.Collector over a running engine.
type Collector struct {
	src   Source
	descs map[string]*prometheus.Desc
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("netfwd_"+name, help, labels, nil)
}

// NewCollector returns a collector for src.
func NewCollector(src Source) *Collector {
	d := map[string]*prometheus.Desc{
		"port_rx_packets":   desc("port_rx_packets_total", "Frames received on the port and handed to the engine.", "port"),
		"port_rx_bytes":     desc("port_rx_bytes_total", "Bytes received on the port and handed to the engine.", "port"),
		"port_tx_packets":   desc("port_tx_packets_total", "Frames the engine queued for the port.", "port"),
		"port_tx_bytes":     desc("port_tx_bytes_total", "Bytes the engine queued for the port.", "port"),
		"port_rx_drops":     desc("port_rx_drops_total", "Frames received on the port and dropped (any reason).", "port"),
		"port_tx_drops":     desc("port_tx_drops_total", "Copies for the port dropped (transmit batch full or transmit error).", "port"),
		"pktio_rx":          desc("pktio_rx_packets_total", "Frames the port's RX rings delivered.", "port"),
		"pktio_tx":          desc("pktio_tx_packets_total", "Frames the kernel accepted for transmission on the port.", "port"),
		"pktio_ring_drops":  desc("pktio_ring_drops_total", "Frames the kernel dropped because an RX ring was full.", "port"),
		"pktio_freezes":     desc("pktio_ring_freezes_total", "Times an RX ring filled up.", "port"),
		"pktio_errors":      desc("pktio_errors_total", "Packet I/O errors by kind.", "port", "kind"),
		"pktio_offload":     desc("pktio_offload_total", "Offload fix-ups and super-frames by kind.", "port", "kind"),
		"port_io":           desc("port_io", "How the port is opened (1 for its io: afpacket, afxdp native, afxdp generic).", "port", "io"),
		"xdp_tx":            desc("xdp_tx_total", "AF_XDP frames sent, by how: descriptor (no copy), copy, no_buffer (dropped: no free UMEM frame).", "port", "how"),
		"ctl_rx":            desc("pktio_control_rx_packets_total", "Control-plane frames the port's control ring delivered (host path).", "port"),
		"ctl_ring_drops":    desc("pktio_control_ring_drops_total", "Control-plane frames dropped because the control ring was full.", "port"),
		"xdp_fill_empty":    desc("xdp_fill_ring_empty_total", "Times the kernel found an AF_XDP fill ring empty.", "port"),
		"xdp_kicks":         desc("xdp_tx_kicks_total", "AF_XDP transmit system calls, by result: sent, again (EAGAIN/EBUSY: more left or the device busy).", "port", "result"),
		"xdp_waits":         desc("xdp_worker_waits_total", "AF_XDP worker waits that found no frame at once, by how they ended: spin (frames came while spinning) or poll (blocked in poll(2): a wake-up).", "result"),
		"xdp_kick_gave_up":  desc("xdp_tx_kick_gave_up_total", "AF_XDP transmits that left frames on the TX ring for a later kick (the device made no progress).", "port"),
		"l2_drops":          desc("l2_drops_total", "Bridge drops by reason.", "reason"),
		"l3_drops":          desc("l3_drops_total", "Router drops by reason.", "reason"),
		"forwarded":         desc("forwarded_total", "Packets the router forwarded (sent after the route decision, at once or released after waiting for ARP)."),
		"arp_queued":        desc("arp_queued_total", "Transit packets held waiting for ARP resolution."),
		"arp_released":      desc("arp_released_total", "Held transit packets sent once ARP resolved (also in forwarded_total)."),
		"arp_expired":       desc("arp_expired_total", "Held transit packets dropped: resolution failed or timed out, queue overflow, egress down (also in l3_drops_total)."),
		"fragmented":        desc("fragmented_total", "Packets the router fragmented."),
		"local":             desc("local_delivered_total", "Packets addressed to the router."),
		"arp_in":            desc("arp_received_total", "ARP frames the router received."),
		"fib_lookups":       desc("fib_lookups_total", "FIB lookups."),
		"fib_routes":        desc("fib_routes", "Routes as configured, by table and type.", "table", "type"),
		"fdb_entries":       desc("fdb_entries", "FDB entries by type.", "bridge", "type"),
		"fdb_learned":       desc("fdb_learned_total", "FDB entries learned."),
		"fdb_moved":         desc("fdb_moved_total", "FDB entries moved to another port."),
		"fdb_aged":          desc("fdb_aged_total", "FDB entries aged out."),
		"fdb_limit_hits":    desc("fdb_limit_hits_total", "Sources not learned because a learning limit was reached."),
		"fdb_max_learned":   desc("fdb_max_learned", "The bridge's learned-entry limit in force (65536 unless configured).", "bridge"),
		"flood":             desc("flood_total", "Floods by mode.", "mode"),
		"flood_queue_drops": desc("flood_queue_drops_total", "Large floods dropped because the deferral queue was full."),
		"neigh_entries":     desc("neigh_entries", "Neighbour entries by state.", "state"),
		"neigh_lookups":     desc("neigh_lookups_total", "Neighbour lookups of the forwarding path by result.", "result"),
		"neigh_queue_drops": desc("neigh_queue_drops_total", "Packets dropped from full neighbour resolution queues."),
		"arp_drops":         desc("arp_drops_total", "ARP frames dropped by reason.", "reason"),
		"neigh_budget":      desc("neigh_queue_budget_drops_total", "Packets dropped from neighbour resolution queues for the global budget."),
		"neigh_queued":      desc("neigh_queued_bytes", "Bytes of packets waiting for neighbour resolution (charged size)."),
		"neigh_table_fulls": desc("neigh_table_fulls_total", "Neighbour entries not created: the table was at gc_thresh3 with nothing to remove."),
		"neigh_forced_gc":   desc("neigh_forced_gc_evictions_total", "Neighbour entries removed by the forced gc."),
		"arp_not_learned":   desc("arp_not_learned_total", "ARP requests to the router from unknown senders not learned: the table was at gc_thresh2."),
		"arp_limited":       desc("arp_replies_limited_total", "ARP requests from senders not learned left unanswered: over the reply limit."),
		"icmp_sent":         desc("icmp_sent_total", "ICMP messages the router sent, by type.", "type"),
		"icmp_limited":      desc("icmp_rate_limited_total", "ICMP errors suppressed by the rate limit."),
		"punted":            desc("punted_total", "Frames the router handed to the host path."),
		"hp_punted":         desc("hostpath_punted_total", "Frames written into the port's twin.", "port"),
		"hp_punt_drops":     desc("hostpath_punt_drops_total", "Punts dropped: the twin's queue was full or it had no device.", "port"),
		"hp_punt_errors":    desc("hostpath_punt_errors_total", "Punts refused as malformed or too big, or refused by the kernel.", "port"),
		"hp_rate_limited":   desc("hostpath_rate_limited_total", "Punts refused by the twin's rate limit, by class.", "port", "class"),
		"hp_injected":       desc("hostpath_injected_total", "Frames the kernel sent on the twin and netfwd sent out of the port.", "port"),
		"hp_inject_errors":  desc("hostpath_inject_errors_total", "Frames from the twin that could not be sent (interface down, unreadable).", "port"),
		"hp_inject_filter":  desc("hostpath_inject_filtered_total", "The kernel's ARP replies, dropped (netfwd answers ARP).", "port"),
		"rs_connected":      desc("route_source_connected", "fpm: zebra is connected; kernel: the mirror holds the kernel's table.", "source"),
		"rs_messages":       desc("route_source_messages_total", "Netlink messages read from the source.", "source"),
		"rs_batches":        desc("route_source_batches_total", "FIB transactions committed from the source.", "source"),
		"rs_sweeps":         desc("route_source_sweeps_total", "Stale-route sweeps (after a reconnect or a resync).", "source"),
		"rs_swept":          desc("route_source_swept_routes_total", "Stale routes removed by sweeps.", "source"),
		"rs_routes":         desc("route_source_routes_total", "Route messages applied, by operation.", "source", "op"),
		"rs_skipped":        desc("route_source_skipped_total", "Routes not installed, by reason.", "source", "reason"),
		"rs_malformed":      desc("route_source_malformed_total", "Malformed FPM frames (the connection is closed), by reason.", "reason"),
		"rs_refused":        desc("route_source_refused_total", "FPM connections refused: peer (its user or network is not allowed), busy (a session was live).", "reason"),
		"rs_lag":            desc("route_source_lag_seconds", "Delay of each route batch from its first message read to its commit in the FIB (batching wait included).", "source"),
		"rs_overruns":       desc("route_source_overruns_total", "Kernel mirror notifications lost (ENOBUFS), each followed by a resync."),
	}
	return &Collector{src: src, descs: d}
}

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect reads the counters.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	e := c.src.Engine
	counter := func(name string, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.descs[name], prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(name string, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.descs[name], prometheus.GaugeValue, v, labels...)
	}
	ds := e.Domain().Stats()
	for name, p := range ds.Ports {
		counter("port_rx_packets", p.RxPackets, name)
		counter("port_rx_bytes", p.RxBytes, name)
		counter("port_tx_packets", p.TxPackets, name)
		counter("port_tx_bytes", p.TxBytes, name)
		counter("port_rx_drops", p.RxDrops, name)
		counter("port_tx_drops", p.TxDrops, name)
	}
	for _, r := range l2.DropReasons() {
		counter("l2_drops", ds.Drop(r), r.String())
	}
	counter("flood", ds.FloodInline, "inline")
	counter("flood", ds.FloodDeferred, "deferred")
	counter("flood_queue_drops", ds.Drop(l2.DropFloodQueueFull))
	counter("fdb_learned", ds.FDBLearned)
	counter("fdb_moved", ds.FDBMoved)
	counter("fdb_aged", ds.FDBAged)
	counter("fdb_limit_hits", ds.FDBLimitHit)
	for _, b := range e.Domain().Bridges() {
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
				gauge("fdb_entries", float64(v), b.Name, t)
			}
		} else {
			gauge("fdb_entries", float64(f.Learned()), b.Name, "learned")
			gauge("fdb_entries", float64(f.Len()-f.Learned()), b.Name, "configured")
		}
		gauge("fdb_max_learned", float64(f.MaxLearned()), b.Name) // in force: the default when not configured
	}

	s := e.Stats()
	for r, v := range s.Drops {
		counter("l3_drops", v, r)
	}
	counter("forwarded", s.Forwarded)
	counter("arp_queued", s.Queued)
	counter("arp_released", s.Released)
	counter("arp_expired", s.Expired)
	counter("fragmented", s.Fragmented)
	counter("local", s.Local)
	counter("arp_in", s.ARPIn)
	counter("fib_lookups", s.FIBLookups)
	for t, v := range s.ICMPSent {
		counter("icmp_sent", v, t)
	}
	counter("icmp_limited", s.ICMPRateLimited)
	counter("punted", s.Punted)
	for table, types := range e.FIB().RouteCounts() {
		for typ, n := range types {
			gauge("fib_routes", float64(n), tableName(table), typ.String())
		}
	}

	ns := e.Router().Neighbours().Stats()
	for st, n := range ns.ByState {
		gauge("neigh_entries", float64(n), st)
	}
	counter("neigh_lookups", ns.Hits, "hit")
	counter("neigh_lookups", ns.Misses, "miss")
	counter("neigh_queue_drops", ns.QueueDrops)
	counter("neigh_budget", ns.QueueBudgetDrops)
	gauge("neigh_queued", float64(ns.QueuedBytes))
	counter("neigh_table_fulls", ns.TableFulls)
	counter("neigh_forced_gc", ns.ForcedGCEvictions)
	counter("arp_not_learned", ns.ARPNotLearned)
	counter("arp_limited", ns.ARPRepliesLimited)
	for r, v := range ns.ARPDrops {
		counter("arp_drops", v, r)
	}

	if c.src.Ports != nil {
		for _, p := range c.src.Ports() {
			st := p.Stats
			counter("pktio_rx", st.Rx.Packets, p.Name)
			counter("pktio_tx", st.Tx.Packets, p.Name)
			counter("pktio_ring_drops", st.Rx.RingDrops, p.Name)
			counter("pktio_freezes", st.Rx.RingFreezes, p.Name)
			counter("pktio_errors", st.Rx.Truncated, p.Name, "truncated")
			counter("pktio_errors", st.Rx.Errors, p.Name, "rx_error")
			counter("pktio_errors", st.Tx.Refused, p.Name, "tx_refused")
			counter("pktio_errors", st.Tx.BadOffload, p.Name, "tx_bad_offload")
			counter("pktio_errors", st.Tx.Errors, p.Name, "tx_error")
			counter("pktio_offload", st.Rx.GSO, p.Name, "gso")
			counter("pktio_offload", st.Rx.ChecksumCompleted, p.Name, "checksum_completed")
			counter("pktio_offload", st.Rx.ChecksumUnfixed, p.Name, "checksum_unfixed")
			counter("pktio_offload", st.Rx.VLANRestored, p.Name, "vlan_restored")
			if p.IO != "" {
				gauge("port_io", 1, p.Name, p.IO)
			}
			if c := p.Control; c != nil {
				counter("ctl_rx", c.Rx.Packets, p.Name)
				counter("ctl_ring_drops", c.Rx.RingDrops, p.Name)
			}
			if x := p.XDP; x != nil {
				counter("xdp_tx", x.TxByDescriptor, p.Name, "descriptor")
				counter("xdp_tx", x.TxCopied, p.Name, "copy")
				counter("xdp_tx", x.TxNoBuffer, p.Name, "no_buffer")
				counter("xdp_fill_empty", x.FillRingEmpty, p.Name)
				counter("xdp_kicks", x.TxKicks-x.TxKickAgain, p.Name, "sent")
				counter("xdp_kicks", x.TxKickAgain, p.Name, "again")
				counter("xdp_kick_gave_up", x.TxKickGaveUp, p.Name)
			}
		}
	}
	if c.src.Twins != nil {
		for _, t := range c.src.Twins() {
			st, port := t.Stats(), t.Port()
			counter("hp_punted", st.Punted, port)
			counter("hp_punt_drops", st.PuntDrops, port)
			counter("hp_punt_errors", st.PuntErrors, port)
			for cl, v := range st.RateLimited {
				counter("hp_rate_limited", v, port, hostpath.Class(cl).String())
			}
			counter("hp_injected", st.Injected, port)
			counter("hp_inject_errors", st.InjectErrors, port)
			counter("hp_inject_filter", st.InjectFiltered, port)
		}
	}
	routeSource := func(src string, connected bool, messages, batches, sweeps, swept uint64, rc *fpm.Counters) {
		b := 0.0
		if connected {
			b = 1
		}
		gauge("rs_connected", b, src)
		counter("rs_messages", messages, src)
		counter("rs_batches", batches, src)
		counter("rs_sweeps", sweeps, src)
		counter("rs_swept", swept, src)
		counter("rs_routes", rc.RoutesAdded.Load(), src, "added")
		counter("rs_routes", rc.RoutesReplaced.Load(), src, "replaced")
		counter("rs_routes", rc.RoutesUnchanged.Load(), src, "unchanged")
		counter("rs_routes", rc.RoutesDeleted.Load(), src, "deleted")
		counter("rs_routes", rc.RoutesSeeded.Load(), src, "seeded")
		for r, v := range rc.Skipped() {
			counter("rs_skipped", v, src, r)
		}
		n, sum, buckets := rc.Lag.Snapshot()
		ch <- prometheus.MustNewConstHistogram(c.descs["rs_lag"], n, sum, buckets, src)
	}
	if f := c.src.FPM; f != nil {
		routeSource("fpm", f.Connected.Load(), f.Messages.Load(), f.Batches.Load(), f.Sweeps.Load(), f.SweptRoutes.Load(), &f.C)
		for r, v := range f.Malformed() {
			counter("rs_malformed", v, r)
		}
		counter("rs_refused", f.RefusedPeers.Load(), "peer")
		counter("rs_refused", f.RefusedBusy.Load(), "busy")
	}
	if m := c.src.Mirror; m != nil {
		routeSource("kernel", m.Synced.Load(), m.Messages.Load(), m.Batches.Load(), m.Sweeps.Load(), m.SweptRoutes.Load(), &m.C)
		counter("rs_overruns", m.Overruns.Load())
	}
	if c.src.XDPWaits != nil {
		if w := c.src.XDPWaits(); w.Waits != 0 {
			counter("xdp_waits", w.Waits-w.Blocked, "spin")
			counter("xdp_waits", w.Blocked, "poll")
		}
	}
}

func tableName(id uint32) string {
	if n := fib.TableName(id); n != "" {
		return n
	}
	return strconv.FormatUint(uint64(id), 10)
}
