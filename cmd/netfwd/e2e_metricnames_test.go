package main

// The metric names the end-to-end tests read (the daemon's contract:
// internal/metrics/collector.go).
const (
	metricPortRxPackets = "netfwd_port_rx_packets_total"
	metricPortTxPackets = "netfwd_port_tx_packets_total"
	metricPortRxBytes   = "netfwd_port_rx_bytes_total"
	metricForwarded     = "netfwd_forwarded_total"
	metricARPQueued     = "netfwd_arp_queued_total"
	metricARPReleased   = "netfwd_arp_released_total"
	metricARPExpired    = "netfwd_arp_expired_total"
	metricL3Drops       = "netfwd_l3_drops_total"
	metricVRFForwarded  = "netfwd_vrf_forwarded_total"
	metricL2Drops       = "netfwd_l2_drops_total"
	metricICMPSent      = "netfwd_icmp_sent_total"
	metricFDBEntries    = "netfwd_fdb_entries"
	metricFDBMoved      = "netfwd_fdb_moved_total"
	metricNeighEntries  = "netfwd_neigh_entries"
	metricRoutes        = "netfwd_fib_routes"
	metricFPMRefused    = "netfwd_route_source_refused_total"
)
