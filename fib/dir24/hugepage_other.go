//go:build !linux

// Huge-page advice is Linux-only; elsewhere the first-level array uses the
// default page size.

package dir24

func adviseHugePages([]uint32) {}
