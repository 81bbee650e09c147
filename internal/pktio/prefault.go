package pktio

// prefault: touching every page of a new mapping of a ring or UMEM before
// frames go through it.
//
// A ring's pages are in the process's page tables from the mmap on
// (MAP_POPULATE; packet_mmap inserts them all), but a hypervisor that
// shadows the guest's page tables (PVM, the VMs these benchmarks run on)
// builds its own entry at the first access from the CPU, and another at
// the first write: measured 0.7-1.7 µs a page at the first read and
// 3.5-4.5 µs at the first write, 0.01 µs after (a 2,048-page V2 ring,
// twice). The forwarding path writes every frame it routes (TTL,
// checksum) in the receive ring and copies it into the transmit ring, so
// a new mapping's first pass costs ~4 µs a frame more: a hot restart's
// successor, reading the predecessor's rings through its own mapping,
// caught up with the backlog at a fifth of its usual rate and the rings
// overflowed (issue 27). Prefault pays that before the first frame, and
// costs nothing measurable on bare metal.
//
// Locking: none. A receive ring may be written by the kernel (and read by
// a predecessor) meanwhile: the write is an atomic compare-and-swap of the
// page's first word with the value just read, which changes no byte
// whatever the other writers do (on amd64 LOCK CMPXCHG writes even when
// the comparison fails, so the page is written either way).

import (
	"sync/atomic"
	"unsafe"
)

// Prefault touches each page of mem for reading and writing, changing
// nothing. mem must be page-aligned (a mapping).
func Prefault(mem []byte) {
	const page = 4096
	for off := 0; off+4 <= len(mem); off += page {
		p := (*uint32)(unsafe.Pointer(&mem[off]))
		v := atomic.LoadUint32(p)
		atomic.CompareAndSwapUint32(p, v, v)
	}
}
