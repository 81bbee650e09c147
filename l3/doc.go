// Package l3 is netfwd's IPv4 router and the engine that composes it with
// the bridge (package l2): interfaces (routed ports, VLAN interfaces of a
// bridge, the bridge device), the forwarding path, ICMP as Linux sends it,
// and the glue to the neighbour table (package neigh). It does no I/O.
//
// An Engine holds the bridge domain and the Router; each datapath goroutine
// gets a Worker: ReceiveGSO (or Receive) takes a batch of frames received on
// a port, FlushOrigins (or Flush) hands the frames to send to the caller per
// port, and one housekeeping worker calls Tick every 10-100 ms. Workers
// never lock and allocate nothing per frame; the control plane (package
// internal/apply) changes the FIB, the interfaces and the bridge, which
// workers see atomically. Stats says how every frame that reached the router
// ended.
package l3
