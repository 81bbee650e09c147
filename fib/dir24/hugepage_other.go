//go:build !linux

// Huge-page advice is Linux-only; elsewhere the first-level array uses the
// default page size.

package fib

func adviseHugePages([]uint32) {}
