// Package pktio is what the daemon's packet I/O backends have in common:
// the batch API a worker loop uses without naming a backend (Receiver,
// Sender, Waitable, Waiter), the per-frame metadata (Meta, Flags, Offload),
// the counters (Stats), the Poller that parks an owner of AF_PACKET queues
// in the Go netpoller, the partial-checksum completion both backends apply,
// and running code in a network namespace (InNetns). The backends live in
// packages of their own, as gVisor keeps pkg/xdp apart from link/fdbased:
//
//   - afpacket (AF_PACKET): sockets with TPACKET_V3/V2 mmap receive rings,
//     batched transmit, PACKET_FANOUT across worker goroutines, the fix-ups
//     the kernel's offloads require before a frame can be forwarded (VLAN
//     tags moved into metadata, partial checksums, GSO super-frames), the
//     control-plane ring's filters and the hand-over of rings to a new
//     process (hot restart).
//   - afxdp (AF_XDP): an XDP program (built at run time, attached through a
//     bpf_link) steers each queue into an XDP socket; the sockets of one
//     worker share a UMEM, so a frame received on one port leaves another by
//     descriptor, without a copy. Goroutines without a socket on an AF_XDP
//     port send through afpacket transmit handles (afxdp imports afpacket;
//     neither imports the other otherwise).
//
// A worker loop (internal/daemon/worker.go):
//
//	n, err := q.TryRecv(frames, meta)   // q: a Receiver (afpacket.Queue, afxdp.Socket)
//	... engine reads/modifies frames[i][q.Headroom():] in place ...
//	tx.Send(out, offl)                  // tx: a Sender (afpacket.Tx, afxdp.Socket)
//	q.Release()                         // the frames go back to the ring
//	w.Wait()                            // w: a Waiter (Poller, afxdp.Worker) over Waitables
//
// Ownership: frames returned by Recv/TryRecv are valid until the next Recv,
// TryRecv or Release on the same Receiver (or Close). Copy a frame to keep
// it longer. Frames may be modified in place; the headroom in front of each
// frame is writable too, so a VLAN tag can be pushed without a copy.
//
// Concurrency: a Receiver and a Sender each have exactly one owner
// goroutine and no locks; counters are atomics readable from any goroutine
// (Stats). Each backend's package says how its ports stop.
//
// Design notes and measurements: docs/pktio.md.
package pktio
