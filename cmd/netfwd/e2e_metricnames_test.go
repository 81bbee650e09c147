package main

// The metric names the end-to-end tests read (the daemon's contract,
// docs/daemon.md and internal/metrics).
const (
	metricPortRxPackets = "netfwd_port_rx_packets_total"
	metricPortTxPackets = "netfwd_port_tx_packets_total"
	metricPortRxBytes   = "netfwd_port_rx_bytes_total"
	metricForwarded     = "netfwd_forwarded_packets_total"
	metricL3Drops       = "netfwd_router_drops_total"
	metricL2Drops       = "netfwd_bridge_drops_total"
	metricICMPSent      = "netfwd_icmp_sent_total"
	metricFDBEntries    = "netfwd_fdb_entries"
	metricFDBMoved      = "netfwd_fdb_moved_total"
	metricNeighEntries  = "netfwd_neigh_entries"
	metricRoutes        = "netfwd_fib_routes"
)
