// Package afxdp is the AF_XDP backend of pktio: an XDP program (built at
// run time, attached through a bpf_link) steers each queue of an interface
// into an XDP socket; the sockets of one worker share a UMEM, so a frame
// received on one port leaves another by descriptor, without a copy.
//
// Flow:
//
//	Open(name, cfg)    -> *Port: program + socket map on the interface
//	NewWorker(cfg)     -> *Worker: one UMEM per worker goroutine
//	w.Bind(port, q)    -> *Socket: queue q of port, receive and transmit
//	w.Wait(); s.TryRecv(frames, meta); ...; s2.Send(frames, nil)
//
// A Socket is both a pktio.Receiver and a pktio.Sender; a Worker is a
// pktio.Waiter, which also waits for the AF_PACKET queues given to it
// (Add) of ports that could not take AF_XDP. Port.NewTx gives goroutines
// without a socket on the port an afpacket transmit handle.
//
// Hot restart (handover.go): Port.Describe/AdoptPort and
// Worker.Describe/MapUMEM/AdoptWorkerUMEM pass a port's map, program and
// link and a worker's UMEM (a memfd), frame states and sockets to another
// process, which continues the rings where this one stopped.
//
// Concurrency: a Worker and its sockets have exactly one owner goroutine
// and no locks; Wake, WaitStats and the counters (Stats) are for any
// goroutine. Port.Close detaches the program; sockets keep their rings until
// their worker closes them.
//
// Design notes and measurements: docs/pktio.md.
package afxdp
