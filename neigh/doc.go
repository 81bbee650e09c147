// Package neigh is the IPv4 neighbour (ARP) table: next hops resolved to
// Ethernet addresses with the state machine, timers and limits of Linux's
// neighbour and ARP code at their defaults (docs/neigh.md lists the
// deliberate differences).
//
// A Table is shared by the router's workers; each datapath goroutine gets a
// Worker (Table.NewWorker). Per routed packet Worker.Output writes the
// adjacency (the 14-byte Ethernet header) into the frame without locks; when
// it reports false, Worker.Resolve takes the packet (queues a copy and asks
// for an ARP request). Worker.InputARP learns from received ARP and writes
// the replies. One housekeeping goroutine calls Table.Tick. Every call that
// changes the table appends what the caller must do (ARP requests to send,
// released packets, packets to answer with host unreachable, events) to a
// caller-owned Actions.
//
// Times are one monotonic clock in nanoseconds that the caller passes in;
// interfaces are indexes (0 is invalid).
package neigh
