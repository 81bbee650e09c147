package afxdp

// xdpring: the four single-producer single-consumer rings of an XDP socket,
// mapped from the kernel. User space produces into FILL (buffers the kernel
// may receive into) and TX (frames to send), and consumes from RX (received
// frames) and COMPLETION (sent buffers coming back).
//
// Each ring keeps a private copy of its own index and a cached copy of the
// other side's, so the shared words are touched once per batch: a producer
// reloads the consumer index only when the cache says the ring is full, a
// consumer reloads the producer index only when the cache says it is empty.
// Publishing an index is an atomic store (release); reading the other side's
// is an atomic load (acquire), so descriptors written before a publish are
// seen by the other side after it.
//
// Locking: none; one owner goroutine per ring.

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/pktio"
)

// xdpRing is the part common to all four rings.
type xdpRing struct {
	mem      []byte  // the mapping (indexes, flags, entries)
	producer *uint32 // shared
	consumer *uint32 // shared
	flags    *uint32 // shared: XDP_RING_NEED_WAKEUP
	mask     uint32
	size     uint32

	// Owner side: our own index (producer rings: next to publish;
	// consumer rings: next to read) and the cached other side's.
	local, cached uint32
}

// mapRing maps one ring of fd at pgoff, entries of entrySize bytes.
func mapRing(fd int, pgoff int64, off unix.XDPRingOffset, entries, entrySize int) (xdpRing, error) {
	size := int(off.Desc) + entries*entrySize
	mem, err := unix.Mmap(fd, pgoff, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return xdpRing{}, fmt.Errorf("mmap ring at %#x (%d bytes): %w", pgoff, size, err)
	}
	pktio.Prefault(mem) // pktio/prefault.go
	return xdpRing{
		mem:      mem,
		producer: (*uint32)(unsafe.Pointer(&mem[off.Producer])),
		consumer: (*uint32)(unsafe.Pointer(&mem[off.Consumer])),
		flags:    (*uint32)(unsafe.Pointer(&mem[off.Flags])),
		mask:     uint32(entries - 1),
		size:     uint32(entries),
	}, nil
}

func (r *xdpRing) unmap() error {
	if r.mem == nil {
		return nil
	}
	err := unix.Munmap(r.mem)
	r.mem = nil
	return err
}

// needWakeup reports whether the kernel asks to be kicked (XDP_USE_NEED_WAKEUP).
func (r *xdpRing) needWakeup() bool {
	return atomic.LoadUint32(r.flags)&unix.XDP_RING_NEED_WAKEUP != 0
}

// Producer side (FILL, TX).

// free returns how many entries can be produced now (at most want),
// reloading the consumer index when the cache says fewer than want.
func (r *xdpRing) free(want uint32) uint32 {
	n := r.size - (r.local - r.cached)
	if n >= want {
		return n
	}
	r.cached = atomic.LoadUint32(r.consumer)
	return r.size - (r.local - r.cached)
}

// publish makes the produced entries visible to the kernel.
func (r *xdpRing) publish() { atomic.StoreUint32(r.producer, r.local) }

// pending is the number of produced entries the kernel has not consumed.
func (r *xdpRing) pending() uint32 { return r.local - atomic.LoadUint32(r.consumer) }

// Consumer side (RX, COMPLETION).

// ready returns how many entries can be consumed now (at most max),
// reloading the producer index when the cache is exhausted.
func (r *xdpRing) ready(max uint32) uint32 {
	n := r.cached - r.local
	if n == 0 {
		r.cached = atomic.LoadUint32(r.producer)
		n = r.cached - r.local
	}
	return min(n, max)
}

// peekReady reports whether the kernel has produced entries not consumed,
// with one load and no change to the cache (for spinning on many rings).
func (r *xdpRing) peekReady() bool {
	return r.cached != r.local || atomic.LoadUint32(r.producer) != r.local
}

// release hands consumed entries back to the kernel.
func (r *xdpRing) release() { atomic.StoreUint32(r.consumer, r.local) }

// descRing is an RX or TX ring: entries are descriptors.
type descRing struct {
	xdpRing
	descs []unix.XDPDesc
}

// addrRing is a FILL or COMPLETION ring: entries are UMEM addresses.
type addrRing struct {
	xdpRing
	addrs []uint64
}

func mapDescRing(fd int, pgoff int64, off unix.XDPRingOffset, entries int) (descRing, error) {
	r, err := mapRing(fd, pgoff, off, entries, int(unsafe.Sizeof(unix.XDPDesc{})))
	if err != nil {
		return descRing{}, err
	}
	return descRing{r, unsafe.Slice((*unix.XDPDesc)(unsafe.Pointer(&r.mem[off.Desc])), entries)}, nil
}

func mapAddrRing(fd int, pgoff int64, off unix.XDPRingOffset, entries int) (addrRing, error) {
	r, err := mapRing(fd, pgoff, off, entries, 8)
	if err != nil {
		return addrRing{}, err
	}
	return addrRing{r, unsafe.Slice((*uint64)(unsafe.Pointer(&r.mem[off.Desc])), entries)}, nil
}
