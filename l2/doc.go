// Package l2 is netfwd's VLAN-aware bridge with Linux's semantics: ports,
// VLANs, the forwarding database, flooding, delivery to the host (the
// router), neighbour suppression and an early multicast filter; no I/O.
//
// A Domain holds every port (PortIDs shared by bridged and routed ports) and
// the bridges, configured by typed ops, all or nothing (Prepare/Commit).
// Each datapath goroutine owns a Tx: Bridge.ReceiveBatch queues what a batch
// sends per port on it (frames for the host in Tx.Host), Bridge.Output sends
// the host's frames, Tx.Flush hands them over; no locks, no allocation per
// frame. docs/l2.md has the behaviour and the differences from Linux.
package l2
