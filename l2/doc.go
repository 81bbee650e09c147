// Package l2 is netfwd's VLAN-aware bridge: ports, VLANs, the forwarding
// database, flooding, host delivery to the router, neighbour suppression
// and the early multicast filter. It does no I/O.
//
// Flow: a Domain holds all ports (dense IDs, bridged and routed) and
// bridges, configured through typed ops (Prepare/Commit, all or nothing).
// Each datapath worker owns a Tx; it hands frames received on a port to
// Bridge.Receive/ReceiveBatch, which learns, looks up, floods and queues
// the output per egress port on the Tx; frames for the router come back in
// the Verdict (or Tx.Host). The worker flushes the Tx to transmit.
//
// Locking: one configuration writer at a time (Domain.mu; FDB.mu after
// it); the datapath never locks and reads immutable snapshots and atomics.
//
// docs/l2.md has the behaviour, the buffer-ownership rule and the
// deliberate differences from Linux.
package l2
