package dir24

// Transparent huge pages for the first-level array: random lookups over
// 64 MiB touch a different 4 KiB page almost every time, and the page walks
// of TLB misses cost more than the data access; with 2 MiB pages the whole
// array needs 32 TLB entries (measured in docs/fib-compiled.md). Advice only:
// if the kernel refuses (THP "never"), lookups are correct, just slower.

import (
	"syscall"
	"unsafe"
)

func adviseHugePages(a []uint32) {
	if len(a) == 0 {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&a[0])), len(a)*4)
	// madvise needs a page-aligned start; the runtime allocates large
	// objects page-aligned, but trim to be safe.
	const page = 4096
	off := int((page - uintptr(unsafe.Pointer(&b[0]))%page) % page)
	if off >= len(b) {
		return
	}
	_ = syscall.Madvise(b[off:], syscall.MADV_HUGEPAGE)
}
