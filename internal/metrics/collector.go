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
//	pktio_ring_overflows_total{port}             seconds in which the port's RX rings dropped frames
//	pktio_rollover_total{port}                   frames of a full RX queue put in a sibling queue instead
//	pktio_ring_freezes_total{port}               times the ring filled up
//	pktio_control_{rx_packets,ring_drops}_total{port}  the control ring (host path)
//	pktio_errors_total{port,kind}                truncated, rx_error, tx_refused, tx_bad_offload, tx_error
//	pktio_offload_total{port,kind}               gso, checksum_completed, checksum_unfixed, vlan_restored
//	l2_drops_total{reason}, l3_drops_total{reason}   drops by reason (stable names of l2.DropReason, l3.DropReason)
//	forwarded_total, fragmented_total, local_delivered_total, arp_received_total
//	vrf_forwarded_total{vrf}, vrf_l3_drops_total{vrf,reason}   per VRF, from the route decision on (l3/vrfstats.go)
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
	// RingOverflows is how many seconds the port's receive rings dropped
	// frames in (the daemon's ring watch).
	RingOverflows uint64
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
		"pktio_overflows":   desc("pktio_ring_overflows_total", "Seconds in which an RX ring of the port dropped frames (a burst overflowed it; logged).", "port"),
		"pktio_rollover":    desc("pktio_rollover_total", "Frames whose RX queue was full, put in another queue of the port (AF_PACKET fanout rollover): not lost.", "port"),
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
		"vrf_forwarded":     desc("vrf_forwarded_total", "Transit packets received on a VRF's interfaces that the router handed to transmit (sent, or held for ARP).", "vrf"),
		"vrf_l3_drops":      desc("vrf_l3_drops_total", "Router drops at or after the route decision of packets received on a VRF's interfaces, by reason.", "vrf", "reason"),
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

// Collect reads the counters: each subsystem's readers are in collect.go.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	m := emitter{c: c, ch: ch}
	e := c.src.Engine
	m.bridges(e.Domain())
	m.router(e)
	m.neighbours(e)
	if c.src.Ports != nil {
		for _, p := range c.src.Ports() {
			m.port(p)
		}
	}
	if c.src.Twins != nil {
		for _, t := range c.src.Twins() {
			m.twin(t)
		}
	}
	if f := c.src.FPM; f != nil {
		m.fpm(f)
	}
	if k := c.src.Mirror; k != nil {
		m.mirror(k)
	}
	if c.src.XDPWaits != nil {
		m.xdpWaits(c.src.XDPWaits())
	}
}

func tableName(id uint32) string {
	if n := fib.TableName(id); n != "" {
		return n
	}
	return strconv.FormatUint(uint64(id), 10)
}
