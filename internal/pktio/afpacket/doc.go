// Package afpacket is the AF_PACKET backend of pktio: sockets with
// TPACKET_V3 (or V2) mmap receive rings, batched transmit, PACKET_FANOUT
// across worker goroutines, and the fix-ups the kernel's offloads require
// before a frame can be forwarded (VLAN tags moved into metadata, partial
// checksums, GSO super-frames).
//
// Flow:
//
//	Open(name, cfg) -> *Port: one fanout group, cfg.Queues sockets, each with
//	  its own RX ring (Queue). Worker i owns Queue(i):
//	    q.Recv(frames, meta)  frames point into the ring (zero copy), fixed up:
//	                          VLAN tag restored into the bytes, partial
//	                          checksums completed, own frames skipped
//	    ... engine reads/modifies frames in place ...
//	    tx.Send(frames, offl) on the egress port's Tx handle: TX ring copy +
//	                          one send(2) (default) or one sendmmsg(2)
//	    q.Recv(...)           returns the previous batch's ring blocks
//
// A Queue is a pktio.Receiver and a pktio.Waitable, a Tx a pktio.Sender.
// Ownership: frames returned by Recv are valid until the next Recv or
// Release on the same Queue (or Close). Copy a frame to keep it longer.
// Frames may be modified in place; cfg.Headroom bytes in front of each frame
// are writable too (frames[i][:Headroom]), so a VLAN tag can be pushed
// without a copy.
//
// Concurrency: a Queue and a Tx each have exactly one owner goroutine and
// no locks. Counters are atomics readable from any goroutine (Stats).
// Stopping is two-phase: Port.Shutdown (any goroutine, any time) closes the
// sockets, so owners blocked in Recv or Send return pktio.ErrClosed and
// owners in the middle of a batch get it on their next call; Port.Close,
// called after the owners have returned, also unmaps the rings (frames
// become invalid memory then, which is why Shutdown alone never unmaps).
//
// Design notes and measurements: docs/pktio.md.
package afpacket
